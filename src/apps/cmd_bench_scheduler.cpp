// `strata bench scheduler`: the cost of Scheduler::schedule() + update() per step with a stub
// forward pass (no model): the token "sampled" for a request is a fixed function of its position.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "apps/command.h"
#include "core/rng.h"
#include "kv/cache_config.h"
#include "sched/scheduler.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& o) {
  o.add_int("num-requests", 256, "requests kept in flight", "Benchmark");
  o.add_int("input-len", 128, "prompt tokens per request", "Benchmark");
  o.add_int("output-len", 64, "mean generated tokens per request (churn scenario)", "Benchmark");
  o.add_int("prefix-len", 64, "prompt tokens shared by all requests (churn scenario)", "Benchmark");
  o.add_int("num-steps", 2000, "measured steps per scenario", "Benchmark");
  o.add_int("num-kv-blocks", 0, "KV pool size in blocks (0: enough for every request)",
            "Benchmark");
  o.add_int("seed", 0, "workload seed", "Benchmark");
  sched::add_scheduler_options(o);
  kv::add_cache_options(o);
}

struct Timing {
  std::vector<double> us;
  int64_t tokens = 0;
  int64_t running = 0;
};

void print_timing(const char* name, Timing& t) {
  if (t.us.empty()) {
    std::printf("  %-14s no steps measured\n", name);
    return;
  }
  std::sort(t.us.begin(), t.us.end());
  double sum = 0;
  for (double v : t.us) sum += v;
  const size_t n = t.us.size();
  std::printf(
      "  %-14s schedule+update %.2f us/step (p50 %.2f, p99 %.2f) over %zu steps, "
      "%.1f running, %.1f tokens/step\n",
      name, sum / n, t.us[n / 2], t.us[std::min(n - 1, n * 99 / 100)], n,
      static_cast<double>(t.running) / n, static_cast<double>(t.tokens) / n);
}

// Runs one step with the stub forward; returns its schedule()+update() time in microseconds.
double timed_step(sched::Scheduler& s, int64_t* tokens, std::vector<int32_t>& sampled,
                  int64_t* finished) {
  auto t0 = std::chrono::steady_clock::now();
  sched::StepPlan plan = s.schedule();
  auto t1 = std::chrono::steady_clock::now();
  sampled.clear();
  for (const auto& e : plan.scheduled) {
    sampled.push_back(e.will_sample
                          ? static_cast<int32_t>((e.num_computed_tokens * 31 + 7) % 32000 + 1)
                          : sched::kNoToken);
  }
  auto t2 = std::chrono::steady_clock::now();
  auto outputs = s.update(plan, sampled);
  auto t3 = std::chrono::steady_clock::now();
  for (const auto& o : outputs) *finished += o.finished();
  *tokens += plan.total_num_scheduled_tokens;
  return std::chrono::duration<double, std::micro>((t1 - t0) + (t3 - t2)).count();
}

