// DeepSeek-V4 (the real Pro and Flash configs) and V3.2, scaled down with --hf-overrides and run
// with dummy weights through `strata generate` as a user types it: greedy ids equal with 4-token
// prefill chunks and alone vs. in a batch of 8 prompts, over prompts that cross the sliding
// window, the 128-token compressed rows and a 256-token block; the start-up log gives V4's KV
// bytes per kind (the published 584-byte rows with an fp8 cache).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli_util.h"
#include "core/json.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::CliRun;
using testing::run_strata;

// 4 layers, hidden 512, 16 experts, 8 heads of the real 512 values; the layer kinds of the real
// configs are kept (Pro: HCA, HCA, CSA, HCA; Flash: window, window, CSA, HCA) with their
// hash-routed first layers, window 128 and compression ratios 4 and 128.
const char* kV4Scale =
    R"({"num_hidden_layers": 4, "hidden_size": 512, "n_routed_experts": 16,
        "num_attention_heads": 8, "q_lora_rank": 128, "o_groups": 4, "o_lora_rank": 64,
        "moe_intermediate_size": 128, "vocab_size": 4096, "index_n_heads": 4})";
const char* kV32Scale =
    R"({"num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
        "moe_intermediate_size": 256, "n_routed_experts": 16, "num_experts_per_tok": 4,
        "n_group": 4, "topk_group": 2, "first_k_dense_replace": 1, "vocab_size": 4096,
        "num_attention_heads": 16, "index_topk": 64, "index_n_heads": 8})";

std::string ids(int n, int seed) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += (i ? "," : "") + std::to_string(1 + (seed * 131 + i * 37) % 4000);
  return s;
}

struct GenRun {
  std::vector<std::vector<int32_t>> ids;
  std::string log;
};

GenRun generate(const std::string& config, const char* scale, const std::string& flags,
                const std::vector<std::string>& prompts) {
  std::string cmd = "generate " + testing::shared_data_path(config) +
                    " --load-format dummy --hf-overrides '" + scale +
                    "' --max-tokens 5 --temperature 0 --ignore-eos --json --max-model-len 4096 "
                    "--max-num-seqs 8 --kv-cache-memory 512MiB " +
                    flags;
  for (const std::string& p : prompts) cmd += " --prompt-ids " + p;
  CliRun r = run_strata(cmd, true);
  GenRun out;
  out.log = r.err;
  EXPECT_EQ(r.code, 0) << cmd << "\n" << r.err;
  auto j = parse_json(r.out, "generate's output");
  if (!j.ok()) return out;
  if (j->is_array()) {
    for (const Json& e : *j) out.ids.push_back(e["generated_ids"].get<std::vector<int32_t>>());
  } else {
    out.ids.push_back((*j)["generated_ids"].get<std::vector<int32_t>>());
  }
  return out;
}

void expect_invariant(const std::string& config, const char* scale, const std::string& kv) {
  // 300 tokens: past the window (128), two HCA rows, 75 CSA rows, one full 256-token block.
  const std::string prompt = ids(300, 1);
  const GenRun whole = generate(config, scale, kv, {prompt});
  ASSERT_EQ(whole.ids.size(), 1u);
  ASSERT_EQ(whole.ids[0].size(), 5u);
  const GenRun chunked = generate(config, scale, kv + " --max-num-batched-tokens 4", {prompt});
  ASSERT_EQ(chunked.ids.size(), 1u);
  EXPECT_EQ(chunked.ids[0], whole.ids[0]) << config << ": 4-token prefill chunks";
  // The same prompt as the fourth of eight of other lengths (some shorter than the window).
  std::vector<std::string> eight;
  for (int s = 0; s < 8; ++s) eight.push_back(s == 3 ? prompt : ids(20 + 37 * s, 10 + s));
  const GenRun batch = generate(config, scale, kv, eight);
  ASSERT_EQ(batch.ids.size(), 8u);
  EXPECT_EQ(batch.ids[3], whole.ids[0]) << config << ": alone vs. in a batch of 8";
}

TEST(DeepseekV4Cli, ProGreedyIsChunkAndBatchInvariant) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-pro/config.json");
  expect_invariant("configs/deepseek-v4-pro", kV4Scale, "--dtype bfloat16");
}

TEST(DeepseekV4Cli, FlashGreedyIsChunkAndBatchInvariantWithAnFp8Cache) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  expect_invariant("configs/deepseek-v4-flash", kV4Scale, "--kv-cache-dtype fp8");
}

TEST(DeepseekV4Cli, V32GreedyIsChunkAndBatchInvariant) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v3.2/config.json");
  expect_invariant("configs/deepseek-v3.2", kV32Scale, "--dtype bfloat16");
}

TEST(DeepseekV4Cli, StartUpLogGivesTheKvBytesOfEachKind) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  const GenRun r =
      generate("configs/deepseek-v4-flash", kV4Scale, "--kv-cache-dtype fp8", {ids(10, 2)});
  // The published fp8 layout: 584-byte rows (448 e4m3 nope + 64 bf16 rope + 7 scales + pad) and
  // 132-byte indexer keys; blocks of 256 tokens; the Flash config's first four layers are two
  // window-only layers, one CSA (ratio 4) and one HCA (ratio 128). A block of fp8 rows holds
  // every row's 576 data bytes, then every row's 8 scale bytes, padded to a multiple of 576 (as
  // vLLM's layout): the CSA layer's 64 rows 65 x 576 bytes with its 64 keys of 132, the HCA
  // layer's 2 rows 3 x 576.
  const auto padded = [](int rows) { return (rows * 584 + 575) / 576 * 576; };
  EXPECT_NE(r.log.find("584 B per window/c4/c128 row, 132 B per indexer key"), std::string::npos)
      << r.log;
  EXPECT_NE(r.log.find("2 window-only, 1 c4+indexer, 1 c128"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("KV bytes per block of 256 tokens: " +
                       std::to_string(padded(64) + 64 * 132 + padded(2))),
            std::string::npos)
      << r.log;
}

}  // namespace
}  // namespace strata
