// Chat requests with tools: validation (400s naming the field), tool_choice semantics (auto needs
// the server flags; required and named become a JSON-schema constraint), tools and tool history
// rendered by the real Qwen2.5, Qwen3 and DeepSeek templates, reasoning switches; and the
// response shapes of parsed output (message.tool_calls, reasoning, streaming tool-call deltas).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/json.h"
#include "net/sse.h"
#include "server/openai_request.h"
#include "server/response_assembler.h"
#include "server/tool_parsers.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {
namespace {

using testing::shared_data_path;

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Weather in a city", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
  "properties": {}}}}])";

std::string body(const std::string& extra,
                 const std::string& messages = R"([{"role": "user", "content": "Paris?"}])") {
  return R"({"messages": )" + messages + (extra.empty() ? "" : ", " + extra) + "}";
}

// A parse context on a model's tokenizer directory (symlinks to shared files) and template.
class ChatTools : public ::testing::Test {
 protected:
  // `config_text`, when given, is written as tokenizer_config.json instead of linking
  // `config_rel`.
  void use(const std::string& vocab_dir, const std::string& config_rel,
           const std::string& config_text = "") {
    char tmpl[] = "/tmp/strata_chattools_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    for (const char* f : {"vocab.json", "merges.txt"})
      ASSERT_EQ(::symlink(shared_data_path(vocab_dir + "/" + f).c_str(), (dir_ + "/" + f).c_str()),
                0);
    if (!config_text.empty())
      std::ofstream(dir_ + "/tokenizer_config.json") << config_text;
    else
      ASSERT_EQ(::symlink(shared_data_path(config_rel).c_str(),
                          (dir_ + "/tokenizer_config.json").c_str()),
                0);
    auto t = Tokenizer::load(dir_);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    tok_ = *t;
    auto c = load_chat_template(dir_);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    tmpl_ = std::make_shared<ChatTemplate>(std::move(c).value());
    ctx_.tokenizer = tok_.get();
    ctx_.chat_template = tmpl_.get();
    ctx_.max_n = 8;
  }
  void TearDown() override {
    if (dir_.empty()) return;
    for (const char* f : {"vocab.json", "merges.txt", "tokenizer_config.json"})
      ::unlink((dir_ + "/" + f).c_str());
    ::rmdir(dir_.c_str());
  }
  GenerationRequest ok(const std::string& b) {
    auto r = parse_chat_request(b, ctx_);
    EXPECT_TRUE(r.ok()) << b << " -> " << (r.ok() ? "" : r.error().message);
    return r.ok() ? r.value() : GenerationRequest{};
  }
  void auto_tools(const std::string& parser) {
    ctx_.enable_auto_tool_choice = true;
    ctx_.tool_call_parser = parser;
  }

  std::string dir_;
  std::shared_ptr<const Tokenizer> tok_;
  std::shared_ptr<ChatTemplate> tmpl_;
  ParseContext ctx_;
};

TEST_F(ChatTools, Qwen25TemplateGetsToolsAndToolHistory) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  use("tokenizers/qwen2.5", "tokenizers/qwen2.5/tokenizer_config.json");
  auto_tools("hermes");
  const std::string history = R"([{"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"}])";
  GenerationRequest r = ok(body(std::string(R"("tools": )") + kTools, history));
  const std::string& prompt = r.prompts[0].text;
  EXPECT_NE(prompt.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
                        "\"get_weather\", \"description\": \"Weather in a city\""),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", "
                        "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"),
            std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<|im_start|>user\n<tool_response>\n18C, sunny\n</tool_response>"
                        "<|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos)
      << prompt;
  EXPECT_EQ(r.prompts[0].token_ids, *tok_->encode(prompt, false));
  // auto (the default with tools): parsed by the server's parser, markers kept in the text.
  EXPECT_EQ(r.chat_output.tool_choice, ToolChoice::kAuto);
  EXPECT_EQ(r.chat_output.tool_parser, "hermes");
  EXPECT_FALSE(r.params.skip_special_tokens);
  ASSERT_TRUE(r.chat_output.tools);
  EXPECT_EQ(r.chat_output.tools->size(), 2u);
  EXPECT_EQ(r.structured.kind, StructuredOutput::Kind::kNone);
  // tool_choice none: the tools stay in the prompt (as vLLM), unless the server says otherwise.
  r = ok(body(std::string(R"("tool_choice": "none", "tools": )") + kTools));
  EXPECT_EQ(r.chat_output.tool_choice, ToolChoice::kNone);
  EXPECT_TRUE(r.params.skip_special_tokens);
  EXPECT_NE(r.prompts[0].text.find("<tools>"), std::string::npos);
  ctx_.exclude_tools_when_tool_choice_none = true;
  r = ok(body(std::string(R"("tool_choice": "none", "tools": )") + kTools));
  EXPECT_EQ(r.prompts[0].text.find("<tools>"), std::string::npos);
}

