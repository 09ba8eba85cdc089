// End-to-end: `strata bench serve` against the real `strata serve` on stories260K over loopback.
// The random prompts must have exactly the requested token count (through the local tokenizer and
// through the server's /tokenize), every request must succeed, and with --ignore-eos every request
// generates exactly the requested tokens, which the printed block and the saved JSON report.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "core/file_util.h"
#include "core/json.h"
#include "result_checks.h"
#include "server/server_process.h"
#include "test_util.h"

namespace strata::bench {
namespace {

struct CliOutput {
  int exit_code = -1;
  std::string out;
};

CliOutput run_bench(const std::string& args) {
  std::string cmd = std::string(STRATA_BINARY_DIR) + "/strata bench serve " + args + " 2>&1";
  CliOutput r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string line_value(const std::string& text, const std::string& label) {
  size_t pos = text.find(label);
  if (pos == std::string::npos) return "";
  size_t end = text.find('\n', pos);
  std::string rest = text.substr(pos + label.size(), end - pos - label.size());
  size_t b = rest.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  size_t e = rest.find_last_not_of(' ');
  return rest.substr(b, e - b + 1);
}

class BenchAgainstStrataServe : public ::testing::Test {
 protected:
  void SetUp() override {
    STRATA_REQUIRE_SHARED("models/stories260K-hf");
    model_ = strata::testing::shared_data_path("models/stories260K-hf");
    server_ = std::make_unique<server::testing::ServerProcess>(std::vector<std::string>{
        model_, "--host", "127.0.0.1", "--port", "0", "--served-model-name", "stories",
        "--kv-cache-memory", "32MiB", "--threads", "1"});
    ASSERT_TRUE(server_->ok()) << server_->output();
    dir_ = ::testing::TempDir() + "/strata_bench_vs_serve";
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }

  void check_run(const std::string& extra, const std::string& file) {
    auto r = run_bench("--base-url " + server_->base() +
                       " --model stories --num-prompts 8 --max-concurrency 4 "
                       "--random-input-len 24 --random-output-len 12 --ignore-eos --seed 7 "
                       "--disable-tqdm --save-result --save-detailed --result-dir " +
                       dir_ + " --result-filename " + file + " " + extra);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(line_value(r.out, "Successful requests:"), "8") << r.out;
    EXPECT_EQ(line_value(r.out, "Failed requests:"), "0") << r.out;
    EXPECT_EQ(line_value(r.out, "Total input tokens:"), "192") << r.out;
    EXPECT_EQ(line_value(r.out, "Total generated tokens:"), "96") << r.out;
    EXPECT_NE(r.out.find("Mean TTFT (ms):"), std::string::npos);
    EXPECT_NE(r.out.find("P99 E2EL (ms):"), std::string::npos);

    auto text = read_file(dir_ + "/" + file);
    ASSERT_TRUE(text.ok()) << r.out;
    Json j = Json::parse(*text);
    EXPECT_EQ(j["completed"], 8);
    EXPECT_EQ(j["failed"], 0);
    EXPECT_EQ(j["model_id"], "stories");
    EXPECT_EQ(j["total_input_tokens"], 192);
    EXPECT_EQ(j["total_output_tokens"], 96);
    ASSERT_EQ(j["output_lens"].size(), 8u);
    for (const auto& len : j["output_lens"]) EXPECT_EQ(len, 12);
    for (const auto& len : j["input_lens"]) EXPECT_EQ(len, 24);
    ASSERT_EQ(j["itls"].size(), 8u);
    for (const auto& itl : j["itls"]) EXPECT_EQ(itl.size(), 11u);  // one gap per later token
    testing::expect_consistent_result(j);
  }

  std::string model_, dir_;
  std::unique_ptr<server::testing::ServerProcess> server_;
};

TEST_F(BenchAgainstStrataServe, LocalTokenizerGivesExactPromptLengths) {
  check_run("--tokenizer " + model_, "local.json");
}

TEST_F(BenchAgainstStrataServe, ServerTokenizeGivesExactPromptLengths) {
  check_run("", "remote.json");
}

// A server with speculative decoding: the result gains vLLM's "Speculative Decoding" block,
// computed from the server's counters over the run (and absent without speculation above).
TEST(BenchAgainstSpeculativeServe, PrintsTheSpeculativeDecodingBlock) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  const std::string model = strata::testing::shared_data_path("models/stories260K-hf");
  server::testing::ServerProcess server({model, "--host", "127.0.0.1", "--port", "0",
                                         "--served-model-name", "stories", "--kv-cache-memory",
                                         "32MiB", "--threads", "1", "--speculative-config",
                                         R"({"method": "ngram", "num_speculative_tokens": 3,
                                             "prompt_lookup_min": 1})"});
  ASSERT_TRUE(server.ok()) << server.output();
  auto r = run_bench("--base-url " + server.base() +
                     " --model stories --num-prompts 6 --max-concurrency 2 --random-input-len 48"
                     " --random-output-len 64 --ignore-eos --seed 3 --temperature 0 --disable-tqdm"
                     " --tokenizer " +
                     model);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ASSERT_NE(r.out.find("---------------Speculative Decoding---------------"), std::string::npos)
      << r.out;
  const double drafts = std::stod(line_value(r.out, "Draft tokens:"));
  const double accepted = std::stod(line_value(r.out, "Accepted tokens:"));
  EXPECT_GT(drafts, 0) << r.out;
  EXPECT_LE(accepted, drafts);
  EXPECT_NEAR(std::stod(line_value(r.out, "Acceptance rate (%):")), accepted / drafts * 100, 0.01);
  EXPECT_NE(r.out.find("  Position 2:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace strata::bench
