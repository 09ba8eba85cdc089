// Request parsing: prompts in every OpenAI form, sampling fields and their defaults, and errors
// that name the field at fault.
#include <gtest/gtest.h>

#include "server/openai_request.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {
namespace {

class RequestParse : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tokenizer::load(strata::testing::repo_path("models/strata-tiny"));
    ASSERT_TRUE(t.ok()) << t.status().message();
    tok_ = *t;
    ctx_.tokenizer = tok_.get();
    ctx_.chat_template_error = "no template here";
    ctx_.max_n = 8;
  }
  GenerationRequest ok_completion(const std::string& body) {
    auto r = parse_completion_request(body, ctx_);
    EXPECT_TRUE(r.ok()) << body << " -> " << (r.ok() ? "" : r.error().message);
    return r.ok() ? r.value() : GenerationRequest{};
  }
  ApiError bad_completion(const std::string& body) {
    auto r = parse_completion_request(body, ctx_);
    EXPECT_FALSE(r.ok()) << body;
    return r.ok() ? ApiError{} : r.error();
  }
  std::shared_ptr<const Tokenizer> tok_;
  ParseContext ctx_;
};

TEST_F(RequestParse, TextPromptIsTokenizedWithBos) {
  GenerationRequest r = ok_completion(R"({"model": "m", "prompt": "hi"})");
  ASSERT_EQ(r.prompts.size(), 1u);
  auto expect = tok_->encode("hi", true);
  ASSERT_TRUE(expect.ok());
  EXPECT_EQ(r.prompts[0].token_ids, *expect);
  EXPECT_EQ(r.prompts[0].token_ids.front(), 256);  // <|bos|>
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.params.max_tokens, 16);  // OpenAI's completions default
  EXPECT_FALSE(r.stream);
}

TEST_F(RequestParse, PromptForms) {
  auto r = ok_completion(R"({"prompt": ["a", "b"]})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].text, "b");
  r = ok_completion(R"({"prompt": [256, 104, 105]})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].token_ids, (std::vector<int32_t>{256, 104, 105}));
  EXPECT_EQ(r.prompts[0].text, "<|bos|>hi");  // decoded with special tokens, as vLLM echoes
  r = ok_completion(R"({"prompt": [[1, 2], [3]]})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].token_ids, (std::vector<int32_t>{3}));
  r = ok_completion(R"({"prompt": "hi", "add_special_tokens": false})");
  EXPECT_EQ(r.prompts[0].token_ids, (std::vector<int32_t>{104, 105}));
}

TEST_F(RequestParse, SamplingFieldsOverDefaults) {
  ctx_.defaults.temperature = 0.7f;
  ctx_.defaults.top_k = 40;
  auto r = ok_completion(
      R"({"prompt": "x", "top_p": 0.5, "max_tokens": 7, "stop": "\n", "seed": -3,
          "stop_token_ids": [5], "logit_bias": {"104": -100}, "n": 2, "ignore_eos": true,
          "min_tokens": 2, "presence_penalty": 0.5, "frequency_penalty": 0.25,
          "repetition_penalty": 1.1, "min_p": 0.05, "skip_special_tokens": false,
          "include_stop_str_in_output": true, "priority": 3, "user": "u1", "cache_salt": "s",
          "stream": true, "stream_options": {"include_usage": true}})");
  const auto& p = r.params;
  EXPECT_FLOAT_EQ(p.temperature, 0.7f);  // default kept
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.top_p, 0.5f);
  EXPECT_EQ(p.max_tokens, 7);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(p.seed, -3);
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{5}));
  EXPECT_FLOAT_EQ(p.logit_bias.at(104), -100.f);
  EXPECT_EQ(p.n, 2);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, 0.25f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_EQ(r.priority, 3);
  EXPECT_EQ(r.user, "u1");
  EXPECT_EQ(r.cache_salt, "s");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST_F(RequestParse, NullMeansDefault) {
  auto r = ok_completion(R"({"prompt": "x", "max_tokens": null, "temperature": null,
                              "stop": null, "logprobs": null, "n": null})");
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.params.n, 1);
  EXPECT_FALSE(r.logprobs.has_value());
}

TEST_F(RequestParse, EchoWithLogprobsAsksForPromptLogprobs) {
  auto r = ok_completion(R"({"prompt": "x", "echo": true, "logprobs": 3})");
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_EQ(r.params.prompt_logprobs, 3);
  EXPECT_FALSE(r.report_prompt_logprobs);
  r = ok_completion(R"({"prompt": "x", "prompt_logprobs": 1})");
  EXPECT_TRUE(r.report_prompt_logprobs);
  EXPECT_EQ(r.params.prompt_logprobs, 1);
}