TEST_F(ChatTools, RequiredAndNamedBecomeSchemaConstraints) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  use("tokenizers/qwen2.5", "tokenizers/qwen2.5/tokenizer_config.json");
  // No --enable-auto-tool-choice needed for these.
  GenerationRequest r = ok(body(std::string(R"("tool_choice": "required", "tools": )") + kTools));
  const OrderedJson tools = OrderedJson::parse(kTools);
  EXPECT_EQ(r.chat_output.tool_choice, ToolChoice::kRequired);
  EXPECT_EQ(r.structured.kind, StructuredOutput::Kind::kJsonSchema);
  EXPECT_EQ(r.structured.param, "tool_choice");
  EXPECT_EQ(r.structured.text, required_tool_choice_schema(tools, true));
  r = ok(body(std::string(R"("tool_choice": "required", "parallel_tool_calls": false, "tools": )") +
              kTools));
  EXPECT_EQ(r.structured.text, required_tool_choice_schema(tools, false));
  EXPECT_FALSE(r.chat_output.parallel_tool_calls);
  r = ok(
      body(std::string(R"("tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                             "tools": )") +
           kTools));
  EXPECT_EQ(r.chat_output.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.chat_output.named_tool, "get_weather");
  EXPECT_EQ(Json::parse(r.structured.text),
            Json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]})"));
}

TEST_F(ChatTools, ErrorsNameTheField) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  use("tokenizers/qwen2.5", "tokenizers/qwen2.5/tokenizer_config.json");
  struct Case {
    std::string extra;
    const char* param;
    const char* text;
  };
  const std::string tools = std::string(R"("tools": )") + kTools;
  const Case cases[] = {
      {tools, "tool_choice", "\"auto\" tool choice requires --enable-auto-tool-choice"},
      {R"("tool_choice": "auto", )" + tools, "tool_choice", "requires --enable-auto-tool-choice"},
      {R"("tools": {})", "tools", "must be an array"},
      {R"("tools": [1])", "tools", "tools[0] must be an object"},
      {R"("tools": [{"function": {"name": "f"}}])", "tools", "tools[0].type must be \"function\""},
      {R"("tools": [{"type": "code", "function": {"name": "f"}}])", "tools", "got \"code\""},
      {R"("tools": [{"type": "function"}])", "tools", "tools[0].function must be an object"},
      {R"("tools": [{"type": "function", "function": {"name": ""}}])", "tools",
       "function.name is required"},
      {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])", "tools",
       "parameters must be a JSON Schema object"},
      {R"("tool_choice": "sometimes", )" + tools, "tool_choice", "tool_choice must be"},
      {R"("tool_choice": {"type": "function"}, )" + tools, "tool_choice",
       "a tool_choice object must be"},
      {R"("tool_choice": {"type": "function", "function": {"name": "nope"}}, )" + tools,
       "tool_choice", "'nope', which is not among the tools"},
      {R"("tool_choice": "required")", "tool_choice", "needs a non-empty tools array"},
      {R"("tool_choice": "required", "tools": [])", "tool_choice", "needs a non-empty tools"},
      {R"("parallel_tool_calls": "yes")", "parallel_tool_calls", "must be a boolean"},
      {R"("reasoning_effort": "extreme")", "reasoning_effort", "must be one of"},
  };
  for (const auto& c : cases) {
    auto r = parse_chat_request(body(c.extra), ctx_);
    ASSERT_FALSE(r.ok()) << c.extra;
    EXPECT_EQ(r.error().status, 400) << c.extra;
    EXPECT_EQ(r.error().param, c.param) << c.extra << " -> " << r.error().message;
    EXPECT_NE(r.error().message.find(c.text), std::string::npos)
        << c.extra << " -> " << r.error().message;
  }
}

