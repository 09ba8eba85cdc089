// ChatTemplate: loading from model directories, tokenizer_config.json files, override files and
// GGUF metadata; rendering conversations with transformers' variables and options.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "core/file_util.h"
#include "core/json.h"
#include "io/writers.h"

namespace strata {
namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/strata_chat_template_XXXXXX";
  return ::mkdtemp(tmpl);
}

OrderedJson parse(const std::string& text) {
  auto j = parse_ordered_json(text, "test JSON");
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  return j.ok() ? *j : OrderedJson();
}

const char* kChatml =
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string render(const ChatTemplate& t, const OrderedJson& messages, bool gen = false,
                   const OrderedJson* tools = nullptr, const OrderedJson* kwargs = nullptr) {
  ChatTemplateInputs in;
  in.messages = &messages;
  in.tools = tools;
  in.extra_kwargs = kwargs;
  in.add_generation_prompt = gen;
  auto r = t.render(in);
  return r.ok() ? *r : "<error: " + r.status().message() + ">";
}

TEST(ChatTemplate, RendersAConversation) {
  auto t = ChatTemplate::parse(kChatml);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  OrderedJson msgs = parse(R"([{"role": "user", "content": "Hi"}])");
  EXPECT_EQ(render(*t, msgs), "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(render(*t, msgs, true), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, VariablesFollowTransformers) {
  auto t = ChatTemplate::parse(
      "{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|{{ bos_token }}|"
      "{{ eos_token }}|{{ unk_token is defined }}|{{ enable_thinking }}|{{ flag }}",
      {.tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}}});
  ASSERT_TRUE(t.ok());
  OrderedJson msgs = OrderedJson::array();
  OrderedJson kwargs = parse(R"({"enable_thinking": false, "flag": [1, "a"], "eos_token": "<E>"})");
  EXPECT_EQ(render(*t, msgs, true, nullptr, &kwargs),
            "True|True|True|<s>|<E>|False|False|[1, 'a']");
  OrderedJson bad = parse(R"({"messages": []})");
  EXPECT_EQ(render(*t, msgs, false, nullptr, &bad),
            "<error: chat template argument 'messages' cannot be passed as an extra keyword "
            "argument>");
}

TEST(ChatTemplate, ToolsKeepTheirKeyOrderInTojson) {
  auto t = ChatTemplate::parse("{% for t in tools %}{{ t | tojson }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  OrderedJson tools =
      parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}}])");
  OrderedJson msgs = OrderedJson::array();
  EXPECT_EQ(render(*t, msgs, false, &tools),
            R"({"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": 2}}})");
}

TEST(ChatTemplate, ToolUseTemplateIsChosenWhenToolsAreGiven) {
  auto t = ChatTemplate::parse("plain", {}, "tools:{{ tools | length }}");
  ASSERT_TRUE(t.ok());
  OrderedJson msgs = OrderedJson::array();
  OrderedJson tools = parse(R"([{"name": "a"}, {"name": "b"}])");
  EXPECT_EQ(render(*t, msgs), "plain");
  EXPECT_EQ(render(*t, msgs, false, &tools), "tools:2");
}

TEST(ChatTemplate, ContinueFinalMessage) {
  auto t = ChatTemplate::parse(kChatml);
  ASSERT_TRUE(t.ok());
  OrderedJson msgs = parse(
      R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "The answer is "}])");
  ChatTemplateInputs in;
  in.messages = &msgs;
  in.continue_final_message = true;
  auto r = t->render(in);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nThe answer is ");
  in.add_generation_prompt = true;
  EXPECT_FALSE(t->render(in).ok());
  // A template that drops the final message cannot be continued.
  auto dropping = ChatTemplate::parse("{{ messages[0].content }}");
  ASSERT_TRUE(dropping.ok());
  in.add_generation_prompt = false;
  auto bad = dropping->render(in);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not appear"), std::string::npos);
}

TEST(ChatTemplate, BadInputsAreErrors) {
  auto t = ChatTemplate::parse(kChatml);
  ASSERT_TRUE(t.ok());
  OrderedJson not_array = parse(R"({"role": "user"})");
  EXPECT_NE(render(*t, not_array).find("messages must be a JSON array"), std::string::npos);
  // A message without content: the template's own `+` fails with Python's message.
  OrderedJson no_content = parse(R"([{"role": "user"}])");
  EXPECT_EQ(render(*t, no_content),
            "<error: template error at line 1: 'dict object' has no attribute 'content'>");
  auto raising = ChatTemplate::parse(
      "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be from the "
      "user') }}{% endif %}");
  ASSERT_TRUE(raising.ok());
  OrderedJson sys = parse(R"([{"role": "system", "content": "S"}])");
  EXPECT_EQ(render(*raising, sys), "<error: first message must be from the user>");
  auto syntax = ChatTemplate::parse("ok\n{% if %}");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(
      syntax.status().message(),
      "template syntax error at line 2: Expected an expression, got 'end of statement block'");
}