TEST_F(RequestParse, IntegralFloatsAreIntegers) {
  EXPECT_EQ(ok_completion(R"({"prompt": "x", "max_tokens": 5.0})").params.max_tokens, 5);
  EXPECT_EQ(bad_completion(R"({"prompt": "x", "max_tokens": 5.5})").param, "max_tokens");
}

TEST_F(RequestParse, ErrorsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
    const char* text;  // expected in the message
  };
  const Case cases[] = {
      {R"({"prompt": "x", "temperature": "hot"})", "temperature", "must be a number"},
      {R"({"prompt": "x", "max_tokens": "5"})", "max_tokens", "must be an integer"},
      {R"({"prompt": "x", "max_tokens": -1})", "max_tokens", "in [0,"},
      {R"({"prompt": "x", "n": 0})", "n", "must be an integer in [1"},
      {R"({"prompt": "x", "n": 9})", "n", "at most 8"},
      {R"({"prompt": ["a", "b", "c"], "n": 3})", "prompt", "at most 8"},
      {R"({"prompt": "x", "stream": "yes"})", "stream", "must be a boolean"},
      {R"({"prompt": "x", "stop": [1, 2]})", "stop", "array of strings"},
      {R"({"prompt": "x", "stop_token_ids": [-1]})", "stop_token_ids", "array of integers"},
      {R"({"prompt": "x", "logit_bias": {"abc": 1}})", "logit_bias", "token ids"},
      {R"({"prompt": "x", "logit_bias": {"1": "a"}})", "logit_bias", "must be numbers"},
      {R"({"prompt": "x", "logit_bias": [1]})", "logit_bias", "must be an object"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options",
       "stream is true"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})",
       "stream_options", "include_usage must be a boolean"},
      {R"({"prompt": "x", "best_of": 3})", "best_of", "not supported"},
      {R"({"prompt": "x", "suffix": "y"})", "suffix", "not supported"},
      {R"({"prompt": "x", "response_format": {"type": "xml"}})", "response_format",
       "must be 'text', 'json_object' or 'json_schema'"},
      {R"({"prompt": "x", "response_format": {"type": "json_schema"}})", "response_format",
       "json_schema must be an object"},
      {R"({"prompt": "x", "structured_outputs": {"regex": "a", "choice": ["b"]}})",
       "structured_outputs", "exactly one of"},
      {R"({"prompt": "x", "structured_outputs": {"json": 3}})", "structured_outputs",
       "must be a JSON Schema"},
      {R"({"prompt": "x", "structured_outputs": {"regexp": "a"}})", "structured_outputs",
       "unknown structured_outputs field 'regexp'"},
      {R"({"prompt": "x", "guided_choice": []})", "guided_choice", "non-empty array"},
      {R"({"prompt": "x", "guided_json": "{not json"})", "guided_json", "not valid JSON"},
      {R"({"prompt": "x", "guided_regex": "a", "response_format": {"type": "json_object"}})",
       "guided_regex", "only one output constraint"},
      {R"({"prompt": "x", "seed": 1e40})", "seed", "must be an integer in"},
      {R"({"prompt": "x", "cache_salt": ""})", "cache_salt", "cannot be empty"},
      {R"({"prompt": "x", "model": 5})", "model", "must be a string"},
      {R"({"prompt": "x", "top_p": 1e39})", "top_p", "finite"},
      {R"({})", "prompt", "prompt is required"},
      {R"({"prompt": []})", "prompt", "empty array"},
      {R"({"prompt": 5})", "prompt", "got an integer"},
      {R"({"prompt": [1, "a"]})", "prompt", "non-negative integers"},
      {R"({"prompt": [1, -2]})", "prompt", "non-negative integers"},
      {R"({"prompt": ["a", 3]})", "prompt", "strings or non-empty arrays"},
      {R"({"prompt": [[]]})", "prompt", "strings or non-empty arrays"},
      {R"({"prompt": {"text": "a"}})", "prompt", "got an object"},
  };
  for (const auto& c : cases) {
    ApiError e = bad_completion(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    EXPECT_NE(e.message.find(c.text), std::string::npos) << c.body << " -> " << e.message;
  }
}

