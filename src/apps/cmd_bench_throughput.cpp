// strata bench throughput MODEL: offline throughput of N random prompts through the engine, with
// a single-stream decode run in the same process as the baseline.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <vector>

#include "apps/command.h"
#include "core/clock.h"
#include "core/rng.h"
#include "engine/engine.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& o) {
  const std::string g = "Benchmark";
  o.add_int("num-prompts", 64, "prompts to run", g);
  o.add_int("input-len", 128, "random prompt tokens per request (after the shared prefix)", g);
  o.add_int("output-len", 128, "generated tokens per request (EOS ignored)", g);
  o.add_int("prefix-len", 0, "tokens of a random prefix shared by every prompt", g);
  o.add_bool("skip-single-stream", false, "skip the single-request baseline", g);
  engine::add_engine_options(o);
}

struct Run {
  double elapsed = 0;
  std::vector<engine::RequestTimes> times;
  int64_t prompt_tokens = 0, output_tokens = 0;
  int failed = 0;
};

Run run_batch(engine::EngineClient& client, const std::vector<std::vector<int32_t>>& prompts,
              int64_t output_len, const std::string& tag) {
  Run run;
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  const double t0 = now_seconds();
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::EngineRequest r;
    r.request_id = tag + std::to_string(i);
    r.prompt_token_ids = prompts[i];
    r.params.temperature = 0;
    r.params.max_tokens = static_cast<int>(output_len);
    r.params.ignore_eos = true;
    r.detokenize = false;
    auto s = client.submit(std::move(r));
    if (!s.ok()) {
      std::fprintf(stderr, "request %zu rejected: %s\n", i, s.status().message().c_str());
      run.failed++;
      continue;
    }
    streams.push_back(*s);
    run.prompt_tokens += static_cast<int64_t>(prompts[i].size());
  }
  for (auto& s : streams) {
    while (auto c = s->next()) {
      run.output_tokens += static_cast<int64_t>(c->token_ids.size());
      if (c->finished) {
        if (!c->error.ok()) run.failed++;
        run.times.push_back(c->times);
      }
    }
  }
  run.elapsed = now_seconds() - t0;
  return run;
}

