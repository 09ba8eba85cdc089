// Seeded random workloads over tiny pools and the blog scenario at small scale: every admitted
// request finishes, impossible ones are rejected at submit, no step is empty while work is
// waiting, and the invariants hold after every step (see workload.h for the checks).
#include <gtest/gtest.h>

#include <cstdio>

#include "core/rng.h"
#include "sched/scheduler.h"
#include "workload.h"

namespace strata::sched {
namespace {

using testing::run_workload;
using testing::ScriptedRequest;
using testing::TierSim;

struct RandomWorkload {
  SchedulerConfig config;
  kv::CacheConfig cache;
  int64_t num_blocks = 0;
  std::vector<ScriptedRequest> script;
};

// Tiny pools, block sizes 1..16, budgets down to one block, both policies, prefix caching on and
// off, partial-prefill caps, random prompts (some sharing prefixes, some impossible), random
// output lengths, stop tokens, n > 1 siblings, aborts and stop-string finishes.
RandomWorkload make_workload(uint64_t seed, int max_requests, int max_output,
                             bool with_pauses = false) {
  Rng rng(seed);
  RandomWorkload w;
  const int64_t bs = int64_t{1} << rng.below(5);
  const int64_t usable = 1 + static_cast<int64_t>(rng.below(24));
  const int64_t pool_tokens = usable * bs;
  w.num_blocks = usable + 1;
  w.cache = {.block_size = bs, .enable_prefix_caching = rng.below(2) == 0};
  w.config.max_model_len =
      2 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * pool_tokens)));
  switch (rng.below(3)) {
    case 0:
      w.config.max_num_batched_tokens = bs;
      break;
    case 1:
      w.config.max_num_batched_tokens = 1 + static_cast<int64_t>(rng.below(8));
      break;
    default:
      w.config.max_num_batched_tokens = 1 + static_cast<int64_t>(rng.below(64));
      break;
  }
  w.config.max_num_seqs = 1 + static_cast<int64_t>(rng.below(8));
  w.config.policy = rng.below(2) ? SchedulingPolicy::kPriority : SchedulingPolicy::kFcfs;
  w.config.max_num_partial_prefills = 1 + static_cast<int64_t>(rng.below(3));
  w.config.max_long_partial_prefills =
      1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(w.config.max_num_partial_prefills)));
  w.config.long_prefill_token_threshold =
      rng.below(2) ? 0 : 1 + static_cast<int64_t>(rng.below(16));

  const int64_t max_fit = std::min(w.config.max_model_len - 1, pool_tokens - 1);
  const int n = 1 + static_cast<int>(rng.below(static_cast<uint64_t>(max_requests)));
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) {
    ScriptedRequest r;
    r.arrival_step = static_cast<int64_t>(rng.below(30));
    r.spec.request_id = "r" + std::to_string(i);
    int64_t len;
    if (rng.below(8) == 0) {
      len = max_fit + 1 + static_cast<int64_t>(rng.below(4));  // cannot fit
    } else {
      len =
          1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(std::max<int64_t>(1, max_fit))));
    }
    std::vector<int32_t> tokens;
    if (!prompts.empty() && rng.below(3) == 0) {  // share a prefix with an earlier prompt
      const auto& other = prompts[rng.below(prompts.size())];
      tokens.assign(other.begin(),
                    other.begin() + std::min<int64_t>(len, static_cast<int64_t>(other.size())));
    }
    while (static_cast<int64_t>(tokens.size()) < len)
      tokens.push_back(static_cast<int32_t>(rng.below(31)));
    prompts.push_back(tokens);
    r.spec.prompt_token_ids = tokens;
    r.spec.stop.max_tokens =
        rng.below(4) == 0 ? 0
                          : 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_output)));
    r.spec.stop.min_tokens =
        r.spec.stop.max_tokens > 0
            ? static_cast<int64_t>(rng.below(static_cast<uint64_t>(r.spec.stop.max_tokens) + 1))
            : 0;
    if (rng.below(2)) r.spec.stop.eos_token_ids = {0};
    if (rng.below(3) == 0) r.spec.stop.stop_token_ids = {static_cast<int32_t>(rng.below(31))};
    r.spec.stop.ignore_eos = rng.below(4) == 0;
    r.spec.priority = static_cast<int64_t>(rng.below(4));
    if (rng.below(4) == 0) r.spec.cache_salt = "salt" + std::to_string(rng.below(2));
    if (len > max_fit) {
      r.expect_rejected = true;
      r.expected_code =
          len >= w.config.max_model_len ? StatusCode::kOutOfRange : StatusCode::kResourceExhausted;
    }
    const int r_index = static_cast<int>(w.script.size());
    if (rng.below(12) == 0) {
      r.abort_at_step = r.arrival_step + static_cast<int64_t>(rng.below(40));
      r.finish_instead = rng.below(3) == 0;
    }
    if (with_pauses && rng.below(3) == 0) {  // a client that stops reading for a while
      r.pause_at_step = r.arrival_step + static_cast<int64_t>(rng.below(30));
      r.resume_at_step = r.pause_at_step + 1 + static_cast<int64_t>(rng.below(40));
    }
    w.script.push_back(r);
    // n > 1: siblings share the leader's prompt blocks.
    if (!w.script[r_index].expect_rejected && rng.below(6) == 0) {
      const int sibs = 1 + static_cast<int>(rng.below(2));
      for (int k = 0; k < sibs; ++k) {
        ScriptedRequest sib = w.script[r_index];
        sib.spec.request_id = r.spec.request_id + "." + std::to_string(k + 1);
        sib.spec.sibling_of = r.spec.request_id;
        sib.abort_at_step = -1;
        // The engine pauses every choice of a request; now and then only some.
        if (rng.below(4) == 0) sib.pause_at_step = sib.resume_at_step = -1;
        if (rng.below(10) == 0)
          sib.abort_at_step = sib.arrival_step + static_cast<int64_t>(rng.below(20));
        w.script.push_back(sib);
      }
    }
  }
  return w;
}