TEST_F(ChatTools, Qwen3ThinkingSwitchAndReasoningHistory) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen3/tokenizer_config.json");
  use("tokenizers/qwen2.5", "tokenizers/qwen3/tokenizer_config.json");
  ctx_.reasoning_parser = "qwen3";
  GenerationRequest r = ok(body(R"("chat_template_kwargs": {"enable_thinking": false})"));
  EXPECT_EQ(r.chat_output.reasoning_parser, "qwen3");
  EXPECT_EQ(r.chat_output.thinking, false);
  const std::string& p = r.prompts[0].text;
  const std::string tail = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  ASSERT_GE(p.size(), tail.size());
  EXPECT_EQ(p.substr(p.size() - tail.size()), tail) << p;
  // Earlier reasoning sent back as reasoning_content (or vLLM's reasoning) reaches the template
  // of a turn after the last user query.
  const std::string history = R"([{"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4", "reasoning": "Add them."},
    {"role": "user", "content": "3+3?"},
    {"role": "assistant", "content": "6", "reasoning_content": "Add again."}])";
  r = ok(body(R"("add_generation_prompt": false)", history));
  EXPECT_NE(r.prompts[0].text.find("<think>\nAdd again.\n</think>\n\n6"), std::string::npos)
      << r.prompts[0].text;
}

TEST_F(ChatTools, DeepSeekTemplatesRenderToolsAndThinking) {
  STRATA_REQUIRE_SHARED("tokenizers/deepseek-v3/deepseek-v3.1_tokenizer_config.json");
  // DeepSeek's vocabulary is not in the shared data: its V3.1 config (template, BOS/EOS) over
  // Qwen2.5's BPE with DeepSeek's special tokens added.
  Json cfg = Json::parse(std::ifstream(
      shared_data_path("tokenizers/deepseek-v3/deepseek-v3.1_tokenizer_config.json")));
  int id = 151665;
  for (const char* t :
       {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
        "<think>", "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
        "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"})
    cfg["added_tokens_decoder"][std::to_string(id++)] = {{"content", t}, {"special", true}};
  use("tokenizers/qwen2.5", "", cfg.dump());
  ctx_.reasoning_parser = "deepseek_v3";
  GenerationRequest r = ok(body(R"("chat_template_kwargs": {"thinking": true})"));
  EXPECT_EQ(r.chat_output.thinking, true);
  const std::string& p = r.prompts[0].text;
  EXPECT_EQ(p.substr(p.size() - std::string("<｜Assistant｜><think>").size()),
            "<｜Assistant｜><think>")
      << p;
  r = ok(body(""));
  EXPECT_FALSE(r.chat_output.thinking.has_value());
  EXPECT_NE(r.prompts[0].text.find("<｜Assistant｜></think>"), std::string::npos);
  // Its template joins tool-call arguments as text (vLLM hands templates objects, which this
  // one cannot take): the history renders with the arguments as sent.
  r = ok(body("", R"([{"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "18C"}])"));
  EXPECT_NE(r.prompts[0].text.find("<｜User｜>Weather?<｜Assistant｜></think><｜tool▁calls▁begin｜>"
                                   "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": "
                                   "\"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
                                   "<｜end▁of▁sentence｜><｜tool▁output▁begin｜>18C"
                                   "<｜tool▁output▁end｜>"),
            std::string::npos)
      << r.prompts[0].text;
}

TEST_F(ChatTools, ReasoningEffortReachesTheTemplate) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  use("tokenizers/qwen2.5", "tokenizers/qwen2.5/tokenizer_config.json");
  auto t = ChatTemplate::parse("effort={{ reasoning_effort }};{{ messages[0]['content'] }}");
  ASSERT_TRUE(t.ok());
  ctx_.chat_template = &*t;
  EXPECT_EQ(ok(body(R"("reasoning_effort": "high")")).prompts[0].text, "effort=high;Paris?");
  // An explicit template kwarg wins.
  EXPECT_EQ(ok(body(R"("reasoning_effort": "high",
                       "chat_template_kwargs": {"reasoning_effort": "low"})"))
                .prompts[0]
                .text,
            "effort=low;Paris?");
}

// --- Response shapes -----------------------------------------------------------------------

engine::OutputChunk out(std::string text, int64_t total, const char* finish = nullptr) {
  engine::OutputChunk c;
  c.index = 0;
  c.token_ids = {1};
  c.text = std::move(text);
  c.num_prompt_tokens = 3;
  c.num_output_tokens = total;
  if (finish) {
    c.finished = true;
    c.finish_reason = finish;
  }
  return c;
}