int run(const Args& args) {
  auto cache = kv::cache_config_from_args(args);
  auto config = sched::scheduler_config_from_args(args);
  if (!cache.ok() || !config.ok()) {
    std::cerr << "strata bench scheduler: "
              << (cache.ok() ? config.status() : cache.status()).message() << "\n";
    return 2;
  }
  const int64_t n = args.get_int("num-requests"), input = args.get_int("input-len");
  const int64_t output = args.get_int("output-len"), steps = args.get_int("num-steps");
  const int64_t prefix = std::min(args.get_int("prefix-len"), input);
  if (n < 1 || input < 1 || output < 1 || steps < 1 || prefix < 0) {
    std::cerr << "strata bench scheduler: --num-requests, --input-len, --output-len and "
                 "--num-steps must be positive\n";
    return 2;
  }
  // Long enough that no steady request finishes while measured (the warm-up prefills the prompts
  // in about n * input / budget steps).
  if (config->max_model_len == 0) {
    config->max_model_len =
        input + steps + n * input / config->max_num_batched_tokens + 2 * output + 64;
  }
  if (Status st = config->validate(); !st.ok()) {
    std::cerr << "strata bench scheduler: " << st.message() << "\n";
    return 2;
  }
  const int64_t bs = cache->block_size;
  int64_t num_blocks = args.get_int("num-kv-blocks");
  if (num_blocks == 0) num_blocks = n * ((config->max_model_len + bs - 1) / bs) + 1;

  std::printf(
      "scheduler benchmark (stub forward): %lld requests, prompt %lld, block size %lld, "
      "prefix caching %s, %s, budget %lld tokens, %lld KV blocks\n",
      static_cast<long long>(n), static_cast<long long>(input), static_cast<long long>(bs),
      cache->enable_prefix_caching ? "on" : "off", sched::scheduling_policy_name(config->policy),
      static_cast<long long>(config->max_num_batched_tokens), static_cast<long long>(num_blocks));
  Rng rng(static_cast<uint64_t>(args.get_int("seed")));
  auto random_prompt = [&](int64_t shared) {
    std::vector<int32_t> t(static_cast<size_t>(input));
    for (int64_t i = 0; i < input; ++i) {
      t[i] = i < shared ? static_cast<int32_t>(i + 1) : static_cast<int32_t>(rng.below(32000) + 1);
    }
    return t;
  };
  std::vector<int32_t> sampled;
  int64_t id = 0;

  // 1. Steady decode: every request running, none finishing.
  {
    auto s = sched::Scheduler::create(*config, *cache, num_blocks);
    if (!s.ok()) {
      std::cerr << "strata bench scheduler: " << s.status().message() << "\n";
      return 2;
    }
    for (int64_t i = 0; i < n; ++i) {
      sched::RequestSpec spec{.request_id = "steady-" + std::to_string(id++),
                              .prompt_token_ids = random_prompt(0)};
      if (Status st = (*s)->add_request(std::move(spec)); !st.ok()) {
        std::cerr << "strata bench scheduler: " << st.message() << "\n";
        return 2;
      }
    }
    int64_t tokens = 0, finished = 0;
    // Warm up until every prompt is prefilled (or a bound), then measure.
    for (int64_t i = 0; i < 100000; ++i) {
      bool all_decoding = (*s)->num_waiting() == 0;
      for (const auto* r : (*s)->running_requests())
        all_decoding = all_decoding && r->num_output_tokens() > 0;
      if (all_decoding) break;
      timed_step(**s, &tokens, sampled, &finished);
    }
    Timing t;
    for (int64_t i = 0; i < steps && (*s)->has_unfinished_requests(); ++i) {
      t.running += (*s)->num_running();
      t.us.push_back(timed_step(**s, &t.tokens, sampled, &finished));
    }
    print_timing("steady decode", t);
  }

  // 2. Churn: random output lengths, a shared prompt prefix, finished requests replaced at once.
  {
    auto s = sched::Scheduler::create(*config, *cache, num_blocks);
    if (!s.ok()) return 2;
    auto add = [&]() {
      sched::RequestSpec spec{.request_id = "churn-" + std::to_string(id++),
                              .prompt_token_ids = random_prompt(prefix)};
      spec.stop.max_tokens = 1 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(2 * output)));
      return (*s)->add_request(std::move(spec));
    };
    for (int64_t i = 0; i < n; ++i) (void)add();
    int64_t tokens = 0, finished = 0;
    for (int64_t i = 0; i < 200; ++i) {  // warm-up
      int64_t before = finished;
      timed_step(**s, &tokens, sampled, &finished);
      for (int64_t k = before; k < finished; ++k) (void)add();
    }
    Timing t;
    for (int64_t i = 0; i < steps; ++i) {
      int64_t before = finished;
      t.running += (*s)->num_running();
      t.us.push_back(timed_step(**s, &t.tokens, sampled, &finished));
      for (int64_t k = before; k < finished; ++k) (void)add();
    }
    print_timing("churn", t);
    auto st = (*s)->stats();
    std::printf(
        "  churn counters: %lld finished, prefix cache hits %lld of %lld queried tokens, "
        "%lld preemptions\n",
        static_cast<long long>(st.num_finished), static_cast<long long>(st.prefix_cache.hits),
        static_cast<long long>(st.prefix_cache.queries),
        static_cast<long long>(st.num_preemptions));
  }
  return 0;
}

STRATA_REGISTER_COMMAND(kBenchScheduler, "bench scheduler", "[options]",
                        "time Scheduler::schedule() + update() per step with a stub forward",
                        add_options, run);

}  // namespace
}  // namespace strata::apps