// Stop lists and the fan-out are capped, and checked before any prompt is tokenized: with no
// tokenizer, text prompts would fail, so these errors show the caps came first.
TEST_F(RequestParse, CapsComeBeforeTokenizing) {
  ctx_.tokenizer = nullptr;
  auto json_list = [](size_t n, const std::string& item) {
    std::string s = "[";
    for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + item;
    return s + "]";
  };
  struct Case {
    std::string body;
    const char* param;
    const char* text;
  };
  const Case cases[] = {
      {R"({"prompt": "x", "stop": )" + json_list(kMaxStopStrings + 1, "\"s\"") + "}", "stop",
       "at most 64 strings, got 65"},
      {R"({"prompt": "x", "stop": ["a", ")" + std::string(kMaxStopStringBytes + 1, 'z') + "\"]}",
       "stop", "at most 1024 bytes long, got one of 1025"},
      {R"({"prompt": "x", "stop_token_ids": )" + json_list(kMaxStopTokenIds + 1, "7") + "}",
       "stop_token_ids", "at most 1024 ids, got 1025"},
      {R"({"prompt": )" + json_list(9, "\"a\"") + "}", "prompt", "9 prompts x n=1"},
      {R"({"prompt": )" + json_list(3, "\"a\"") + R"(, "n": 3})", "prompt", "3 prompts x n=3"},
      {R"({"prompt": "x", "n": 9})", "n", "at most 8 (--max-num-seqs), got 9"},
  };
  for (const auto& c : cases) {
    ApiError e = bad_completion(c.body);
    EXPECT_EQ(e.status, 400) << c.body.substr(0, 80);
    EXPECT_EQ(e.param, c.param) << e.message;
    EXPECT_NE(e.message.find(c.text), std::string::npos) << e.message;
  }
  // At the caps, the request goes on (and fails here only for want of a tokenizer).
  ApiError e =
      bad_completion(R"({"prompt": "x", "stop": )" + json_list(kMaxStopStrings, "\"s\"") +
                     R"(, "stop_token_ids": )" + json_list(kMaxStopTokenIds, "7") + R"(, "n": 8})");
  EXPECT_NE(e.message.find("no tokenizer"), std::string::npos) << e.message;
  // Chat: n is checked before the template (none here) is looked for.
  auto chat =
      parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}], "n": 9, "stop": )" +
                             json_list(kMaxStopStrings + 1, "\"s\"") + "}",
                         ctx_);
  ASSERT_FALSE(chat.ok());
  EXPECT_EQ(chat.error().param, "stop");
  chat = parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}], "n": 9})", ctx_);
  ASSERT_FALSE(chat.ok());
  EXPECT_EQ(chat.error().param, "n");
}

TEST_F(RequestParse, MalformedBodies) {
  for (const char* body : {"", "   ", "{", "[1, 2]", "\"text\"", "null", "{\"prompt\": \"x\",}",
                           "{\"prompt\": \"\\ud800\"}"}) {
    ApiError e = bad_completion(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_FALSE(e.message.empty());
  }
  ApiError e = bad_completion(std::string("{\"prompt\": \"a\xff\"}"));
  EXPECT_NE(e.message.find("malformed JSON"), std::string::npos) << e.message;
}

TEST_F(RequestParse, ChatWithoutTemplateIsRefusedWithTheReason) {
  auto r = parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}]})", ctx_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().param, "messages");
  EXPECT_EQ(r.error().message, "no template here");
}

TEST_F(RequestParse, DeepNestingIsRefused) {
  std::string deep = "{\"prompt\": " + std::string(101, '[') + "1" + std::string(101, ']') + "}";
  EXPECT_NE(bad_completion(deep).message.find("deeper than 100"), std::string::npos);
  // Brackets inside strings do not count.
  ok_completion("{\"prompt\": \"" + std::string(300, '[') + "\"}");
}

class ChatParse : public RequestParse {
 protected:
  void SetUp() override {
    RequestParse::SetUp();
    auto t = load_chat_template(strata::testing::repo_path("models/strata-tiny"));
    ASSERT_TRUE(t.ok()) << t.status().message();
    tmpl_ = std::make_shared<ChatTemplate>(std::move(t).value());
    ctx_.chat_template = tmpl_.get();
  }
  std::shared_ptr<ChatTemplate> tmpl_;
};

TEST_F(ChatParse, RendersTheTemplateAndTokenizesWithoutBos) {
  auto r = parse_chat_request(
      R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."},
          {"role": "user", "content": [{"type": "text", "text": "Hi"},
                                       {"type": "text", "text": "there"}]}],
          "max_completion_tokens": 5, "logprobs": true, "top_logprobs": 2})",
      ctx_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string want = "<|system|>Be brief.<|eos|><|user|>Hi\nthere<|eos|><|assistant|>";
  EXPECT_EQ(r.value().prompts[0].text, want);
  EXPECT_EQ(r.value().prompts[0].token_ids, *tok_->encode(want, false));
  EXPECT_EQ(r.value().kind, ApiKind::kChat);
  EXPECT_EQ(r.value().params.max_tokens, 5);
  EXPECT_EQ(r.value().logprobs, 2);
  EXPECT_EQ(r.value().params.logprobs, 2);
  // No length given: until max_model_len.
  r = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}]})", ctx_);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().params.max_tokens.has_value());
  EXPECT_FALSE(r.value().logprobs.has_value());
  r = parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                             "add_generation_prompt": false})",
                         ctx_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().prompts[0].text, "<|user|>x<|eos|>");
}

