#include "bench/metrics.h"

#include <gtest/gtest.h>

namespace strata::bench {
namespace {

RequestOutput ok(double start, double ttft, std::vector<double> itl, double latency,
                 int64_t out_tokens, int64_t prompt) {
  RequestOutput o;
  o.success = true;
  o.start_time = start;
  o.ttft = ttft;
  o.itl = std::move(itl);
  o.latency = latency;
  o.output_tokens = out_tokens;
  o.prompt_len = prompt;
  return o;
}

std::vector<RequestOutput> example() {
  RequestOutput failed;
  failed.error = "HTTP 500";
  return {ok(0.0, 0.1, {0.05, 0.05, 0.1}, 0.3, 4, 10), ok(0.5, 0.25, {0.25}, 0.5, 2, 20), failed,
          ok(0.9, 0.4, {}, 0.4, 1, 5)};
}

TEST(Percentile, LinearInterpolationLikeNumpy) {
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 25), 1.75);
  EXPECT_NEAR(percentile({10, 20}, 99), 19.9, 1e-12);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 99), 0);
}

TEST(Metrics, HandComputedExample) {
  auto m = compute_metrics(example(), 2.0, {50, 90, 99}, {});
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 35);
  EXPECT_EQ(m.total_output, 7);
  EXPECT_EQ(m.output_lens, (std::vector<int64_t>{4, 2, 0, 1}));
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 3.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 21.0);
  // TTFT [0.1, 0.25, 0.4]
  EXPECT_NEAR(m.ttft.mean_ms, 250, 1e-9);
  EXPECT_NEAR(m.ttft.median_ms, 250, 1e-9);
  EXPECT_NEAR(m.ttft.std_ms, 122.47448713915890, 1e-9);
  ASSERT_EQ(m.ttft.percentiles_ms.size(), 3u);
  EXPECT_EQ(m.ttft.percentiles_ms[2].first, 99);
  EXPECT_NEAR(m.ttft.percentiles_ms[2].second, 397, 1e-9);
  // TPOT: (0.3 - 0.1) / 3 and (0.5 - 0.25) / 1; the 1-token request has none.
  EXPECT_NEAR(m.tpot.mean_ms, (200.0 / 3 + 250) / 2, 1e-9);
  EXPECT_NEAR(m.tpot.percentiles_ms[2].second, 200.0 / 3 + 0.99 * (250 - 200.0 / 3), 1e-9);
  // ITL pooled [0.05, 0.05, 0.1, 0.25]
  EXPECT_NEAR(m.itl.mean_ms, 112.5, 1e-9);
  EXPECT_NEAR(m.itl.median_ms, 75, 1e-9);
  EXPECT_NEAR(m.itl.percentiles_ms[1].second, 205, 1e-9);
  // E2EL [0.3, 0.5, 0.4]
  EXPECT_NEAR(m.e2el.mean_ms, 400, 1e-9);
  EXPECT_NEAR(m.e2el.median_ms, 400, 1e-9);
  // Token chunks at 0.1 0.15 0.2 0.3 | 0.75 1.0 | 1.3 -> buckets [5, 2, 0].
  auto buckets = output_tokens_per_second(example());
  EXPECT_EQ(buckets, (std::vector<double>{5, 2, 0}));
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 5);
  // [0,0.3) [0.5,1.0) [0.9,1.3): two overlap.
  EXPECT_EQ(m.max_concurrent_requests, 2);
}

TEST(Metrics, Goodput) {
  auto a = compute_metrics(example(), 2.0, {99}, {{"ttft", 250}});
  EXPECT_DOUBLE_EQ(a.request_goodput, 1.0);  // 0.1 and 0.25 (inclusive) meet 250 ms
  auto b = compute_metrics(example(), 2.0, {99}, {{"ttft", 250}, {"tpot", 100}});
  EXPECT_DOUBLE_EQ(b.request_goodput, 0.5);  // only the first request meets both
  auto c = compute_metrics(example(), 2.0, {99}, {{"e2el", 350}});
  EXPECT_DOUBLE_EQ(c.request_goodput, 0.5);
  auto d = compute_metrics(example(), 2.0, {99}, {{"tpot", 0}});
  EXPECT_DOUBLE_EQ(d.request_goodput, 0.5);  // the 1-token request has TPOT 0
}

TEST(Metrics, PeakConcurrencyUsesHalfOpenIntervals) {
  std::vector<RequestOutput> v = {ok(0, 0.5, {}, 1.0, 1, 1), ok(1.0, 0.5, {}, 1.0, 1, 1),
                                  ok(1.5, 0.1, {}, 0.2, 1, 1)};
  EXPECT_EQ(peak_concurrency(v), 2);
  v.pop_back();
  EXPECT_EQ(peak_concurrency(v), 1);
}

TEST(Metrics, AllFailedGivesZeros) {
  RequestOutput f;
  auto m = compute_metrics({f, f}, 1.0, {99}, {{"ttft", 1}});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.ttft.mean_ms, 0);
  EXPECT_EQ(m.ttft.percentiles_ms[0].second, 0);
  EXPECT_EQ(m.max_output_tokens_per_s, 0);
  EXPECT_EQ(m.max_concurrent_requests, 0);
}

}  // namespace
}  // namespace strata::bench
