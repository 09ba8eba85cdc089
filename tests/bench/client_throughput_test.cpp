// The benchmark client must not be the bottleneck: it has to absorb at least 20,000 streamed
// chunks per second on one core. The fake server streams as fast as it can on another thread;
// the client's own CPU time (its thread's rusage) gives the per-core rate. Prints the figures.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>

#include "bench/metrics.h"
#include "core/clock.h"
#include "fake_server_fixture.h"

namespace strata::bench {
namespace {

using testing::endpoint;
using testing::FakeServerHarness;
using testing::payloads;

double thread_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

TEST(ClientThroughput, AtLeast20kStreamedChunksPerCoreSecond) {
  for (Backend b : {Backend::kCompletions, Backend::kChat}) {
    FakeServerOptions fo;
    fo.ttft_s = 0;
    fo.itl_s = 0;
    FakeServerHarness h(fo);
    RunnerOptions o;
    o.api_url = endpoint(h.port(), b);
    o.backend = b;
    const int kRequests = 64;
    const int64_t kTokens = 1500;
    auto p = payloads(b, kRequests, "throughput", kTokens);
    double cpu0 = thread_cpu_seconds(), t0 = now_seconds();
    auto r = run_requests(o, p, std::vector<int64_t>(kRequests, 3), nullptr);
    double cpu = thread_cpu_seconds() - cpu0, wall = now_seconds() - t0;
    ASSERT_TRUE(r.ok());
    int64_t chunks = 0;
    for (const auto& out : r->outputs) {
      ASSERT_TRUE(out.success) << out.error;
      chunks += static_cast<int64_t>(out.itl.size()) + 1;
    }
    ASSERT_EQ(chunks, kRequests * kTokens);
    double per_cpu = static_cast<double>(chunks) / cpu;
    std::printf(
        "[client throughput] %s: %lld chunks in %.3f s wall (%.0f chunks/s), client CPU "
        "%.3f s -> %.0f chunks per CPU-second\n",
        b == Backend::kChat ? "openai-chat" : "openai", static_cast<long long>(chunks), wall,
        static_cast<double>(chunks) / wall, cpu, per_cpu);
#ifdef STRATA_SANITIZE
    (void)per_cpu;  // sanitizers slow everything several-fold: the bar is for optimized builds
#else
    EXPECT_GE(per_cpu, 20000.0);
#endif
  }
}

TEST(ClientThroughput, Runs1000ConcurrentStreams) {
  FakeServerOptions fo;
  fo.ttft_s = 0.2;
  fo.itl_s = 0.02;
  FakeServerHarness h(fo);
  RunnerOptions o;
  o.api_url = endpoint(h.port(), Backend::kCompletions);
  const int kRequests = 1000;
  auto p = payloads(Backend::kCompletions, kRequests, "x", 30);
  auto r = run_requests(o, p, std::vector<int64_t>(kRequests, 2), nullptr);
  ASSERT_TRUE(r.ok());
  auto m = compute_metrics(r->outputs, r->duration_s, {99}, {});
  std::printf(
      "[runner load] %d concurrent streams x 30 tokens: %.2f s, peak concurrency %lld, "
      "mean TTFT %.1f ms (scripted 200), mean ITL %.2f ms (scripted 20)\n",
      kRequests, r->duration_s, static_cast<long long>(m.max_concurrent_requests), m.ttft.mean_ms,
      m.itl.mean_ms);
  EXPECT_EQ(m.completed, kRequests);
  EXPECT_EQ(m.total_output, kRequests * 30);
  EXPECT_EQ(m.max_concurrent_requests, kRequests);
}

}  // namespace
}  // namespace strata::bench
