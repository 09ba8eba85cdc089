// `strata tokenize`, `strata detokenize` and `strata bench tokenizer` driven as a user would,
// through the built binary.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "cli_util.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::CliRun;
CliRun run(const std::string& args) {
  return testing::run_strata(args);
}

std::string stories() {
  return testing::shared_data_path("models/stories260K-hf");
}

TEST(TokenizerCliTest, TokenizeAndDetokenize) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf/tokenizer.json");
  CliRun r = run("tokenize " + stories() + " --text 'Once upon a time'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "[1, 403, 407, 261, 378]\n");
  r = run("tokenize " + stories() + " --text 'Once upon a time' --no-special --pieces");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "[403, 407, 261, 378]\n[\"▁Once\", \"▁upon\", \"▁a\", \"▁time\"]\n");
  r = run("detokenize " + stories() + " --ids 1,403,407,261,378");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "Once upon a time\n");
  r = run("detokenize " + stories() + " --ids 1,403 --no-skip-special-tokens");
  EXPECT_EQ(r.out, "<s> Once\n");
}

TEST(TokenizerCliTest, ClearErrors) {
  CliRun r = run("tokenize /no/such/model --text hi");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("/no/such/model"), std::string::npos) << r.out;
  std::string tiny = testing::repo_path("models/strata-tiny");
  r = run("tokenize " + tiny);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--text"), std::string::npos) << r.out;
  r = run("detokenize " + tiny + " --ids 1,99999");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("99999"), std::string::npos) << r.out;
  r = run("detokenize " + tiny + " --ids 1,x");
  EXPECT_EQ(r.code, 2);
  r = run("tokenize " + tiny + " --text \"$(printf '\\377')\"");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("UTF-8"), std::string::npos) << r.out;
}

TEST(TokenizerCliTest, BenchPrintsThroughput) {
  std::string file = ::testing::TempDir() + "/bench_text.txt";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("The quick brown fox jumps over the lazy dog. Le café est prêt. 今日は。\n", f);
  fclose(f);
  CliRun r = run("bench tokenizer " + testing::repo_path("models/strata-tiny") + " --file " + file +
                 " --seconds 0.05");
  ASSERT_EQ(r.code, 0) << r.out;
  // The file's size and token count, and rates that agree with them: MB/s over M tokens/s is
  // the bytes per token.
  const std::string text =
      "The quick brown fox jumps over the lazy dog. Le café est prêt. 今日は。\n";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(R"(file: ([0-9.]+) KB in 1 texts, ([0-9]+) tokens \(([0-9.]+) bytes/token\))")))
      << r.out;
  EXPECT_NEAR(std::stod(m[1]), text.size() / 1e3, 0.05 + 1e-9) << r.out;
  const double tokens = std::stod(m[2]), bytes_per_token = std::stod(m[3]);
  ASSERT_GT(tokens, 0);
  EXPECT_NEAR(bytes_per_token, text.size() / tokens, 0.005 + 1e-9) << r.out;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(
          R"(encode: +([0-9.]+) MB/s +\(first pass, cold cache: ([0-9.]+) MB/s\) +([0-9.]+) M tokens/s)")))
      << r.out;
  const double mb_s = std::stod(m[1]), mtok_s = std::stod(m[3]);
  ASSERT_GT(mtok_s, 0) << r.out;
  // Both rates are printed with two decimals.
  EXPECT_NEAR(mb_s / mtok_s, text.size() / tokens,
              (text.size() / tokens) * (0.005 / mb_s + 0.005 / mtok_s) + 1e-9)
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(decode: +[0-9.]+ MB/s)"))) << r.out;
}

}  // namespace
}  // namespace strata