TEST_F(ChatParse, EchoTakesTheFinalAssistantMessage) {
  auto r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "Once"}],
          "echo": true, "continue_final_message": true})",
      ctx_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().echo_text, "Once");
}

TEST_F(ChatParse, ErrorsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
    const char* text;
  };
  const Case cases[] = {
      {R"({})", "messages", "messages is required"},
      {R"({"messages": []})", "messages", "non-empty array"},
      {R"({"messages": "hi"})", "messages", "non-empty array"},
      {R"({"messages": [1]})", "messages", "messages[0] must be an object"},
      {R"({"messages": [{"content": "x"}]})", "messages", "role is required"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages", "content must be"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
       "messages", "only text parts"},
      {R"({"messages": [{"role": "user", "content": [{"text": "x"}]}]})", "messages", "\"type\""},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs",
       "needs logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", "logprobs",
       "must be a boolean"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})",
       "tool_choice", "needs a non-empty tools array"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "tools",
       "must be an array"},
      {R"({"messages": [{"role": "user", "content": "x"}], "chat_template": "{{ x }}"})",
       "chat_template", "--chat-template"},
      {R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": true,
           "continue_final_message": true})",
       "continue_final_message", "cannot both be true"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": "a"})",
       "max_completion_tokens", "must be an integer"},
  };
  for (const auto& c : cases) {
    auto r = parse_chat_request(c.body, ctx_);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.error().status, 400) << c.body;
    EXPECT_EQ(r.error().param, c.param) << c.body << " -> " << r.error().message;
    EXPECT_NE(r.error().message.find(c.text), std::string::npos)
        << c.body << " -> " << r.error().message;
  }
}

TEST(ContentFormat, DetectedFromLoopsOverMessageContent) {
  EXPECT_EQ(detect_content_format("{% for m in messages %}{{ m['content'] }}{% endfor %}"),
            ContentFormat::kString);
  EXPECT_EQ(detect_content_format("{{ messages[0].content }}{% for x in items %}{% endfor %}"),
            ContentFormat::kString);
  for (const char* t : {
           "{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}",
           "{%- for m in messages -%}{%- for p in m.content if p.type == 'text' -%}{%- endfor -%}",
           "{% for part in messages[0][\"content\"] %}{% endfor %}",
           "{% set content = message['content'] %}{% for item in content %}{% endfor %}",
       })
    EXPECT_EQ(detect_content_format(t), ContentFormat::kOpenAi) << t;
}

// The openai content format hands the template a list of {type, text} parts, whatever the
// request sent; the string format joins them.
TEST_F(ChatParse, ContentFormats) {
  auto t = ChatTemplate::parse(
      "{% for m in messages %}<{{ m.role }}>{% if m.content is string %}{{ m.content }}"
      "{% elif m.content %}{% for p in m.content %}[{{ p.type }}:{{ p.text }}]{% endfor %}"
      "{% endif %}"
      "{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ctx_.chat_template = &t.value();
  const std::string body =
      R"({"messages": [{"role": "system", "content": "Be brief."},
          {"role": "user", "content": [{"type": "text", "text": "Hi"},
                                       {"type": "text", "text": "there"}]},
          {"role": "assistant", "content": null}], "add_generation_prompt": false})";
  ctx_.content_format = ContentFormat::kOpenAi;
  auto r = parse_chat_request(body, ctx_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().prompts[0].text,
            "<system>[text:Be brief.]<user>[text:Hi][text:there]<assistant>");
  ctx_.content_format = ContentFormat::kString;
  r = parse_chat_request(body, ctx_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().prompts[0].text, "<system>Be brief.<user>Hi\nthere<assistant>");
  // Echo reads the parts too.
  ctx_.content_format = ContentFormat::kOpenAi;
  r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "x"},
          {"role": "assistant", "content": [{"type": "text", "text": "Once"}]}],
          "echo": true, "continue_final_message": true})",
      ctx_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().echo_text, "Once");
}