TEST(SchedulerPropertyTest, RandomWorkloadsOnTinyPoolsAllFinish) {
  int64_t total_steps = 0, preemptions = 0, rejected = 0, finished = 0, hits = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    RandomWorkload w = make_workload(seed, /*max_requests=*/10, /*max_output=*/24);
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto result = run_workload(w.config, w.cache, w.num_blocks, w.script, seed, 20000);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "first failing seed " << seed;
      return;
    }
    total_steps += result.steps;
    preemptions += result.stats.num_preemptions;
    hits += result.stats.prefix_cache.hits + result.stats.prefix_cache.forked_tokens;
    for (const auto& [id, r] : result.requests) {
      rejected += !r.accepted;
      finished += r.accepted;
    }
  }
  // The generator must actually exercise the hard cases.
  EXPECT_GT(preemptions, 100);
  EXPECT_GT(rejected, 50);
  EXPECT_GT(hits, 1000);
  EXPECT_GT(finished, 1000);
  RecordProperty("steps", static_cast<int>(total_steps));
}

// The same with KV tiers under the pool (TierSim in workload.h): tiny tiers that evict, loads
// that take several steps, fail at random or always; pauses too. Every request still finishes,
// no step computes on wrong or in-flight KV, and the tiers are actually used.
TEST(SchedulerPropertyTest, RandomWorkloadsWithKvTiersAllFinish) {
  int64_t finished = 0, loads = 0, failed = 0, hits = 0, stores = 0, waits = 0, preemptions = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    RandomWorkload w = make_workload(seed, /*max_requests=*/10, /*max_output=*/24, seed % 3 == 0);
    w.cache.enable_prefix_caching = seed % 8 != 0;
    TierSim sim;
    sim.capacity_blocks = 1 + static_cast<int64_t>((seed * 7) % 40);
    sim.fail_rate = seed % 5 == 0 ? 1.0 : seed % 5 == 1 ? 0.3 : 0.0;
    sim.max_delay_steps = static_cast<int>(seed % 4);
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto result =
        run_workload(w.config, w.cache, w.num_blocks, w.script, seed, 20000, /*vocab=*/31, sim);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "first failing seed " << seed;
      return;
    }
    const auto& t = result.stats.external_prefix_cache;
    loads += t.loads;
    failed += t.failed_loads;
    hits += t.hits;
    stores += t.stores;
    waits += result.steps_waiting_for_loads;
    preemptions += result.stats.num_preemptions;
    for (const auto& [id, r] : result.requests) finished += r.accepted;
  }
  EXPECT_GT(finished, 1000);
  EXPECT_GT(stores, 1000);
  EXPECT_GT(loads, 200);
  EXPECT_GT(failed, 50);
  EXPECT_GT(hits, 500);
  EXPECT_GT(waits, 20);
  EXPECT_GT(preemptions, 50);
}