GenerationRequest parsed_request(bool stream) {
  GenerationRequest r;
  r.kind = ApiKind::kChat;
  r.stream = stream;
  r.prompts.push_back({{1, 2, 3}, "<|im_start|>assistant\n"});
  r.chat_output.tool_choice = ToolChoice::kAuto;
  r.chat_output.tool_parser = "hermes";
  r.chat_output.reasoning_parser = "qwen3";
  r.chat_output.tools = std::make_shared<const OrderedJson>(OrderedJson::parse(kTools));
  return r;
}

const std::vector<std::string> kPieces = {"<think>",
                                          "Need weather",
                                          ".</think>",
                                          "Checking.\n<tool",
                                          "_call>\n{\"name\": \"get_",
                                          "weather\", \"arguments\": {\"city\": ",
                                          "\"Paris\"}}\n</tool_call>"};

TEST(ParsedResponses, NonStreamingMessage) {
  ResponseAssembler a(parsed_request(false), {"chatcmpl-1", 1, "m", nullptr, "assistant"});
  for (size_t i = 0; i < kPieces.size(); ++i)
    a.add(0,
          out(kPieces[i], static_cast<int64_t>(i + 1), i + 1 == kPieces.size() ? "stop" : nullptr));
  Json j = Json::parse(a.final_body());
  const Json& ch = j["choices"][0];
  EXPECT_EQ(ch["finish_reason"], "tool_calls");
  const Json& m = ch["message"];
  EXPECT_EQ(m["content"], "Checking.\n");
  EXPECT_EQ(m["reasoning"], "Need weather.");
  EXPECT_EQ(m["reasoning_content"], "Need weather.");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris"})");
}

TEST(ParsedResponses, NoCallsLeaveContentAndStop) {
  GenerationRequest req = parsed_request(false);
  ResponseAssembler a(req, {"chatcmpl-1", 1, "m", nullptr, "assistant"});
  a.add(0, out("Just text.", 2, "stop"));
  Json j = Json::parse(a.final_body());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Just text.");
  EXPECT_TRUE(j["choices"][0]["message"]["tool_calls"].empty());
  EXPECT_TRUE(j["choices"][0]["message"]["reasoning"].is_null());
}

TEST(ParsedResponses, StreamingDeltas) {
  ResponseAssembler a(parsed_request(true), {"chatcmpl-1", 1, "m", nullptr, "assistant"});
  std::string sse = a.stream_begin();
  for (size_t i = 0; i < kPieces.size(); ++i)
    sse += a.stream_chunk(0, out(kPieces[i], static_cast<int64_t>(i + 1),
                                 i + 1 == kPieces.size() ? "stop" : nullptr));
  sse += a.stream_end();
  std::string content, reasoning, reasoning_content, name, args, id, finish;
  int name_deltas = 0;
  std::vector<std::string> data;
  net::SseParser parser;
  parser.feed(sse, [&](const net::SseEvent& e) { data.push_back(e.data); });
  ASSERT_EQ(data.back(), "[DONE]");
  data.pop_back();
  for (const auto& ev : data) {
    Json j = Json::parse(ev);
    const Json& ch = j["choices"][0];
    const Json& d = ch["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("reasoning")) reasoning += d["reasoning"].get<std::string>();
    if (d.contains("reasoning_content"))
      reasoning_content += d["reasoning_content"].get<std::string>();
    if (d.contains("tool_calls")) {
      for (const auto& t : d["tool_calls"]) {
        EXPECT_EQ(t["index"], 0);
        if (t.contains("id")) {
          ++name_deltas;
          id = t["id"];
          EXPECT_EQ(t["type"], "function");
          name = t["function"]["name"];
        }
        args += t["function"]["arguments"].get<std::string>();
      }
    }
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_EQ(content, "Checking.\n");
  EXPECT_EQ(reasoning, "Need weather.");
  EXPECT_EQ(reasoning_content, reasoning);
  EXPECT_EQ(name_deltas, 1);
  EXPECT_EQ(name, "get_weather");
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(args, R"({"city": "Paris"})");
  EXPECT_EQ(finish, "tool_calls");
}

}  // namespace
}  // namespace strata::server
