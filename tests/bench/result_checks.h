// Checks that a saved benchmark result (--save-result --save-detailed) is consistent with itself:
// the summary figures are what the per-request times and counts give, whatever the machine's
// speed (no figure is compared with a wall-clock expectation).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace strata::bench::testing {

inline double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// `j`: a result with every request successful. `min_ttft_s`: a delay the server is known to add
// before the first token (0 when unknown).
inline void expect_consistent_result(const Json& j, double min_ttft_s = 0) {
  const int64_t completed = j["completed"];
  ASSERT_EQ(j["failed"], 0);
  ASSERT_EQ(j["ttfts"].size(), static_cast<size_t>(completed));
  ASSERT_EQ(j["latencies"].size(), static_cast<size_t>(completed));
  ASSERT_EQ(j["itls"].size(), static_cast<size_t>(completed));
  ASSERT_EQ(j["output_lens"].size(), static_cast<size_t>(completed));
  const double duration = j["duration"];
  ASSERT_GT(duration, 0.0);
  std::vector<double> ttfts, e2els, tpots, itls;
  int64_t output_sum = 0, input_sum = 0;
  for (int64_t i = 0; i < completed; ++i) {
    const double ttft = j["ttfts"][i], latency = j["latencies"][i];
    const std::vector<double> gaps = j["itls"][i];
    const int64_t out_len = j["output_lens"][i];
    output_sum += out_len;
    input_sum += j["input_lens"][i].get<int64_t>();
    EXPECT_GE(ttft, min_ttft_s) << "request " << i;
    // The last token's time is the first token's plus every gap after it.
    EXPECT_NEAR(latency, ttft + std::accumulate(gaps.begin(), gaps.end(), 0.0), 1e-9)
        << "request " << i;
    for (double g : gaps) EXPECT_GE(g, 0.0) << "request " << i;
    // A request runs within the benchmark's duration.
    EXPECT_LE(j["start_times"][i].get<double>() + latency, duration + 1e-9) << "request " << i;
    ttfts.push_back(ttft);
    e2els.push_back(latency);
    if (out_len > 1) tpots.push_back((latency - ttft) / static_cast<double>(out_len - 1));
    itls.insert(itls.end(), gaps.begin(), gaps.end());
  }
  EXPECT_EQ(j["total_output_tokens"], output_sum);
  EXPECT_EQ(j["total_input_tokens"], input_sum);
  // Summaries are the per-request values' means (ms), rates are counts over the duration.
  const double eps = 1e-6;
  const std::pair<const char*, const std::vector<double>*> summaries[] = {{"mean_ttft_ms", &ttfts},
                                                                          {"mean_e2el_ms", &e2els},
                                                                          {"mean_tpot_ms", &tpots},
                                                                          {"mean_itl_ms", &itls}};
  for (const auto& [key, values] : summaries) {
    if (std::string(key) != "mean_e2el_ms") EXPECT_TRUE(j.contains(key)) << key;
    if (j.contains(key)) EXPECT_NEAR(j[key].get<double>(), mean_of(*values) * 1e3, eps) << key;
  }
  EXPECT_LE(j["median_ttft_ms"].get<double>(), *std::max_element(ttfts.begin(), ttfts.end()) * 1e3);
  EXPECT_GE(j["median_ttft_ms"].get<double>(), *std::min_element(ttfts.begin(), ttfts.end()) * 1e3);
  EXPECT_NEAR(j["request_throughput"].get<double>(), completed / duration, 1e-6);
  EXPECT_NEAR(j["output_throughput"].get<double>(), output_sum / duration, 1e-6);
  EXPECT_NEAR(j["total_token_throughput"].get<double>(), (output_sum + input_sum) / duration, 1e-6);
}

}  // namespace strata::bench::testing
