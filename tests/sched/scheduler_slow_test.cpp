// The long randomized run (label slow): more, larger workloads than the unit property test.
#include <gtest/gtest.h>

#include "core/rng.h"
#include "workload.h"

namespace strata::sched {
namespace {

TEST(SchedulerSlowTest, ManyRandomWorkloadsAllFinish) {
  for (uint64_t seed = 1000; seed < 4000; ++seed) {
    Rng rng(seed);
    const int64_t bs = int64_t{1} << rng.below(6);
    const int64_t usable = 1 + static_cast<int64_t>(rng.below(64));
    SchedulerConfig config{
        .max_num_seqs = 1 + static_cast<int64_t>(rng.below(16)),
        .max_num_batched_tokens = rng.below(2) ? bs : 1 + static_cast<int64_t>(rng.below(128)),
        .max_model_len =
            2 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * usable * bs))),
        .policy = rng.below(2) ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs,
        .long_prefill_token_threshold = rng.below(2) ? 0 : 1 + static_cast<int64_t>(rng.below(32)),
        .max_num_partial_prefills = 1 + static_cast<int64_t>(rng.below(4))};
    config.max_long_partial_prefills =
        1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(config.max_num_partial_prefills)));
    kv::CacheConfig cache{.block_size = bs, .enable_prefix_caching = rng.below(2) == 0};
    const int64_t max_fit = std::min(config.max_model_len, usable * bs) - 1;
    std::vector<testing::ScriptedRequest> script;
    const int n = 1 + static_cast<int>(rng.below(30));
    for (int i = 0; i < n; ++i) {
      testing::ScriptedRequest r;
      r.arrival_step = static_cast<int64_t>(rng.below(100));
      r.spec.request_id = std::to_string(i);  // ("r" + ... trips a GCC 12 -Wrestrict bug)
      int64_t len = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_fit + 3)));
      for (int64_t k = 0; k < len; ++k)
        r.spec.prompt_token_ids.push_back(static_cast<int32_t>(rng.below(4)));
      r.spec.stop.max_tokens = rng.below(3) ? 1 + static_cast<int64_t>(rng.below(64)) : 0;
      if (rng.below(2)) r.spec.stop.eos_token_ids = {0};
      r.spec.priority = static_cast<int64_t>(rng.below(3));
      if (len > max_fit) {
        r.expect_rejected = true;
        r.expected_code =
            len >= config.max_model_len ? StatusCode::kOutOfRange : StatusCode::kResourceExhausted;
      }
      if (rng.below(15) == 0)
        r.abort_at_step = r.arrival_step + static_cast<int64_t>(rng.below(60));
      script.push_back(r);
    }
    SCOPED_TRACE("seed " + std::to_string(seed));
    testing::run_workload(config, cache, usable + 1, script, seed, 200000);
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace strata::sched