// Speculative decoding (n-gram drafts verified by a periodic stub model, so many are right; every
// third seed draft-model places, filled by a stub draft that is right three times in four): every
// request that runs to its own end gives exactly the tokens of plain decoding, with tiny pools,
// preemption, prefix caching on and off, pauses, and max_tokens / stop rules cutting drafts.
TEST(SchedulerPropertyTest, SpeculativeDecodingGivesThePlainTokens) {
  int64_t compared = 0, drafted = 0, accepted = 0, preemptions = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    RandomWorkload w = make_workload(seed, /*max_requests=*/8, /*max_output=*/40, seed % 4 == 0);
    const int64_t period = 3 + static_cast<int64_t>(seed % 5);
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto plain =
        run_workload(w.config, w.cache, w.num_blocks, w.script, seed, 20000, 31, {}, period);
    SchedulerConfig spec = w.config;
    spec.speculative = {.method = "ngram",
                        .num_speculative_tokens = 1 + static_cast<int64_t>(seed % 5),
                        .prompt_lookup_min = 1,
                        .prompt_lookup_max = 1 + static_cast<int64_t>(seed % 3)};
    if (seed % 3 == 0) {
      spec.speculative.method = "draft_model";
      spec.speculative.draft_model = "stub";
    }
    if (seed % 11 == 0) spec.speculative.disable_by_batch_size = 3;
    spec.max_draft_tokens_per_step = 1 + static_cast<int64_t>(seed % 9);
    auto script = w.script;
    for (auto& r : script) r.spec.speculate = seed % 7 != 0;
    auto fast = run_workload(spec, w.cache, w.num_blocks, script, seed, 20000, 31, {}, period);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "first failing seed " << seed;
      return;
    }
    for (const auto& r : w.script) {
      if (r.abort_at_step >= 0 || r.expect_rejected) continue;  // timing-dependent endings
      const auto& a = plain.requests.at(r.spec.request_id);
      const auto& b = fast.requests.at(r.spec.request_id);
      EXPECT_EQ(a.tokens, b.tokens) << r.spec.request_id;
      EXPECT_EQ(a.reason, b.reason) << r.spec.request_id;
      ++compared;
    }
    drafted += fast.stats.spec_num_draft_tokens;
    accepted += fast.stats.spec_num_accepted_tokens;
    preemptions += fast.stats.num_preemptions;
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "first failing seed " << seed;
      return;
    }
  }
  EXPECT_GT(compared, 1000);
  EXPECT_GT(drafted, 2000);
  EXPECT_GT(accepted, drafted / 4);
  EXPECT_LT(accepted, drafted);
  EXPECT_GT(preemptions, 20);
}

// The same with clients that stop reading for a while (paused requests, P1-P2): every request
// still finishes, and paused ones give way to the others.
TEST(SchedulerPropertyTest, RandomWorkloadsWithPausedRequestsAllFinish) {
  int64_t preemptions = 0, finished = 0, paused_steps = 0, paused_preemptions = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    RandomWorkload w = make_workload(seed, /*max_requests=*/10, /*max_output=*/24, true);
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto result = run_workload(w.config, w.cache, w.num_blocks, w.script, seed, 20000);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "first failing seed " << seed;
      return;
    }
    preemptions += result.stats.num_preemptions;
    paused_steps += result.steps_with_paused;
    paused_preemptions += result.paused_preemptions;
    for (const auto& [id, r] : result.requests) finished += r.accepted;
  }
  EXPECT_GT(preemptions, 100);
  EXPECT_GT(finished, 1000);
  EXPECT_GT(paused_steps, 1000);
  EXPECT_GT(paused_preemptions, 50);
  std::printf("paused workloads: %lld steps with a paused request, %lld paused preemptions\n",
              static_cast<long long>(paused_steps), static_cast<long long>(paused_preemptions));
}

