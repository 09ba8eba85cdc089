// Tool-call and reasoning parsers on the exact wire formats, with real tokenizers: each model
// output is encoded to token ids and streamed one token at a time (and one byte at a time); the
// concatenated deltas must give the same content, reasoning and calls as the whole text, the
// first delta of each call must carry its id and whole name, and the results must be the expected
// ones.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include "core/json.h"
#include "server/reasoning_parsers.h"
#include "server/tool_parsers.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {
namespace {

using testing::shared_data_path;

struct Outcome {
  std::string content, reasoning;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

using Factory = std::function<std::unique_ptr<ChatOutputParser>()>;

Outcome whole(const Factory& make, const std::string& text) {
  auto p = make();
  p->feed(text);
  p->finish();
  Outcome o{p->content(), p->reasoning(), {}};
  for (const auto& c : p->tool_calls()) o.calls.emplace_back(c.name, c.arguments);
  return o;
}

// Streams `pieces`, checking the delta shapes, and returns what a client assembles.
Outcome streamed(const Factory& make, const std::vector<std::string>& pieces,
                 const std::string& what) {
  auto p = make();
  Outcome o;
  std::map<int, std::string> ids;
  auto take = [&](const OutputDelta& d) {
    o.content += d.content;
    o.reasoning += d.reasoning;
    for (const auto& t : d.tool_calls) {
      if (t.first) {
        EXPECT_EQ(t.index, static_cast<int>(o.calls.size())) << what;
        EXPECT_FALSE(t.id.empty()) << what;
        EXPECT_FALSE(t.name.empty()) << what;
        EXPECT_EQ(ids.count(t.index), 0u) << what;
        ids[t.index] = t.id;
        o.calls.emplace_back(t.name, t.arguments);
      } else {
        ASSERT_LT(t.index, static_cast<int>(o.calls.size())) << what << ": args before name";
        EXPECT_TRUE(t.id.empty() && t.name.empty()) << what;
        o.calls[t.index].second += t.arguments;
      }
    }
  };
  for (const auto& piece : pieces) take(p->feed(piece));
  take(p->finish());
  return o;
}

// Pieces of `text` as a detokenizer streams them: one token at a time, a piece going out once
// its bytes form whole characters.
std::vector<std::string> token_pieces(const Tokenizer& tok, const std::string& text) {
  auto ids = tok.encode(text, false);
  EXPECT_TRUE(ids.ok());
  EXPECT_EQ(tok.decode(*ids, false), text) << "the tokenizer does not round-trip the text";
  std::vector<std::string> pieces;
  std::string sent;
  for (size_t k = 1; k <= ids->size(); ++k) {
    std::string cur = tok.decode(std::span<const int32_t>(ids->data(), k), false);
    if (cur.size() >= 3 && cur.compare(cur.size() - 3, 3, "\xEF\xBF\xBD") == 0 && k < ids->size())
      continue;  // an incomplete character
    if (cur.size() > sent.size()) pieces.push_back(cur.substr(sent.size()));
    sent = cur;
  }
  EXPECT_GE(pieces.size(), 2u);
  return pieces;
}

std::vector<std::string> byte_pieces(const std::string& text) {
  std::vector<std::string> out;
  for (char c : text) out.emplace_back(1, c);
  return out;
}

void expect_same(const Outcome& a, const Outcome& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  EXPECT_EQ(a.reasoning, b.reasoning) << what;
  EXPECT_EQ(a.calls, b.calls) << what;
}

// Whole, per-token and per-byte extraction agree; returns the whole result.
Outcome check(const Factory& make, const Tokenizer& tok, const std::string& text) {
  Outcome w = whole(make, text);
  expect_same(streamed(make, token_pieces(tok, text), "tokens: " + text), w, "tokens: " + text);
  expect_same(streamed(make, byte_pieces(text), "bytes: " + text), w, "bytes: " + text);
  return w;
}

// A directory of symlinks to shared tokenizer files plus a written tokenizer_config.json.
class TokenizerDir {
 public:
  TokenizerDir(const std::vector<std::pair<std::string, std::string>>& links,
               const std::string& config_json) {
    char tmpl[] = "/tmp/strata_toolparse_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    for (const auto& [name, target] : links)
      EXPECT_EQ(::symlink(shared_data_path(target).c_str(), (dir_ + "/" + name).c_str()), 0);
    if (!config_json.empty()) std::ofstream(dir_ + "/tokenizer_config.json") << config_json;
  }
  ~TokenizerDir() {
    for (const char* f : {"vocab.json", "merges.txt", "tokenizer_config.json"})
      ::unlink((dir_ + "/" + f).c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

std::shared_ptr<const Tokenizer> load(const std::string& path) {
  auto t = Tokenizer::load(path);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : nullptr;
}

std::string read_file(const std::string& rel) {
  std::ifstream in(shared_data_path(rel));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Qwen2.5's vocabulary with `config` (a tokenizer_config.json text).
std::shared_ptr<const Tokenizer> qwen_vocab_with(const std::string& config) {
  TokenizerDir d({{"vocab.json", "tokenizers/qwen2.5/vocab.json"},
                  {"merges.txt", "tokenizers/qwen2.5/merges.txt"}},
                 config);
  return load(d.path());
}

// DeepSeek's vocabularies are not in the shared data: Qwen2.5's BPE (R1-Distill-Qwen's base)
// with DeepSeek's tool-call and think markers added as tokens, as R1-Distill-Qwen has them.
std::shared_ptr<const Tokenizer> deepseek_like() {
  Json cfg;
  int id = 151665;
  for (const char* t : {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                        "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "<｜end▁of▁sentence｜>"}) {
    cfg["added_tokens_decoder"][std::to_string(id++)] = {{"content", t}, {"special", true}};
  }
  for (const char* t : {"<think>", "</think>"})
    cfg["added_tokens_decoder"][std::to_string(id++)] = {{"content", t}, {"special", false}};
  return qwen_vocab_with(cfg.dump());
}

Factory tools_only(const std::string& name, const OrderedJson* tools = nullptr) {
  return [name, tools] {
    auto t = make_tool_parser(name, tools, true);
    EXPECT_TRUE(t.ok());
    return std::make_unique<ChatOutputParser>(nullptr, std::move(t).value());
  };
}

Factory with_reasoning(const std::string& reasoning, const std::string& tool,
                       const std::string& prompt = "", std::optional<bool> thinking = {},
                       const OrderedJson* tools = nullptr) {
  return [=] {
    auto r = ReasoningParser::create(reasoning, prompt, thinking);
    EXPECT_TRUE(r.ok());
    std::unique_ptr<ToolCallParser> t;
    if (!tool.empty()) t = std::move(make_tool_parser(tool, tools, true)).value();
    return std::make_unique<ChatOutputParser>(std::move(r).value(), std::move(t));
  };
}

using Calls = std::vector<std::pair<std::string, std::string>>;

TEST(ToolParsers, HermesOnQwen25) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  auto tok = load(shared_data_path("tokenizers/qwen2.5"));
  ASSERT_TRUE(tok);
  auto h = tools_only("hermes");
  Outcome o = check(h, *tok,
                    "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                    "{\"city\": \"Paris\", \"unit\": \"°C\"}}\n</tool_call>\n<tool_call>\n"
                    "{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>");
  EXPECT_EQ(o.content, "Let me check.\n");
  EXPECT_EQ(o.calls, (Calls{{"get_weather", R"({"city": "Paris", "unit": "°C"})"},
                            {"get_time", R"({"tz": "CET"})"}}));
  // Arguments before the name, nested objects, escapes inside strings, no arguments key.
  o = check(h, *tok,
            "<tool_call>{\"arguments\": {\"q\": \"a \\\"}\\\" b\", \"n\": [1, {\"x\": 2}]}, "
            "\"name\": \"search\"}</tool_call><tool_call>{\"name\": \"ping\"}</tool_call>");
  EXPECT_EQ(o.content, "");
  EXPECT_EQ(o.calls,
            (Calls{{"search", R"({"q": "a \"}\" b", "n": [1, {"x": 2}]})"}, {"ping", "{}"}}));
  // No call: all content, even with a '<' that looks like a marker start.
  o = check(h, *tok, "The answer is 2 < 3 <tool");
  EXPECT_EQ(o.content, "The answer is 2 < 3 <tool");
  EXPECT_TRUE(o.calls.empty());
  // An unreadable call: the text is content, as vLLM answers.
  o = check(h, *tok, "<tool_call>not json</tool_call>");
  EXPECT_EQ(o.content, "<tool_call>not json</tool_call>");
  EXPECT_TRUE(o.calls.empty());
  // Cut off inside the arguments (max_tokens): the call is reported with what was written.
  o = check(h, *tok, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"xy");
  EXPECT_EQ(o.calls, (Calls{{"f", "{\"a\": \"xy"}}));
}

TEST(ToolParsers, Llama3JsonOnLlama3) {
  STRATA_REQUIRE_SHARED("tokenizers/llama3/llama3_tokenizer.model.tiktoken");
  auto tok = load(shared_data_path("tokenizers/llama3/llama3_tokenizer.model.tiktoken"));
  ASSERT_TRUE(tok);
  for (const char* name : {"llama3_json", "llama4_json"}) {
    auto l = tools_only(name);
    Outcome o = check(l, *tok,
                      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": "
                      "\"San Francisco\", \"days\": 3}}; {\"name\": \"get_time\", "
                      "\"parameters\": {}}");
    EXPECT_EQ(o.content, "");
    EXPECT_EQ(o.calls, (Calls{{"get_weather", R"({"city": "San Francisco", "days": 3})"},
                              {"get_time", "{}"}}));
    o = check(l, *tok, " {\"name\": \"f\", \"parameters\": {\"x\": 1.5e3}}");
    EXPECT_EQ(o.calls, (Calls{{"f", R"({"x": 1.5e3})"}}));
    o = check(l, *tok, "Paris is the capital of France. {\"name\": 1}");
    EXPECT_EQ(o.content, "Paris is the capital of France. {\"name\": 1}");
    EXPECT_TRUE(o.calls.empty());
  }
}

TEST(ToolParsers, MistralBothFormats) {
  STRATA_REQUIRE_SHARED("tokenizers/mixtral/tokenizer.json");
  auto tok = load(shared_data_path("tokenizers/mixtral"));
  ASSERT_TRUE(tok);
  auto m = tools_only("mistral");
  Outcome o = check(m, *tok,
                    "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                    "\"Paris\"}}, {\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]");
  EXPECT_EQ(o.calls,
            (Calls{{"get_weather", R"({"city": "Paris"})"}, {"add", R"({"a": 1, "b": 2})"}}));
  o = check(m, *tok,
            "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]add[ARGS]{\"a\": "
            "1}");
  EXPECT_EQ(o.content, "Sure.");
  EXPECT_EQ(o.calls, (Calls{{"get_weather", R"({"city": "Paris"})"}, {"add", R"({"a": 1})"}}));
  // Mistral's templates want 9-character ids.
  auto p = m();
  p->feed("[TOOL_CALLS]f[ARGS]{}");
  p->finish();
  ASSERT_EQ(p->tool_calls().size(), 1u);
  EXPECT_EQ(p->tool_calls()[0].id.size(), 9u);
}

TEST(ToolParsers, DeepSeekV3AndV31) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  auto tok = deepseek_like();
  ASSERT_TRUE(tok);
  Outcome o = check(tools_only("deepseek_v3"), *tok,
                    "I'll look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                    "get_weather\n```json\n{\"location\": \"杭州\"}\n```<｜tool▁call▁end｜>\n"
                    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```"
                    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(o.content, "I'll look.");
  EXPECT_EQ(o.calls, (Calls{{"get_weather", R"({"location": "杭州"})"}, {"get_time", "{}"}}));
  o = check(tools_only("deepseek_v31"), *tok,
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": "
            "\"Tokyo\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": [1, 2]}"
            "<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(o.content, "");
  EXPECT_EQ(o.calls,
            (Calls{{"get_weather", R"({"location": "Tokyo"})"}, {"f", R"({"a": [1, 2]})"}}));
}

OrderedJson weather_tools() {
  return OrderedJson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"location": {"type": "string"}, "days": {"type": "integer"},
                     "metric": {"type": "boolean"}, "ratio": {"type": ["number", "null"]},
                     "tags": {"type": "array", "items": {"type": "string"}},
                     "opts": {"type": "object"},
                     "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}},
    {"type": "function", "function": {"name": "run", "parameters": {"type": "object",
      "properties": {"code": {"type": "string"}}}}}])");
}

TEST(ToolParsers, DeepSeekDsmlV32AndV4) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  auto tok = deepseek_like();
  ASSERT_TRUE(tok);
  const OrderedJson tools = weather_tools();
  for (const char* wrap : {"function_calls", "tool_calls"}) {
    const std::string w = wrap;
    const std::string text =
        "Checking.\n\n<｜DSML｜" + w +
        ">\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"location\" "
        "string=\"true\">杭州 \"center\"</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
        "string=\"false\">3</｜DSML｜parameter>\n<｜DSML｜parameter name=\"metric\" "
        "string=\"false\">true</｜DSML｜parameter>\n<｜DSML｜parameter name=\"tags\" "
        "string=\"false\">[\"a\", \"b\"]</｜DSML｜parameter>\n</｜DSML｜invoke>\n<｜DSML｜invoke "
        "name=\"run\">\n<｜DSML｜parameter name=\"code\" string=\"true\">print(1)\nx = "
        "{}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜" +
        w + ">";
    const std::string parser = w == "tool_calls" ? "deepseek_v4" : "deepseek_v32";
    Outcome o = check(tools_only(parser, &tools), *tok, text);
    EXPECT_EQ(o.content, "Checking.\n\n");
    EXPECT_EQ(
        o.calls,
        (Calls{
            {"get_weather",
             R"({"location": "杭州 \"center\"", "days": 3, "metric": true, "tags": ["a", "b"]})"},
            {"run", R"({"code": "print(1)\nx = {}"})"}}))
        << parser;
  }
  // JSON-form values read by the schema's types in the order null, integer, number, boolean,
  // object/array, string; undeclared ones stay text; a lone undeclared "arguments" object whose
  // keys the tool declares is unwrapped (one with other keys is not).
  auto param = [](const std::string& name, const std::string& value) {
    return "<｜DSML｜parameter name=\"" + name + "\" string=\"false\">" + value +
           "</｜DSML｜parameter>";
  };
  Outcome o =
      check(tools_only("deepseek_v4", &tools), *tok,
            "<｜DSML｜tool_calls><｜DSML｜invoke name=\"get_weather\">" + param("days", "7") +
                param("location", "42") + param("ratio", "null") + param("metric", "1") +
                param("opts", "{\"a\": [1]}") + param("extra", "12") + param("note", "\"x\"") +
                "</｜DSML｜invoke><｜DSML｜invoke name=\"get_weather\">" + param("ratio", "2.50") +
                param("days", "\"5\"") + "</｜DSML｜invoke><｜DSML｜invoke name=\"run\">" +
                param("arguments", "{\"code\": \"ls\"}") +
                "</｜DSML｜invoke><｜DSML｜invoke name=\"run\">" +
                param("arguments", "{\"cmd\": \"ls\"}") + "</｜DSML｜invoke></｜DSML｜tool_calls>");
  EXPECT_EQ(
      o.calls,
      (Calls{
          {"get_weather",
           R"({"days": 7, "location": "42", "ratio": null, "metric": true, "opts": {"a": [1]}, "extra": "12", "note": "\"x\""})"},
          {"get_weather", R"({"ratio": 2.5, "days": "5"})"},
          {"run", R"({"code": "ls"})"},
          {"run", R"({"arguments": "{\"cmd\": \"ls\"}"})"}}));
}

TEST(ToolParsers, Qwen3XmlOnQwen3) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen3/tokenizer_config.json");
  auto tok = qwen_vocab_with(read_file("tokenizers/qwen3/tokenizer_config.json"));
  ASSERT_TRUE(tok);
  const OrderedJson tools = weather_tools();
  for (const char* name : {"qwen3_xml", "qwen3_coder"}) {
    Outcome o = check(tools_only(name, &tools), *tok,
                      "I will call it.\n<tool_call>\n<function=get_weather>\n<parameter=location>"
                      "\nNew York\n</parameter>\n<parameter=days>\n7\n</parameter>\n<parameter="
                      "metric>\nFalse\n</parameter>\n<parameter=ratio>\n0.5\n</parameter>\n"
                      "<parameter=opts>\n{\"a\": null}\n</parameter>\n</function>\n</tool_call>\n"
                      "<tool_call>\n<function=run>\n<parameter=code>\nif a < b:\n  print(\"x\")\n"
                      "\n</parameter>\n</function>\n</tool_call>");
    EXPECT_EQ(o.content, "I will call it.\n");
    EXPECT_EQ(
        o.calls,
        (Calls{
            {"get_weather",
             R"({"location": "New York", "days": 7, "metric": false, "ratio": 0.5, "opts": {"a": null}})"},
            {"run", "{\"code\": \"if a < b:\\n  print(\\\"x\\\")\\n\"}"}}))
        << name;
    // Undeclared parameters are strings; a string keeps "null" as text unless its schema admits
    // null; typed values read null/None as null; integral numbers become integers.
    o = check(tools_only(name, &tools), *tok,
              "<tool_call>\n<function=run>\n<parameter=extra>\n12\n</parameter>\n<parameter=code>"
              "\nnull\n</parameter>\n</function>\n</tool_call><tool_call>\n<function=get_weather>\n"
              "<parameter=note>\nNone\n</parameter>\n<parameter=days>\nnull\n</parameter>\n"
              "<parameter=ratio>\n2.0\n</parameter>\n<parameter=note>\nnonet\n</parameter>\n"
              "</function>\n</tool_call>");
    EXPECT_EQ(
        o.calls,
        (Calls{{"run", R"({"extra": "12", "code": "null"})"},
               {"get_weather", R"({"note": null, "days": null, "ratio": 2, "note": "nonet"})"}}));
  }
}

TEST(ReasoningParsers, Qwen3ThinkingAndNot) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen3/tokenizer_config.json");
  auto tok = qwen_vocab_with(read_file("tokenizers/qwen3/tokenizer_config.json"));
  ASSERT_TRUE(tok);
  // The model opens the span itself (Qwen3 hybrid, thinking on).
  Outcome o = check(with_reasoning("qwen3", "hermes"), *tok,
                    "<think>\nThe user wants weather. 2 < 3.\n</think>\n\n<tool_call>\n{\"name\": "
                    "\"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>");
  EXPECT_EQ(o.reasoning, "\nThe user wants weather. 2 < 3.\n");
  EXPECT_EQ(o.content, "\n\n");
  EXPECT_EQ(o.calls, (Calls{{"get_weather", R"({"city": "Oslo"})"}}));
  // Thinking-2507: the template opens <think> in the prompt; only </think> is generated.
  o = check(with_reasoning("qwen3", "", "<|im_start|>assistant\n<think>\n"), *tok,
            "Hmm, simple.\n</think>\n\nIt is 4.");
  EXPECT_EQ(o.reasoning, "Hmm, simple.\n");
  EXPECT_EQ(o.content, "\n\nIt is 4.");
  // enable_thinking=false: no span, all content.
  o = check(with_reasoning("qwen3", "", "<|im_start|>assistant\n<think>\n\n</think>\n\n"), *tok,
            "It is 4. </think> stays");
  EXPECT_EQ(o.reasoning, "");
  EXPECT_EQ(o.content, "It is 4. </think> stays");
}

TEST(ReasoningParsers, DeepSeekR1V3V4) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  auto tok = deepseek_like();
  ASSERT_TRUE(tok);
  // R1: the template opens <think>; text before </think> is reasoning even when cut short.
  Outcome o = check(with_reasoning("deepseek_r1", ""), *tok,
                    "Let me think about 9.11 vs 9.9.</think>9.9 is larger.");
  EXPECT_EQ(o.reasoning, "Let me think about 9.11 vs 9.9.");
  EXPECT_EQ(o.content, "9.9 is larger.");
  o = check(with_reasoning("deepseek_r1", ""), *tok, "<think>\nstill thinking");
  EXPECT_EQ(o.reasoning, "\nstill thinking");
  EXPECT_EQ(o.content, "");
  // V3: only with thinking on.
  o = check(with_reasoning("deepseek_v3", "deepseek_v31", "", true), *tok,
            "plan</think>ok<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}"
            "<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(o.reasoning, "plan");
  EXPECT_EQ(o.content, "ok");
  EXPECT_EQ(o.calls, (Calls{{"f", "{}"}}));
  o = check(with_reasoning("deepseek_v3", "", "<｜Assistant｜></think>", std::nullopt), *tok,
            "plan</think>ok");
  EXPECT_EQ(o.reasoning, "");
  EXPECT_EQ(o.content, "plan</think>ok");
  // V4: the prompt opens thinking; a DSML block inside the think span goes to the tool parser.
  const OrderedJson tools = weather_tools();
  o = check(
      with_reasoning("deepseek_v4", "deepseek_v4", "<｜Assistant｜><think>", std::nullopt, &tools),
      *tok,
      "I need the weather.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"location\" string=\"true\">Paris</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  EXPECT_EQ(o.reasoning, "I need the weather.\n\n");
  EXPECT_EQ(o.content, "");
  EXPECT_EQ(o.calls, (Calls{{"get_weather", R"({"location": "Paris"})"}}));
}

TEST(ToolParsers, RequiredAndNamedToolChoiceOutputs) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  auto tok = load(shared_data_path("tokenizers/qwen2.5"));
  ASSERT_TRUE(tok);
  auto required = [](bool parallel) {
    return [parallel] {
      return std::make_unique<ChatOutputParser>(nullptr, make_required_tool_parser(parallel));
    };
  };
  const std::string out =
      "[{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}, {\"name\": "
      "\"run\", \"parameters\": {\"code\": \"ls -la\"}}]";
  Outcome o = check(required(true), *tok, out);
  EXPECT_EQ(o.content, "");
  EXPECT_EQ(o.calls,
            (Calls{{"get_weather", R"({"location": "Paris"})"}, {"run", R"({"code": "ls -la"})"}}));
  o = check(required(false), *tok, out);
  EXPECT_EQ(o.calls, (Calls{{"get_weather", R"({"location": "Paris"})"}}));
  auto named = [] {
    return std::make_unique<ChatOutputParser>(nullptr, make_named_tool_parser("get_weather"));
  };
  o = check(named, *tok, "{\"location\": \"Paris\", \"days\": 3}\n");
  EXPECT_EQ(o.calls, (Calls{{"get_weather", R"({"location": "Paris", "days": 3})"}}));
  // Unconstrained text that is not the expected shape stays content.
  o = check(named, *tok, "Once upon a time");
  EXPECT_EQ(o.content, "Once upon a time");
  EXPECT_TRUE(o.calls.empty());
}

TEST(ToolParsers, ToolChoiceSchemas) {
  const OrderedJson tools = weather_tools();
  Json req = Json::parse(required_tool_choice_schema(tools, true));
  EXPECT_EQ(req["type"], "array");
  EXPECT_EQ(req["minItems"], 1);
  EXPECT_FALSE(req.contains("maxItems"));
  ASSERT_EQ(req["items"]["anyOf"].size(), 2u);
  EXPECT_EQ(req["items"]["anyOf"][1]["properties"]["name"]["const"], "run");
  EXPECT_EQ(req["items"]["anyOf"][1]["properties"]["parameters"],
            Json::parse(tools[1]["function"]["parameters"].dump()));
  EXPECT_EQ(Json::parse(required_tool_choice_schema(tools, false))["maxItems"], 1);
  EXPECT_EQ(Json::parse(named_tool_choice_schema(tools[0])),
            Json::parse(tools[0]["function"]["parameters"].dump()));
}

TEST(ToolParsers, UnknownNamesListTheKnownOnes) {
  auto t = make_tool_parser("hermes2", nullptr, true);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("deepseek_v4"), std::string::npos);
  auto r = ReasoningParser::create("r1", "", std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("deepseek_r1"), std::string::npos);
}

// Random texts built from each format's fragments (whole and partial markers, JSON pieces,
// quotes, escapes, newlines), fed in random splits: streaming always equals the whole-text
// extraction, and argument fragments only ever extend a call.
TEST(ToolParsers, RandomSplitsOfFormatFragmentsAgree) {
  const OrderedJson tools = weather_tools();
  const std::vector<std::string> common = {"{",
                                           "}",
                                           "[",
                                           "]",
                                           "\"",
                                           "\\",
                                           "\\\"",
                                           ":",
                                           ",",
                                           " ",
                                           "\n",
                                           "a",
                                           "1",
                                           "null",
                                           "true",
                                           "é",
                                           "<",
                                           ">",
                                           "/",
                                           "\"name\": ",
                                           "\"arguments\": ",
                                           "\"parameters\": ",
                                           "\"get_weather\"",
                                           "{\"x\": 1}",
                                           "; "};
  struct Spec {
    std::string parser;
    std::string reasoning;  // "" none
    std::vector<std::string> fragments;
  };
  const std::vector<Spec> specs = {
      {"hermes", "", {"<tool_call>", "</tool_call>", "<tool_", "_call>"}},
      {"hermes", "qwen3", {"<tool_call>", "</tool_call>", "<think>", "</think>", "</thi"}},
      {"llama3_json", "", {"<|python_tag|>", "<|python"}},
      {"mistral", "", {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[TOOL_", "get_weather"}},
      {"deepseek_v3",
       "",
       {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
        "function", "```json\n", "\n```", "get_weather\n"}},
      {"deepseek_v31",
       "deepseek_r1",
       {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
        "</think>", "<think>"}},
      {"qwen3_xml",
       "",
       {"<tool_call>", "</tool_call>", "<function=get_weather>", "<function=run>", "</function>",
        "<parameter=location>", "<parameter=days>", "<parameter=opts>", "</parameter>",
        "<parameter=", "</param", "nul", "NULL"}},
      {"deepseek_v4",
       "deepseek_v4",
       {"<｜DSML｜tool_calls>", "<｜DSML｜invoke name=\"get_weather\">", "</｜DSML｜invoke>",
        "<｜DSML｜parameter name=\"location\" string=\"true\">",
        "<｜DSML｜parameter name=\"days\" string=\"false\">",
        "<｜DSML｜parameter name=\"arguments\" string=\"false\">", "</｜DSML｜parameter>",
        "<｜DSML｜", "</think>"}},
  };
  std::mt19937 rng(20261204);
  for (const auto& spec : specs) {
    std::vector<std::string> alphabet = common;
    alphabet.insert(alphabet.end(), spec.fragments.begin(), spec.fragments.end());
    Factory make = [&] {
      std::unique_ptr<ReasoningParser> r;
      if (!spec.reasoning.empty())
        r = std::move(ReasoningParser::create(spec.reasoning, "<think>", std::nullopt)).value();
      return std::make_unique<ChatOutputParser>(
          std::move(r), std::move(make_tool_parser(spec.parser, &tools, true)).value());
    };
    for (int iter = 0; iter < 500; ++iter) {
      std::string text;
      const int n = 1 + static_cast<int>(rng() % 40);
      // Bias towards the format's own fragments so calls do form.
      for (int k = 0; k < n; ++k) {
        const bool own = rng() % 2 == 0;
        text +=
            own ? spec.fragments[rng() % spec.fragments.size()] : alphabet[rng() % alphabet.size()];
      }
      std::vector<std::string> pieces;
      for (size_t i = 0; i < text.size();) {
        size_t len = 1 + rng() % 6;
        pieces.push_back(text.substr(i, len));
        i += len;
      }
      const std::string what = spec.parser + "/" + spec.reasoning + ": " + text;
      expect_same(streamed(make, pieces, what), whole(make, text), what);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace strata::server
