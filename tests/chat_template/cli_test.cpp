// Drives the real `strata chat-template` binary: the golden Qwen3 renders (with and without
// thinking), tools from a request-shaped file, and clear failures.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include "cli_util.h"
#include "core/file_util.h"
#include "core/json.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::CliRun;
using testing::run_strata;

std::string temp_dir() {
  char tmpl[] = "/tmp/strata_chat_cli_XXXXXX";
  return ::mkdtemp(tmpl);
}

TEST(ChatTemplateCli, RendersGoldenConversations) {
  STRATA_REQUIRE_SHARED("golden/chat_templates.json");
  auto text = read_file(testing::shared_data_path("golden/chat_templates.json"));
  ASSERT_TRUE(text.ok());
  auto golden = parse_ordered_json(*text, "golden");
  ASSERT_TRUE(golden.ok());
  std::string dir = temp_dir();
  int checked = 0;
  for (const auto& r : (*golden)["renders"]) {
    if (r["tokenizer_config"] != "tokenizers/qwen3/tokenizer_config.json") continue;
    OrderedJson request = {{"messages", r["messages"]}};
    if (r.contains("tools")) request["tools"] = r["tools"];
    ASSERT_TRUE(write_file(dir + "/request.json", request.dump()).ok());
    std::string args = "chat-template " + testing::shared_data_path("tokenizers/qwen3") +
                       " --messages " + dir + "/request.json";
    if (r["add_generation_prompt"].get<bool>()) args += " --add-generation-prompt";
    if (!r["extra"].empty()) args += " --kwargs '" + r["extra"].dump() + "'";
    CliRun run = run_strata(args);
    EXPECT_EQ(run.code, 0) << run.out;
    EXPECT_EQ(run.out, r["expected"].get<std::string>()) << r["case"];
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

TEST(ChatTemplateCli, ErrorsAreClearAndExitNonZero) {
  std::string dir = temp_dir();
  ASSERT_TRUE(write_file(dir + "/msgs.json", R"([{"role": "user", "content": "hi"}])").ok());
  CliRun missing = run_strata("chat-template " + dir + " --messages " + dir + "/msgs.json");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("has no chat template"), std::string::npos) << missing.out;

  ASSERT_TRUE(write_file(dir + "/bad.jinja",
                         "{% if messages %}\n{{ messages[0].content + 1 }}\n{% endif %}")
                  .ok());
  CliRun bad = run_strata("chat-template " + dir + " --messages " + dir +
                          "/msgs.json --chat-template " + dir + "/bad.jinja");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("template error at line 2: can only concatenate str (not \"int\") to str"),
            std::string::npos)
      << bad.out;

  CliRun bad_json = run_strata("chat-template " + dir + " --messages " + dir +
                               "/bad.jinja --chat-template " + dir + "/bad.jinja");
  EXPECT_EQ(bad_json.code, 1);
  EXPECT_NE(bad_json.out.find("is not valid JSON"), std::string::npos) << bad_json.out;

  CliRun no_messages = run_strata("chat-template " + dir);
  EXPECT_EQ(no_messages.code, 2);
  EXPECT_NE(no_messages.out.find("--messages FILE is required"), std::string::npos);
}

// --tokenizer-mode deepseek_v4: the DeepSeek-V4 encoder, no model directory needed.
TEST(ChatTemplateCli, DeepseekV4Encoding) {
  std::string dir = temp_dir();
  ASSERT_TRUE(write_file(dir + "/chat.json",
                         R"({"messages": [{"role": "user", "content": "Q1"},
                             {"role": "assistant", "reasoning_content": "r", "content": "A1"},
                             {"role": "user", "content": "Q2"}]})")
                  .ok());
  const std::string base = "chat-template --tokenizer-mode deepseek_v4 --messages " + dir +
                           "/chat.json --add-generation-prompt";
  CliRun think = run_strata(base, true);
  EXPECT_EQ(think.code, 0) << think.err;
  EXPECT_EQ(think.out,
            "<｜begin▁of▁sentence｜><｜User｜>Q1<｜Assistant｜></think>A1<｜end▁of▁sentence｜>"
            "<｜User｜>Q2<｜Assistant｜><think>");
  CliRun chat = run_strata(base + " --kwargs '{\"thinking\": false}'", true);
  EXPECT_EQ(chat.code, 0) << chat.err;
  const std::string chat_tail = "<｜User｜>Q2<｜Assistant｜></think>";
  ASSERT_GE(chat.out.size(), chat_tail.size());
  EXPECT_EQ(chat.out.substr(chat.out.size() - chat_tail.size()), chat_tail);
  CliRun max = run_strata(base + " --reasoning-effort max", true);
  EXPECT_EQ(max.code, 0) << max.err;
  EXPECT_EQ(max.out.rfind("<｜begin▁of▁sentence｜>Reasoning Effort: Absolute maximum", 0), 0u);

  ASSERT_TRUE(write_file(dir + "/bad.json", R"([{"role": "assistant", "tool_calls": [1]}])").ok());
  CliRun bad =
      run_strata("chat-template --tokenizer-mode deepseek_v4 --messages " + dir + "/bad.json");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("messages[0].tool_calls[0]"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace strata
