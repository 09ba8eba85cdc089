// Serving-benchmark metrics with vLLM's definitions (vllm bench serve):
//   TTFT  time from sending a request to its first token chunk;
//   ITL   time between consecutive token chunks of one request (all requests pooled);
//   TPOT  per request (latency - TTFT) / (output tokens - 1), requests with > 1 output token;
//   E2EL  time from sending to the last token chunk;
//   goodput  completed requests per second meeting every SLO given (ms, inclusive);
//   peak output throughput  the most token chunks received in one 1-second bucket counted from
//     the first request's start; peak concurrency  the most requests in flight at once
//     (half-open [start, end) intervals). Percentiles interpolate linearly (numpy's default).
// All times in RequestOutput are seconds; summaries are in milliseconds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace strata::bench {

// What the client measured for one request.
struct RequestOutput {
  bool success = false;
  std::string error;          // why it failed (HTTP status and body, transport error, ...)
  int64_t prompt_len = 0;     // the dataset's count, replaced by usage.prompt_tokens when sent
  int64_t output_tokens = 0;  // usage.completion_tokens, else a re-tokenized count; 0 = unknown
  bool output_tokens_from_usage = false;
  std::string generated_text;
  double start_time = 0;    // now_seconds() when the request was sent
  double ttft = 0;          // seconds
  std::vector<double> itl;  // seconds between token chunks
  double latency = 0;       // seconds, send to last token chunk
  double queue_time = 0;    // seconds spent waiting for a --max-concurrency slot
};

// Mean, median, population standard deviation and chosen percentiles, in milliseconds.
struct MetricSummary {
  double mean_ms = 0;
  double median_ms = 0;
  double std_ms = 0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value)
};

struct BenchmarkMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t total_input = 0;
  int64_t total_output = 0;
  double request_throughput = 0;  // completed / duration
  double request_goodput = 0;     // good completed / duration
  double output_throughput = 0;   // total_output / duration
  double total_token_throughput = 0;
  MetricSummary ttft, tpot, itl, e2el;
  double max_output_tokens_per_s = 0;
  int64_t max_concurrent_requests = 0;
  std::vector<int64_t> output_lens;  // per request, 0 for failures
};

// Linear-interpolation percentile of `values` (p in [0, 100]); 0 for an empty list.
double percentile(std::vector<double> values, double p);

// Summary of `seconds` in milliseconds; an empty list summarises as zeros (as vLLM does).
MetricSummary summarize_ms(const std::vector<double>& seconds,
                           const std::vector<double>& percentiles);

// Output tokens per 1-second bucket (from the earliest start of a successful request).
std::vector<double> output_tokens_per_second(const std::vector<RequestOutput>& outputs);
double peak_output_throughput(const std::vector<RequestOutput>& outputs);
int64_t peak_concurrency(const std::vector<RequestOutput>& outputs);

// `goodput_slo_ms` maps "ttft" / "tpot" / "e2el" to limits in milliseconds.
BenchmarkMetrics compute_metrics(const std::vector<RequestOutput>& outputs, double duration_s,
                                 const std::vector<double>& percentiles,
                                 const std::map<std::string, double>& goodput_slo_ms);

}  // namespace strata::bench
