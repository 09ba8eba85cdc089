// `strata plan` through the built binary: a deployment's memory per device from a config alone
// (DeepSeek-V3 on 3 x 8 L20), the engine's refusal with what fits (1 M tokens of activations on
// 8 H200), a simulated concurrency sweep with its files, and clear errors for bad flags.
#include <gtest/gtest.h>

#include <cstdlib>

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
