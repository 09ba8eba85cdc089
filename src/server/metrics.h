// Prometheus metrics under vLLM's names, types, labels and histogram buckets (so existing
// dashboards work), plus Strata's own series. Request histograms are observed by the server as
// requests finish; gauges and counters come from the engine's stats snapshot at scrape time.
//
// Not thread-safe: observe and render from one thread (the server's loop thread).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine_types.h"

namespace strata::server {

// A Prometheus histogram: cumulative buckets at `upper_bounds` plus +Inf, sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Observations <= upper_bounds()[i] (cumulative), for i in [0, size]; the last is +Inf.
  uint64_t cumulative(size_t i) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; one extra for +Inf
  uint64_t count_ = 0;
  double sum_ = 0;
};

// vLLM's bucket lists.
std::vector<double> ttft_buckets();             // vllm:time_to_first_token_seconds
std::vector<double> per_token_buckets();        // inter-token latency and TPOT
std::vector<double> request_latency_buckets();  // e2e, queue, inference, prefill, decode
// 1, 2, 5, 10, 20, 50, ... up to max_value (vLLM's build_1_2_5_buckets).
std::vector<double> buckets_1_2_5(int64_t max_value);

// One finished choice (sequence), times in seconds; negative: not applicable.
struct FinishedSequence {
  std::string finish_reason;  // stop, length, abort
  double e2e = -1;            // arrival at the server to the last output
  double queue = -1;          // arrival at the engine to first scheduled
  double prefill = -1;        // first scheduled to first token
  double decode = -1;         // first token to last token
  double inference = -1;      // first scheduled to last token
  double tpot = -1;           // decode / (output tokens - 1)
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  int64_t max_tokens_param = 0;  // 0: not set
  int n = 1;
};

// Values the server adds to a scrape beyond the engine's stats.
struct ServerGauges {
  int64_t http_connections = 0;
  int64_t requests_in_flight = 0;    // HTTP requests being answered
  int64_t streams_paused = 0;        // streams paused until their client reads (back-pressure)
  int64_t write_buffer_bytes = 0;    // response bytes queued in the server, all connections
  int64_t connections_rejected = 0;  // turned away by --max-connections (cumulative)
};

class ServerMetrics {
 public:
  ServerMetrics(std::string model_name, int64_t max_model_len);

  void observe_ttft(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_finished(const FinishedSequence& s);
  void count_rejected(const std::string& reason);      // queue_full, shutting_down, ...
  void count_stream_stalled() { ++streams_stalled_; }  // aborted by --stream-stall-timeout

  // The text exposition (Content-Type: text/plain; version=0.0.4).
  std::string render(const engine::EngineStats& stats, const ServerGauges& gauges) const;

 private:
  std::string model_name_;
  Histogram ttft_, itl_, tpot_, e2e_, queue_, inference_, prefill_, decode_;
  Histogram prompt_tokens_, generation_tokens_, params_n_, params_max_tokens_;
  std::vector<std::pair<std::string, uint64_t>> rejected_;
  uint64_t streams_stalled_ = 0;
};

// Prometheus number text as prometheus_client writes it: "1.0", "0.25", "+Inf", "1e-05".
std::string prom_number(double v);
// A label value with \, " and newline escaped.
std::string prom_escape(const std::string& v);

}  // namespace strata::server
