// `strata plan` through the built binary: a deployment's memory per device from a config alone
// (DeepSeek-V3 on 3 x 8 L20), the engine's refusal with what fits (1 M tokens of activations on
// 8 H200), a simulated concurrency sweep with its files, and clear errors for bad flags.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli_util.h"
#include "core/file_util.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::run_strata;

// The other CLI tests of this binary give every run a small KV cache through the environment; a
// plan of the whole device must not inherit it.
class PlanCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("STRATA_KV_CACHE_MEMORY")) saved_ = v;
    ::unsetenv("STRATA_KV_CACHE_MEMORY");
  }
  void TearDown() override {
    if (!saved_.empty()) ::setenv("STRATA_KV_CACHE_MEMORY", saved_.c_str(), 1);
  }
  std::string saved_;
};

std::string deepseek_v3() {
  return testing::shared_data_path("configs/deepseek-v3");
}

TEST_F(PlanCli, MemoryPerDeviceFromAConfig) {
  if (!file_exists(deepseek_v3() + "/config.json")) GTEST_SKIP() << "needs ../shared/data";
  auto r = run_strata("plan " + deepseek_v3() +
                          " --hardware l20x24 --tensor-parallel-size 8 --pipeline-parallel-size 3 "
                          "--max-model-len 32768 --max-num-seqs 16",
                      true);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const char* s : {"24 x l20", "TP 8, PP 3", "routed experts", "f8_e4m3", "MLA latent row",
                        "blocks of 16", "max_model_len 32768"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST_F(PlanCli, RefusesWhatTheEngineWouldWithWhatFits) {
  if (!file_exists(deepseek_v3() + "/config.json")) GTEST_SKIP() << "needs ../shared/data";
  auto r = run_strata("plan " + deepseek_v3() +
                          " --hardware h200x8 --tensor-parallel-size 8 --enable-expert-parallel "
                          "--max-model-len 163840 --max-num-batched-tokens 1048576",
                      true);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("Refused, as the engine would: --max-num-batched-tokens 1048576 needs"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("at most "), std::string::npos) << r.out;
}

TEST_F(PlanCli, SimulatesAConcurrencySweep) {
  const std::string stem = ::testing::TempDir() + "/strata_plan_sweep";
  auto r = run_strata("plan " + testing::repo_path("models/llama-134m") +
                          " --max-model-len 1024 --simulate --workload random:in=256,out=32,n=16"
                          " --max-concurrency 1,4 --save-sweep " +
                          stem,
                      true);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("| Concurrency |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("|           4 |"), std::string::npos) << r.out;
  EXPECT_TRUE(file_exists(stem + ".json"));
  EXPECT_TRUE(file_exists(stem + ".svg"));
}

TEST_F(PlanCli, CalibratesThisMachineAndSimulatesWithIt) {
  // A tiny model and small limits keep the grid short; the figures themselves are the machine's,
  // so only the file's shape and its use are checked.
  const std::string out = ::testing::TempDir() + "/strata_plan_calibrated.json";
  const std::string csv = ::testing::TempDir() + "/strata_plan_calibration.csv";
  auto r = run_strata("plan " + testing::repo_path("models/strata-tiny") +
                          " --load-format dummy --max-model-len 1024 --max-num-seqs 4"
                          " --max-num-batched-tokens 256 --kv-cache-memory 64MiB --calibrate"
                          " --calibrate-budget 100000 --calibrate-output " +
                          out + " --calibrate-steps " + csv +
                          " --simulate --workload random:in=64,out=8,n=8 --max-concurrency 1,4",
                      true);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const std::string& s :
       std::vector<std::string>{"Calibrating", "pass 2: 4 requests of 512 prompt tokens",
                                "Fitted to", "Wrote " + out, "| Concurrency |"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  auto text = read_file(out);
  ASSERT_TRUE(text.ok());
  for (const char* s : {"\"roofline\": \"sum\"", "\"attention_flops_per_s\"",
                        "\"placeholder\": false", "fitted by `strata plan --calibrate`"})
    EXPECT_NE(text->find(s), std::string::npos) << s << "\n" << *text;
  auto steps = read_file(csv);
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(steps->rfind("seconds,predicted,sequences,tokens,", 0), 0u) << *steps;
  // The file is a hardware file: plan with it.
  auto again = run_strata("plan " + testing::repo_path("models/strata-tiny") +
                              " --load-format dummy --max-model-len 1024 --kv-cache-memory 64MiB"
                              " --hardware " +
                              out + " --simulate --workload random:in=64,out=8,n=4",
                          true);
  EXPECT_EQ(again.code, 0) << again.out << again.err;
  // It measures this machine only.
  auto remote = run_strata("plan " + testing::repo_path("models/strata-tiny") +
                               " --load-format dummy --hardware h200 --calibrate",
                           true);
  EXPECT_EQ(remote.code, 2);
  EXPECT_NE(remote.err.find("--calibrate measures this machine"), std::string::npos) << remote.err;
}

TEST_F(PlanCli, SimulatesAShareGptWorkload) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  const std::string data = ::testing::TempDir() + "/strata_plan_cli_sharegpt.json";
  ASSERT_TRUE(write_file(data, R"([
    {"conversations": [
      {"from": "human", "value": "Explain in two sentences why the sky looks blue during the day."},
      {"from": "gpt", "value": "Air molecules scatter blue sunlight more than red light. So blue reaches our eyes from every direction."}]},
    {"conversations": [
      {"from": "human", "value": "Give me a recipe for a quick tomato soup with basil and garlic."}]}
  ])")
                  .ok());
  const std::string m = testing::repo_path("models/llama-134m");
  const std::string tok = testing::shared_data_path("tokenizers/qwen2.5");
  auto r =
      run_strata("plan " + m + " --max-model-len 2048 --simulate --workload sharegpt:path=" + data +
                     ",n=6,rate=2,seed=3,tokenizer=" + tok + " --max-concurrency 1,4",
                 true);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("| Concurrency |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("|           4 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6 requests, mean prompt "), std::string::npos) << r.out;
  // Both rows: no request failed (the Failed column is last).
  size_t none_failed = 0;
  for (size_t at = r.out.find("|      0 |\n"); at != std::string::npos;
       at = r.out.find("|      0 |\n", at + 1))
    ++none_failed;
  EXPECT_EQ(none_failed, 2u) << r.out;
  EXPECT_NE(r.out.find("Oversampled requests to reach 6"), std::string::npos) << r.out;
  // llama-134m has no tokenizer of its own: the error says how to give one.
  r = run_strata("plan " + m + " --simulate --workload sharegpt:path=" + data, true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("tokenizer="), std::string::npos) << r.err;
  r = run_strata("plan " + m + " --simulate --workload sharegpt:path=" + data + ",n=x", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("n=x"), std::string::npos) << r.err;
}

TEST_F(PlanCli, ClearErrors) {
  const std::string m = testing::repo_path("models/llama-134m");
  auto r = run_strata("plan " + m + " --hardware h999", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("h200"), std::string::npos) << r.err;  // lists the built-in devices
  r = run_strata("plan " + m + " --hardware h200x8 --tensor-parallel-size 4", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--hardware gives 8"), std::string::npos) << r.err;
  r = run_strata("plan " + m + " --simulate --workload random:in=x", true);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("in"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace strata
