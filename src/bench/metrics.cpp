#include "bench/metrics.h"

#include <algorithm>
#include <cmath>

namespace strata::bench {

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  p = std::clamp(p, 0.0, 100.0);
  double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, values.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

MetricSummary summarize_ms(const std::vector<double>& seconds,
                           const std::vector<double>& percentiles) {
  MetricSummary s;
  if (!seconds.empty()) {
    double sum = 0;
    for (double v : seconds) sum += v;
    double mean = sum / static_cast<double>(seconds.size());
    double sq = 0;
    for (double v : seconds) sq += (v - mean) * (v - mean);
    s.mean_ms = mean * 1000;
    s.std_ms = std::sqrt(sq / static_cast<double>(seconds.size())) * 1000;
    s.median_ms = percentile(seconds, 50) * 1000;
  }
  for (double p : percentiles) s.percentiles_ms.emplace_back(p, percentile(seconds, p) * 1000);
  return s;
}

std::vector<double> output_tokens_per_second(const std::vector<RequestOutput>& outputs) {
  double min_start = 0, max_end = 0;
  bool any = false;
  for (const auto& o : outputs) {
    if (!o.success) continue;
    if (!any) {
      min_start = o.start_time;
      max_end = o.start_time + o.latency;
      any = true;
    }
    min_start = std::min(min_start, o.start_time);
    max_end = std::max(max_end, o.start_time + o.latency);
  }
  if (!any) return {};
  size_t buckets = static_cast<size_t>(std::ceil(max_end - min_start)) + 1;
  std::vector<double> tokens(buckets, 0.0);
  for (const auto& o : outputs) {
    if (!o.success) continue;
    double t = o.start_time + o.ttft;
    auto add = [&](double when) {
      double offset = when - min_start;
      if (offset < 0) return;
      size_t b = static_cast<size_t>(offset);
      if (b < buckets) tokens[b] += 1;
    };
    add(t);
    for (double gap : o.itl) {
      t += gap;
      add(t);
    }
  }
  return tokens;
}

double peak_output_throughput(const std::vector<RequestOutput>& outputs) {
  auto tokens = output_tokens_per_second(outputs);
  return tokens.empty() ? 0.0 : *std::max_element(tokens.begin(), tokens.end());
}

int64_t peak_concurrency(const std::vector<RequestOutput>& outputs) {
  std::vector<std::pair<double, int>> events;
  for (const auto& o : outputs) {
    if (!o.success) continue;
    events.emplace_back(o.start_time, +1);
    events.emplace_back(o.start_time + o.latency, -1);
  }
  // Departures sort before arrivals at the same instant: intervals are half-open.
  std::sort(events.begin(), events.end());
  int64_t current = 0, peak = 0;
  for (const auto& [t, d] : events) {
    current += d;
    peak = std::max(peak, current);
  }
  return peak;
}

BenchmarkMetrics compute_metrics(const std::vector<RequestOutput>& outputs, double duration_s,
                                 const std::vector<double>& percentiles,
                                 const std::map<std::string, double>& goodput_slo_ms) {
  BenchmarkMetrics m;
  std::vector<double> ttfts, tpots, all_tpots, itls, e2els;
  for (const auto& o : outputs) {
    if (!o.success) {
      m.output_lens.push_back(0);
      m.failed++;
      continue;
    }
    int64_t output_len = o.output_tokens;
    m.output_lens.push_back(output_len);
    m.total_input += o.prompt_len;
    double tpot = 0;
    if (output_len > 1) {
      tpot = (o.latency - o.ttft) / static_cast<double>(output_len - 1);
      tpots.push_back(tpot);
    }
    all_tpots.push_back(tpot);  // requests with <= 1 token count as TPOT 0 for goodput
    itls.insert(itls.end(), o.itl.begin(), o.itl.end());
    ttfts.push_back(o.ttft);
    e2els.push_back(o.latency);
    m.completed++;
  }
  for (int64_t n : m.output_lens) m.total_output += n;
  int64_t good = 0;
  if (!goodput_slo_ms.empty()) {
    for (size_t i = 0; i < ttfts.size(); ++i) {
      bool ok = true;
      for (const auto& [name, limit_ms] : goodput_slo_ms) {
        double value = name == "ttft" ? ttfts[i] : name == "tpot" ? all_tpots[i] : e2els[i];
        if (value > limit_ms / 1000.0) ok = false;
      }
      if (ok) good++;
    }
  }
  double d = duration_s > 0 ? duration_s : 1e-9;
  m.request_throughput = static_cast<double>(m.completed) / d;
  m.request_goodput = static_cast<double>(good) / d;
  m.output_throughput = static_cast<double>(m.total_output) / d;
  m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / d;
  m.ttft = summarize_ms(ttfts, percentiles);
  m.tpot = summarize_ms(tpots, percentiles);
  m.itl = summarize_ms(itls, percentiles);
  m.e2el = summarize_ms(e2els, percentiles);
  m.max_output_tokens_per_s = peak_output_throughput(outputs);
  m.max_concurrent_requests = peak_concurrency(outputs);
  return m;
}

}  // namespace strata::bench