TEST(ChatTemplate, RendersConcurrentlyFromManyThreads) {
  auto t = ChatTemplate::parse(
      "{% set ns = namespace(n=0) %}{% macro line(m) %}{{ m.role }}:{{ m.content }};{% endmacro %}"
      "{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ line(m) }}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.ok());
  std::vector<std::thread> threads;
  std::vector<int> good(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      OrderedJson msgs = OrderedJson::array();
      for (int i = 0; i <= k; ++i)
        msgs.push_back({{"role", "user"}, {"content", std::to_string(i)}});
      std::string expected;
      for (int i = 0; i <= k; ++i) expected += "user:" + std::to_string(i) + ";";
      expected += std::to_string(k + 1);
      for (int rep = 0; rep < 200; ++rep) good[k] += render(*t, msgs) == expected ? 1 : 0;
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(good[k], 200) << "thread " << k;
}

TEST(ChatTemplateLoad, DirectoryWithTokenizerConfig) {
  std::string dir = temp_dir();
  ASSERT_TRUE(write_file(dir + "/tokenizer_config.json",
                         R"({"bos_token": {"__type": "AddedToken", "content": "<B>"},
                             "eos_token": "<E>", "unk_token": null,
                             "chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}{{ unk_token is defined }}"})")
                  .ok());
  auto t = load_chat_template(dir);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  OrderedJson msgs = parse(R"([{"role": "user", "content": "x"}])");
  EXPECT_EQ(render(*t, msgs), "<B>x<E>False");
  // The config file itself works too.
  auto from_file = load_chat_template(dir + "/tokenizer_config.json");
  ASSERT_TRUE(from_file.ok());
  EXPECT_EQ(render(*from_file, msgs), "<B>x<E>False");
  // special_tokens_map.json overrides, and chat_template.jinja wins over the config's template.
  ASSERT_TRUE(
      write_file(dir + "/special_tokens_map.json", R"({"eos_token": {"content": "<END>"}})").ok());
  ASSERT_TRUE(write_file(dir + "/chat_template.jinja", "J:{{ eos_token }}\n").ok());
  auto jinja_file = load_chat_template(dir);
  ASSERT_TRUE(jinja_file.ok());
  EXPECT_EQ(render(*jinja_file, msgs), "J:<END>");
}

TEST(ChatTemplateLoad, NamedTemplatesAndOverrides) {
  std::string dir = temp_dir();
  ASSERT_TRUE(write_file(dir + "/tokenizer_config.json",
                         R"({"eos_token": "<E>", "chat_template": [
                               {"name": "default", "template": "D{{ eos_token }}"},
                               {"name": "tool_use", "template": "T{{ tools | length }}"},
                               {"name": "rag", "template": "R"}]})")
                  .ok());
  OrderedJson msgs = OrderedJson::array();
  OrderedJson tools = parse(R"([{"name": "a"}])");
  auto def = load_chat_template(dir);
  ASSERT_TRUE(def.ok()) << def.status().to_string();
  EXPECT_EQ(render(*def, msgs), "D<E>");
  EXPECT_EQ(render(*def, msgs, false, &tools), "T1");
  auto rag = load_chat_template(dir, "", "rag");
  ASSERT_TRUE(rag.ok());
  EXPECT_EQ(render(*rag, msgs), "R");
  auto missing = load_chat_template(dir, "", "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("available: default, tool_use, rag"),
            std::string::npos);
  // Override by file and by inline text; a missing override file is a clear error.
  ASSERT_TRUE(write_file(dir + "/custom.jinja", "C{{ eos_token }}").ok());
  auto by_file = load_chat_template(dir, dir + "/custom.jinja");
  ASSERT_TRUE(by_file.ok());
  EXPECT_EQ(render(*by_file, msgs), "C<E>");
  auto inline_text = load_chat_template(dir, "I{{ eos_token }}");
  ASSERT_TRUE(inline_text.ok());
  EXPECT_EQ(render(*inline_text, msgs), "I<E>");
  auto no_file = load_chat_template(dir, dir + "/absent.jinja");
  ASSERT_FALSE(no_file.ok());
  EXPECT_EQ(no_file.status().code(), StatusCode::kNotFound);
}

TEST(ChatTemplateLoad, MissingOrBrokenTemplatesAreClearErrors) {
  std::string dir = temp_dir();
  auto none = load_chat_template(dir + "/nope");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(write_file(dir + "/tokenizer_config.json", R"({"eos_token": "<E>"})").ok());
  auto absent = load_chat_template(dir);
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("--chat-template"), std::string::npos);
  ASSERT_TRUE(write_file(dir + "/tokenizer_config.json", R"({"chat_template": "{% for %}"})").ok());
  auto broken = load_chat_template(dir);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(
      broken.status().message().find("tokenizer_config.json': template syntax error at line 1"),
      std::string::npos)
      << broken.status().message();
  ASSERT_TRUE(write_file(dir + "/tokenizer_config.json", "{not json").ok());
  EXPECT_FALSE(load_chat_template(dir).ok());
}

TEST(ChatTemplateLoad, GgufMetadata) {
  std::string path = temp_dir() + "/m.gguf";
  ASSERT_TRUE(
      io::write_gguf(path,
                     {{"general.architecture", std::string("llama")},
                      {"tokenizer.ggml.tokens", std::vector<std::string>{"<unk>", "<s>", "</s>"}},
                      {"tokenizer.ggml.bos_token_id", uint32_t{1}},
                      {"tokenizer.ggml.eos_token_id", uint32_t{2}},
                      {"tokenizer.chat_template",
                       std::string("{{ bos_token }}{% for m in messages %}[{{ m.content }}]"
                                   "{% endfor %}{{ eos_token }}")},
                      {"tokenizer.chat_template.short", std::string("S")}},
                     {})
          .ok());
  auto t = load_chat_template(path);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  OrderedJson msgs =
      parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])");
  EXPECT_EQ(render(*t, msgs), "<s>[a][b]</s>");
  auto named = load_chat_template(path, "", "short");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(render(*named, msgs), "S");
  std::string bare = temp_dir() + "/bare.gguf";
  ASSERT_TRUE(io::write_gguf(bare, {{"general.architecture", std::string("llama")}}, {}).ok());
  auto missing = load_chat_template(bare);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tokenizer.chat_template"), std::string::npos);
  auto overridden = load_chat_template(bare, "O{{ '' }}");
  ASSERT_TRUE(overridden.ok());
  EXPECT_EQ(render(*overridden, msgs), "O");
}

}  // namespace
}  // namespace strata
