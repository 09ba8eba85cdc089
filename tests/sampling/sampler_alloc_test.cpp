// After warm-up, Sampler::sample and StopStringMatcher::feed allocate nothing: every buffer is
// reusable scratch. Counted by replacing the global operator new in this executable only.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "sampling/sampler.h"
#include "sampling/stop_checker.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

// ThreadSanitizer's runtime defines operator new itself (statically linked): no counting there.
#if !defined(STRATA_TSAN)
// The replacements pair malloc with free; GCC cannot see that through inlined allocators.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
#endif  // !STRATA_TSAN

namespace strata::sampling {
namespace {

TEST(SamplerAllocTest, SteadyStateSamplingAllocatesNothing) {
#if defined(STRATA_SANITIZE) || defined(STRATA_TSAN)
  GTEST_SKIP() << "the sanitizer runtimes allocate through the counted operator new";
#endif
  const int64_t vocab = 50000;
  Rng rng(3);
  std::vector<SamplingParams> params(6);
  params[0].temperature = 0.0f;
  params[1].top_k = 50;
  params[2].top_p = 0.9f;
  params[2].temperature = 1.5f;  // a flat row: the bucket select runs
  params[3].min_p = 0.05f;
  params[3].repetition_penalty = 1.2f;
  params[3].logit_bias = {{7, 2.0f}};
  params[4].top_k = 2000;
  params[4].logprobs = 5;
  params[5].top_p = 0.999f;
  params[5].seed = 9;
  params[5].min_tokens = 10;
  params[5].stop_token_ids = {3};
  std::vector<std::vector<int32_t>> prompts(params.size()), outputs(params.size());
  for (auto& p : prompts) {
    for (int k = 0; k < 100; ++k) p.push_back(static_cast<int32_t>(rng.below(vocab)));
  }
  std::vector<float> logits(params.size() * vocab);
  for (auto& v : logits) v = static_cast<float>(rng.normal() * 1.5);
  Rng generator = *make_generator(params[5]);

  ThreadPool pool(2);
  Sampler sampler({.vocab_size = vocab, .eos_token_ids = {2}, .pool = &pool});
  std::vector<SampleOutput> out(params.size());
  std::vector<SamplingRow> rows(params.size());
  for (auto& o : outputs) o.reserve(64);
  auto step = [&] {
    for (size_t i = 0; i < params.size(); ++i) {
      rows[i] = {&params[i], prompts[i], outputs[i], i == 5 ? &generator : nullptr};
    }
    sampler.sample(logits.data(), rows, out);
    for (size_t i = 0; i < params.size(); ++i) outputs[i].push_back(out[i].token_id);
  };
  for (int warm = 0; warm < 3; ++warm) step();
  const int64_t before = g_allocations.load();
  for (int i = 0; i < 20; ++i) step();
  EXPECT_EQ(g_allocations.load() - before, 0);

  StopStringMatcher matcher({"STOP", "\n\n"}, false);
  (void)matcher.feed("text ST");
  const int64_t before_feed = g_allocations.load();
  for (int i = 0; i < 100; ++i) (void)matcher.feed("some streamed text ");
  EXPECT_EQ(g_allocations.load() - before_feed, 0);
}

}  // namespace
}  // namespace strata::sampling
