// `strata bench sampler`: time per sampled token of the sampling module on a synthetic row of
// logits (no model), for the common parameter mixes.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/command.h"
#include "core/clock.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "sampling/sampler.h"
#include "sampling/vector_math.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& o) {
  o.add_int("vocab-size", 152064, "logits per row (Qwen2's vocabulary by default)");
  o.add_int("batch-size", 1, "rows sampled per call");
  o.add_int("iters", 200, "calls per case");
  o.add_int("threads", 1, "sampler thread pool size (rows are split across threads)");
  o.add_int("seed", 0, "seed for the synthetic logits and the engine generator");
  o.add_string("case", "", "run only the cases whose name contains this text");
  o.add_string("kernels", "auto",
               "build of the sampler's row-wide loops: auto (the fastest this CPU runs), "
               "portable, avx2 or avx512 (all give the same tokens)");
}

int run(const Args& args) {
  const int64_t vocab = args.get_int("vocab-size");
  const int64_t batch = args.get_int("batch-size");
  const int iters = static_cast<int>(args.get_int("iters"));
  const int threads = static_cast<int>(args.get_int("threads"));
  if (vocab < 2 || batch < 1 || iters < 1 || threads < 1) {
    std::fprintf(stderr,
                 "strata bench sampler: --vocab-size must be >= 2 and --batch-size, --iters and "
                 "--threads >= 1\n");
    return 2;
  }
  const std::string kernels = args.get("kernels");
  if (kernels != "auto") {
    if (kernels != "portable" && kernels != "avx2" && kernels != "avx512") {
      std::fprintf(stderr,
                   "strata bench sampler: --kernels must be auto, portable, avx2 or avx512, not "
                   "'%s'\n",
                   kernels.c_str());
      return 2;
    }
    const sampling::VectorMathVariant v = sampling::vector_math_variant_for_kernels(kernels);
    if (!sampling::vector_math_supported(v)) {
      std::fprintf(stderr, "strata bench sampler: this CPU cannot run the %s build (--kernels)\n",
                   kernels.c_str());
      return 2;
    }
    sampling::vector_math_limit(v);
  }
  Rng rng(static_cast<uint64_t>(args.get_int("seed")));
  // Language-model-like rows: a normal tail and a handful of strong candidates.
  std::vector<float> logits(static_cast<size_t>(vocab * batch));
  for (auto& v : logits) v = static_cast<float>(rng.normal() * 2.0);
  for (int64_t r = 0; r < batch; ++r) {
    for (int i = 0; i < 20; ++i) logits[r * vocab + rng.below(vocab)] += 10.0f;
  }
  std::vector<int32_t> prompt(512), output(256);
  for (auto& t : prompt) t = static_cast<int32_t>(rng.below(vocab));
  for (auto& t : output) t = static_cast<int32_t>(rng.below(vocab));

  struct Case {
    const char* name;
    sampling::SamplingParams params;
  };
  std::vector<Case> cases(8);
  cases[0].name = "greedy";
  cases[0].params.temperature = 0.0f;
  cases[1].name = "temperature 0.8";
  cases[1].params.temperature = 0.8f;
  cases[2].name = "top_k 50";
  cases[2].params.top_k = 50;
  cases[3].name = "top_p 0.9";
  cases[3].params.top_p = 0.9f;
  cases[4].name = "top_k 40 + top_p 0.95 + min_p 0.05";
  cases[4].params.top_k = 40;
  cases[4].params.top_p = 0.95f;
  cases[4].params.min_p = 0.05f;
  cases[5].name = "min_p 0.1";
  cases[5].params.min_p = 0.1f;
  cases[6].name = "penalties (512 prompt, 256 output)";
  cases[6].params.repetition_penalty = 1.1f;
  cases[6].params.presence_penalty = 0.5f;
  cases[6].params.frequency_penalty = 0.5f;
  cases[6].params.top_p = 0.9f;
  cases[7].name = "greedy + logprobs 5";
  cases[7].params.temperature = 0.0f;
  cases[7].params.logprobs = 5;

  ThreadPool pool(threads);
  sampling::Sampler sampler({.vocab_size = vocab,
                             .eos_token_ids = {0},
                             .seed = static_cast<uint64_t>(args.get_int("seed")),
                             .pool = threads > 1 ? &pool : nullptr});
  std::printf("vocab %lld, batch %lld, threads %d, %d calls per case, vector math %s\n",
              static_cast<long long>(vocab), static_cast<long long>(batch), threads, iters,
              sampling::vector_math_variant_name(sampling::vector_math_variant()));
  std::printf("%-40s %12s %12s %12s\n", "case", "mean us/call", "min us/call", "us/token");
  std::vector<sampling::SampleOutput> out(batch);
  const std::string only = args.get("case");
  for (const auto& c : cases) {
    if (!only.empty() && std::string(c.name).find(only) == std::string::npos) continue;
    std::vector<sampling::SamplingRow> rows(batch, {&c.params, prompt, output, nullptr});
    sampler.sample(logits.data(), rows, out);  // warm-up: grows the scratch
    // The minimum is the figure least disturbed by other work on a shared machine.
    double total = 0.0, best = 1e30;
    for (int i = 0; i < iters; ++i) {
      Stopwatch sw;
      sampler.sample(logits.data(), rows, out);
      const double t = sw.elapsed();
      total += t;
      best = std::min(best, t);
    }
    const double mean_us = total * 1e6 / iters, min_us = best * 1e6;
    std::printf("%-40s %12.1f %12.1f %12.2f\n", c.name, mean_us, min_us, min_us / batch);
  }
  return 0;
}

STRATA_REGISTER_COMMAND(kBenchSampler, "bench sampler", "[options]",
                        "time per sampled token on synthetic logits (no model)", add_options, run);

}  // namespace
}  // namespace strata::apps
