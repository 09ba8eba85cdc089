// `strata generate` on AWQ, GPTQ and compressed-tensors checkpoints written by
// tests/model/int_quant_checkpoints.py (numpy; the test skips, saying so, without $STRATA_PYTHON or
// /usr/bin/python3 with numpy): the run succeeds on the integer kernels (W4G/W8G in the weights log
// line), and greedy ids are the same with the fast kernels and with the portable variant, whose
// matmul is the plain integer reference the fast ones equal bit for bit.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <string>

#include "cli_util.h"
#include "core/json.h"
#include "test_util.h"

namespace strata {
namespace {

const bool kSmallKvCache = [] { return ::setenv("STRATA_KV_CACHE_MEMORY", "64MiB", 0) == 0; }();

std::string python() {
  if (const char* env = std::getenv("STRATA_PYTHON"); env != nullptr && *env) return env;
  return "/usr/bin/python3";
}

TEST(IntQuantCli, GenerateRunsAwqAndGptqCheckpointsOnTheIntegerKernels) {
  if (std::system(("'" + python() + "' -c 'import numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "'" << python() << "' with numpy is needed (set STRATA_PYTHON)";
  char tmpl[] = "/tmp/strata_int_quant_cli_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ASSERT_EQ(std::system(("'" + python() + "' '" +
                         testing::repo_path("tests/model/int_quant_checkpoints.py") + "' '" + dir +
                         "' >/dev/null")
                            .c_str()),
            0);
  for (const auto& [name, storage] :
       std::vector<std::pair<std::string, std::string>>{{"awq_g32", "w4g"},
                                                        {"gptq_4bit_sym_g128", "w4g"},
                                                        {"gptq_8bit_sym_g64", "w8g"},
                                                        {"ct_w4_asym_g64", "w4g"},
                                                        {"ct_w8_sym_channel", "w8g"}}) {
    const std::string args = "generate " + dir + "/" + name +
                             " --prompt-ids 1,17,99,3,42 --max-tokens 8 --temperature 0 "
                             "--ignore-eos --json";
    testing::CliRun fast = testing::run_strata(args, true);
    ASSERT_EQ(fast.code, 0) << name << ": " << fast.err;
    EXPECT_NE(fast.err.find(storage + " "), std::string::npos)
        << name << ": the weights log line should show " << storage << "\n"
        << fast.err;
    auto j = parse_json(fast.out, "strata's output");
    ASSERT_TRUE(j.ok()) << fast.out;
    const auto ids = (*j)["generated_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(ids.size(), 8u) << name;
    for (int32_t id : ids) EXPECT_LT(id, 160) << name;
    testing::CliRun portable = testing::run_strata(args + " --kernels portable", true);
    ASSERT_EQ(portable.code, 0) << name << ": " << portable.err;
    auto p = parse_json(portable.out, "strata's output");
    ASSERT_TRUE(p.ok()) << portable.out;
    EXPECT_EQ((*p)["generated_ids"].get<std::vector<int32_t>>(), ids) << name;
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace
}  // namespace strata