// The users' report at small scale: a small token budget, prompts close to max_model_len and to
// the pool size, short requests around them, with and without prefix caching. Every request must
// finish, and the long prompts must not be starved.
void run_blog_scenario(bool prefix_caching, int64_t max_model_len, uint64_t seed) {
  const int64_t bs = 16;
  const int64_t usable = 160;  // 2560 tokens
  SchedulerConfig config{
      .max_num_seqs = 16, .max_num_batched_tokens = 256, .max_model_len = max_model_len};
  kv::CacheConfig cache{.block_size = bs, .enable_prefix_caching = prefix_caching};
  std::vector<ScriptedRequest> script;
  Rng rng(seed);
  auto add = [&](const std::string& id, int64_t step, int64_t len, int64_t max_tokens) {
    ScriptedRequest r;
    r.arrival_step = step;
    r.spec.request_id = id;
    for (int64_t i = 0; i < len; ++i)
      r.spec.prompt_token_ids.push_back(static_cast<int32_t>(rng.below(1000)));
    r.spec.stop.max_tokens = max_tokens;
    script.push_back(r);
  };
  // Short requests with long outputs keep the pool busy and growing.
  for (int i = 0; i < 12; ++i) add("short" + std::to_string(i), i * 3, 40 + i, 400);
  const int64_t limit = std::min(max_model_len, usable * bs);
  add("long-near-max-len", 5, limit - 60, 50);
  add("long-at-max", 7, limit - 1, 0);  // one token of room: finishes by length
  for (int i = 0; i < 12; ++i) add("late" + std::to_string(i), 20 + i * 5, 30, 300);
  // A prompt that cannot fit at all is refused at once, not retried.
  ScriptedRequest big;
  big.arrival_step = 9;
  big.spec.request_id = "impossible";
  big.spec.prompt_token_ids.assign(static_cast<size_t>(usable * bs), 5);
  big.expect_rejected = true;
  big.expected_code =
      usable * bs >= max_model_len ? StatusCode::kOutOfRange : StatusCode::kResourceExhausted;
  script.push_back(big);

  auto result = run_workload(config, cache, usable + 1, script, seed, 100000, 1000);
  const auto& l1 = result.requests.at("long-near-max-len");
  const auto& l2 = result.requests.at("long-at-max");
  EXPECT_EQ(l1.reason, FinishReason::kLength);
  EXPECT_EQ(l1.num_output_tokens, 50);
  EXPECT_EQ(l2.reason, FinishReason::kLength);
  EXPECT_EQ(l2.num_output_tokens, 1);
  for (const auto& [id, r] : result.requests) {
    if (id.rfind("short", 0) == 0 || id.rfind("late", 0) == 0) {
      EXPECT_EQ(r.reason, FinishReason::kLength) << id;
    }
  }
  EXPECT_GT(result.stats.num_preemptions, 0) << "the scenario should exercise preemption";
  // A preempted request may be preempted again only while an older one grows; the long prompts
  // each resume a bounded number of times.
  EXPECT_LE(l1.num_preemptions, 12);
  EXPECT_LE(l2.num_preemptions, 12);
}

TEST(SchedulerBlogScenarioTest, LongPromptsFinishWithPrefixCaching) {
  run_blog_scenario(true, 2048, 1);
}
TEST(SchedulerBlogScenarioTest, LongPromptsFinishWithoutPrefixCaching) {
  run_blog_scenario(false, 2048, 2);
}
TEST(SchedulerBlogScenarioTest, PromptsNearThePoolSizeFinish) {
  // max_model_len larger than the pool: the pool is the limit.
  run_blog_scenario(true, 8192, 3);
  run_blog_scenario(false, 8192, 4);
}