TEST_F(ChatParse, TokenizeMessages) {
  auto t = parse_tokenize_request(R"({"messages": [{"role": "user", "content": "Hi"}]})", ctx_);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t.value().token_ids, *tok_->encode("<|user|>Hi<|eos|><|assistant|>", false));
}

// --tokenizer-mode deepseek_v4: no template needed; the DeepSeek-V4 encoder makes the prompt
// (tools block, tool results as user turns, thinking from chat_template_kwargs) and it is
// tokenized without added special tokens. The encoding itself is tested in
// tests/tokenizer/deepseek_v4_encoding_test.cpp.
TEST_F(RequestParse, DeepseekV4EncodingReplacesTheTemplate) {
  ctx_.deepseek_v4_encoding = true;  // and ctx_.chat_template stays null
  const std::string body = R"({"model": "m", "messages": [
      {"role": "system", "content": "S"},
      {"role": "user", "content": "Q"},
      {"role": "assistant", "content": null, "reasoning_content": "hidden",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "R"}],
      "chat_template_kwargs": {"thinking": false}})";
  auto r = parse_chat_request(body, ctx_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string want =
      "<｜begin▁of▁sentence｜>S<｜User｜>Q<｜Assistant｜></think>\n\n<｜DSML｜tool_calls>\n"
      "<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"false\">1"
      "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>"
      "<｜User｜><tool_result>R</tool_result><｜Assistant｜></think>";
  EXPECT_EQ(r.value().prompts[0].text, want);
  EXPECT_EQ(r.value().prompts[0].token_ids, *tok_->encode(want, false));
  // /tokenize with messages gives the same ids.
  auto t = parse_tokenize_request(body, ctx_);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t.value().token_ids, *tok_->encode(want, false));

  // Thinking is on by default; reasoning_effort max adds its paragraph, none turns thinking off.
  r = parse_chat_request(R"({"messages": [{"role": "user", "content": "Q"}]})", ctx_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().prompts[0].text, "<｜begin▁of▁sentence｜><｜User｜>Q<｜Assistant｜><think>");
  r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "Q"}], "reasoning_effort": "max"})", ctx_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().prompts[0].text.rfind("<｜begin▁of▁sentence｜>Reasoning Effort: Absolute "
                                            "maximum",
                                            0),
            0u);
  r = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "Q"}], "reasoning_effort": "none"})", ctx_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().prompts[0].text, "<｜begin▁of▁sentence｜><｜User｜>Q<｜Assistant｜></think>");
  // Request tools: a "## Tools" block on the system message (tool_choice "none" still shows
  // them; "auto" would need --enable-auto-tool-choice).
  r = parse_chat_request(
      R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
          "tool_choice": "none",
          "tools": [{"type": "function", "function": {"name": "get_time"}}]})",
      ctx_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().prompts[0].text.rfind("<｜begin▁of▁sentence｜>S\n\n## Tools\n", 0), 0u);
  EXPECT_NE(r.value().prompts[0].text.find("\n{\"name\": \"get_time\"}\n"), std::string::npos);

  // Errors are 400s naming the field.
  auto e = parse_chat_request(
      R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function",
          "function": {"name": "f", "arguments": "{oops"}}]}]})",
      ctx_);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().status, 400);
  EXPECT_EQ(e.error().param, "messages");
  EXPECT_NE(e.error().message.find("messages[0].tool_calls[0].function.arguments"),
            std::string::npos)
      << e.error().message;
  e = parse_chat_request(R"({"messages": [{"role": "ipython", "content": "x"}]})", ctx_);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("'ipython'"), std::string::npos) << e.error().message;
  e = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "Q"}], "reasoning_effort": 3})", ctx_);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().param, "reasoning_effort");
}

TEST_F(RequestParse, TokenizeAndDetokenize) {
  auto t = parse_tokenize_request(R"({"prompt": "hi", "return_token_strs": true})", ctx_);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value().token_ids, (std::vector<int32_t>{256, 104, 105}));
  EXPECT_TRUE(t.value().return_token_strs);
  t = parse_tokenize_request(R"({"prompt": "hi", "add_special_tokens": false})", ctx_);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value().token_ids.size(), 2u);
  EXPECT_EQ(parse_tokenize_request(R"({"text": "hi"})", ctx_).error().param, "prompt");
  auto d = parse_detokenize_request(R"({"tokens": [104, 105]})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.value().token_ids, (std::vector<int32_t>{104, 105}));
  EXPECT_EQ(parse_detokenize_request(R"({"tokens": "hi"})").error().param, "tokens");
  EXPECT_EQ(parse_detokenize_request(R"({})").error().param, "tokens");
}

}  // namespace
}  // namespace strata::server
