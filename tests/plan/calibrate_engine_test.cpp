// `strata plan --calibrate`'s measurement through a real engine (strata-tiny, dummy weights): the
// steps it times are the grid's batches (prefills up to the token budget, chunks of a longer prompt
// at a growing context, decodes of growing batch at two contexts), every one timed, and the engine
// is left as it was found. No figure here depends on the machine's speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "plan/calibrate.h"
#include "test_util.h"

namespace strata {
namespace {

TEST(CalibrateEngine, TimesTheGridsBatches) {
  // strata-tiny: 4 layers of 256, 4096 positions (the grid's 512-token context fits).
  auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy", 64 << 20);
  c.scheduler.max_model_len = 1024;
  c.scheduler.max_num_batched_tokens = 256;
  c.scheduler.max_num_seqs = 8;
  auto e = engine::Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  std::vector<std::string> lines;
  auto pts = plan::measure_steps(**e, {.budget_s = 1e9, .passes = 1},
                                 [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(pts.ok()) << pts.status().to_string();
  ASSERT_FALSE(pts->empty());
  EXPECT_FALSE(lines.empty());
  bool full_prefill = false, chunk_at_context = false;
  std::set<std::pair<size_t, int64_t>> decodes;  // (batch, context) of decode-only steps
  for (const plan::CalibrationPoint& p : *pts) {
    EXPECT_GT(p.seconds, 0);
    ASSERT_FALSE(p.batch.empty());
    int64_t tokens = 0;
    for (const auto& w : p.batch) tokens += w.num_new_tokens;
    EXPECT_LE(tokens, 256);
    if (p.batch.size() == 1 && p.batch[0].num_new_tokens == 256 && p.batch[0].context_len == 0)
      full_prefill = true;
    if (p.batch.size() == 1 && p.batch[0].num_new_tokens > 1 && p.batch[0].context_len >= 256) {
      chunk_at_context = true;
      EXPECT_EQ(p.batch[0].context_len % 256, 0);  // the previous chunks were whole budgets
    }
    if (std::all_of(p.batch.begin(), p.batch.end(),
                    [](const plan::SequenceWork& w) { return w.num_new_tokens == 1 && w.sample; }))
      decodes.insert({p.batch.size(), p.batch[0].context_len});
  }
  EXPECT_TRUE(full_prefill);
  EXPECT_TRUE(chunk_at_context);
  // Decode-only steps of 1, 2, 4 and 8 sequences, at the short and the long context.
  for (size_t b : {1, 2, 4, 8}) {
    bool short_ctx = false, long_ctx = false;
    for (const auto& [n, ctx] : decodes) {
      if (n != b) continue;
      // Requests prefilled in earlier steps of their phase have decoded a few tokens more.
      short_ctx |= ctx >= 64 && ctx < 96;
      long_ctx |= ctx >= 512 && ctx < 544;
    }
    EXPECT_TRUE(short_ctx) << b;
    EXPECT_TRUE(long_ctx) << b;
  }
  // Idle afterwards, and no longer observed.
  EXPECT_FALSE((*e)->has_unfinished_requests());
  auto again = plan::measure_steps(**e, {.budget_s = 0, .passes = 1});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());  // a budget of 0 starts no phase (only the warm-up ran)
}

}  // namespace
}  // namespace strata