// Short requests arrive every few steps, for a thousand steps, and keep the pool full. A long
// prompt that arrived early must still be admitted soon: younger requests may not jump it for
// memory. (With "admit whatever fits" it would wait until the stream stops.)
TEST(SchedulerBlogScenarioTest, AStreamOfShortRequestsDoesNotStarveALongPrompt) {
  for (bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "prefix caching on" : "prefix caching off");
    SchedulerConfig config{
        .max_num_seqs = 16, .max_num_batched_tokens = 256, .max_model_len = 2048};
    kv::CacheConfig cache{.block_size = 16, .enable_prefix_caching = caching};
    std::vector<ScriptedRequest> script;
    Rng rng(7);
    for (int i = 0; i < 250; ++i) {  // about as fast as they are served: the pool stays full
      ScriptedRequest r;
      r.arrival_step = 4 * i;
      r.spec.request_id = "short" + std::to_string(i);
      for (int k = 0; k < 32; ++k)
        r.spec.prompt_token_ids.push_back(static_cast<int32_t>(rng.below(1000)));
      r.spec.stop.max_tokens = 64;
      script.push_back(r);
    }
    ScriptedRequest long_prompt;
    long_prompt.arrival_step = 10;
    long_prompt.spec.request_id = "long";
    for (int k = 0; k < 1400; ++k)
      long_prompt.spec.prompt_token_ids.push_back(static_cast<int32_t>(rng.below(1000)));
    long_prompt.spec.stop.max_tokens = 20;
    script.push_back(long_prompt);
    auto result = run_workload(config, cache, 101, script, 7, 20000, 1000);
    const auto& l = result.requests.at("long");
    EXPECT_EQ(l.reason, FinishReason::kLength);
    EXPECT_LT(l.finish_step, 300) << "the long prompt waited behind younger requests";
  }
}

}  // namespace
}  // namespace strata::sched

namespace strata::sched {
namespace {

// A model with per-sequence state (DeepSeek-V4: the window and the compressors' pending rows in
// state slots): random workloads with a simulated worker state per slot (workload.h), prefix
// caching with few or many snapshot slots, tiny pools (preemption), pauses, aborts and KV tiers
// whose loads fail. Every entry finds its slot holding exactly its computed prefix; hits resume
// from snapshots, and the snapshots are actually used.
TEST(SchedulerPropertyTest, StatefulModelsResumeOnlyFromTheRightState) {
  int64_t finished = 0, restores = 0, resumed = 0, preemptions = 0, cut = 0, tier_loads = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    RandomWorkload w = make_workload(seed, /*max_requests=*/10, /*max_output=*/24, seed % 3 == 0);
    w.cache.enable_prefix_caching = seed % 10 != 0;
    const int64_t snapshots = static_cast<int64_t>(seed % 4 == 0 ? 1 : seed % 4 == 1 ? 3 : 16);
    TierSim sim;
    if (seed % 3 == 1 && w.cache.enable_prefix_caching) {
      sim.capacity_blocks = 1 + static_cast<int64_t>((seed * 7) % 40);
      sim.fail_rate = seed % 5 == 0 ? 1.0 : seed % 5 == 1 ? 0.3 : 0.0;
      sim.max_delay_steps = static_cast<int>(seed % 4);
    }
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto result =
        run_workload(w.config, w.cache, w.num_blocks, w.script, seed, 20000, 31, sim, 0, snapshots);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "first failing seed " << seed;
      return;
    }
    for (const auto& [id, r] : result.requests) finished += r.accepted;
    restores += result.state_restores;
    resumed += result.resumed_tokens;
    preemptions += result.stats.num_preemptions;
    cut += result.stats.state.hits_cut;
    tier_loads += result.stats.external_prefix_cache.loads;
    EXPECT_EQ(result.stats.state.running_in_use, 0) << "state slots leaked";
  }
  EXPECT_GT(finished, 1000);
  EXPECT_GT(restores, 100);
  EXPECT_GT(resumed, 1000);
  EXPECT_GT(preemptions, 50);
  EXPECT_GT(cut, 50);
  EXPECT_GT(tier_loads, 20);
  RecordProperty("state_restores", static_cast<int>(restores));
}

}  // namespace
}  // namespace strata::sched