int run(const Args& args) {
  auto cfg = engine::engine_config_from_args(args);
  if (!cfg.ok()) {
    std::cerr << "strata bench throughput: " << cfg.status().message() << "\n";
    return 2;
  }
  const int64_t n = args.get_int("num-prompts"), in_len = args.get_int("input-len");
  const int64_t out_len = args.get_int("output-len"), prefix_len = args.get_int("prefix-len");
  if (n < 1 || in_len < 1 || out_len < 1 || prefix_len < 0) {
    std::cerr << "strata bench throughput: counts and lengths must be positive\n";
    return 2;
  }
  auto client_or = engine::EngineClient::create(*cfg);
  if (!client_or.ok()) {
    std::cerr << "strata bench throughput: " << client_or.status().message() << "\n";
    return 1;
  }
  auto& client = **client_or;
  const int64_t V = client.info().vocab_size;
  Rng rng(cfg->seed + 7);
  auto random_tokens = [&](int64_t len) {
    std::vector<int32_t> t(len);
    for (auto& x : t) x = static_cast<int32_t>(rng.below(V));
    return t;
  };
  const std::vector<int32_t> prefix = random_tokens(prefix_len);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int32_t> p = prefix;
    auto rest = random_tokens(in_len);
    p.insert(p.end(), rest.begin(), rest.end());
    prompts.push_back(std::move(p));
  }

  double single_decode_tps = 0;
  if (!args.get_bool("skip-single-stream")) {
    Run single = run_batch(client, {random_tokens(prefix_len + in_len)}, out_len, "single-");
    if (!single.times.empty()) {
      const auto& t = single.times[0];
      single_decode_tps = (out_len - 1) / std::max(1e-9, t.last_token - t.first_token);
    }
  }
  // With a shared prefix, first measure what prefix caching buys one request: TTFT of a request
  // alone with the cache cold, then of requests alone whose prefix is cached (same prefix, new
  // suffixes). The batch below then runs with the prefix cached, as a warm server would.
  if (prefix_len > 0) {
    auto with_prefix = [&] {
      std::vector<int32_t> p = prefix;
      auto rest = random_tokens(in_len);
      p.insert(p.end(), rest.begin(), rest.end());
      return p;
    };
    auto ttft_alone = [&](const std::string& tag) {
      Run r = run_batch(client, {with_prefix()}, 1, tag);
      return r.times.empty() ? 0.0 : r.times[0].first_token - r.times[0].arrival;
    };
    const double cold = ttft_alone("prefix-cold-");
    constexpr int kWarmProbes = 3;
    double warm = 0;
    for (int i = 0; i < kWarmProbes; ++i) warm += ttft_alone("prefix-warm-" + std::to_string(i));
    warm /= kWarmProbes;
    std::printf(
        "prefix TTFT, one request at a time: first (cache cold) %.1f ms; later (%lld-token "
        "prefix cached) mean %.1f ms (ratio %.3f)\n",
        cold * 1e3, static_cast<long long>(prefix_len), warm * 1e3, cold > 0 ? warm / cold : 0);
  }

  const auto stats0 = client.stats();
  Run run = run_batch(client, prompts, out_len, "req-");
  const auto stats1 = client.stats();

  const double req_s = static_cast<double>(run.times.size()) / run.elapsed;
  const double out_tps = run.output_tokens / run.elapsed;
  const double total_tps = (run.prompt_tokens + run.output_tokens) / run.elapsed;
  std::printf("kernels: %s, %d threads\n", client.info().backend.c_str(), client.info().threads);
  std::printf("Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n", req_s,
              total_tps, out_tps);
  std::printf("requests: %zu ok, %d failed; prompt tokens %lld, output tokens %lld, %.2f s\n",
              run.times.size(), run.failed, static_cast<long long>(run.prompt_tokens),
              static_cast<long long>(run.output_tokens), run.elapsed);
  if (single_decode_tps > 0)
    std::printf("single-stream decode: %.2f tokens/s; batched output / single-stream = %.2fx\n",
                single_decode_tps, out_tps / single_decode_tps);
  std::vector<double> ttft;
  for (const auto& t : run.times) ttft.push_back(t.first_token - t.arrival);
  if (!ttft.empty()) {
    std::vector<double> later(ttft.begin() + 1, ttft.end());
    std::sort(later.begin(), later.end());
    const double mean_later =
        later.empty() ? 0 : std::accumulate(later.begin(), later.end(), 0.0) / later.size();
    std::printf(
        "TTFT in the batch (all submitted at once): first request %.1f ms; later requests mean "
        "%.1f ms, median %.1f ms "
        "(ratio mean/first %.3f)\n",
        ttft[0] * 1e3, mean_later * 1e3, later.empty() ? 0 : later[later.size() / 2] * 1e3,
        ttft[0] > 0 ? mean_later / ttft[0] : 0);
  }
  const int64_t q = stats1.prefix_cache_queries - stats0.prefix_cache_queries;
  const int64_t h = stats1.prefix_cache_hits - stats0.prefix_cache_hits;
  std::printf("prefix cache: %lld of %lld prompt tokens hit (%.1f%%); preemptions %lld\n",
              static_cast<long long>(h), static_cast<long long>(q), q ? 100.0 * h / q : 0.0,
              static_cast<long long>(stats1.num_preemptions - stats0.num_preemptions));
  return run.failed ? 1 : 0;
}

STRATA_REGISTER_COMMAND(kBenchThroughput, "bench throughput", "MODEL [options]",
                        "Offline throughput of random prompts (with a single-stream baseline)",
                        add_options, run);

}  // namespace
}  // namespace strata::apps
