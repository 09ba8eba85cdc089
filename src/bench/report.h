// What the benchmark prints and saves: the result block in vllm bench serve's exact layout and
// wording, the result JSON (vLLM's field names), the sweep table and the sweep SVG chart.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/metrics.h"

namespace strata::bench {

// Python's repr of a float: "inf", "10.0", "0.5", "1e-05".
std::string py_float(double v);
// Python's "{:c^n}".format(s): s centred in `width`, extra fill on the right.
std::string center(const std::string& s, size_t width, char fill);

struct BlockOptions {
  std::optional<int64_t> max_concurrency;
  double request_rate = 0;  // infinity: not printed
  double duration_s = 0;
  bool goodput = false;
  // Metrics with a percentile section, in vLLM's names: ttft, tpot, itl, e2el,
  // client_queue_time, e2el_including_client_queue (printed in this fixed order).
  std::vector<std::string> percentile_metrics;
  std::vector<double> percentiles;  // e.g. {99}
};

// "Failed requests during benchmark run detected (capping to 10):" and one line per error; empty
// when none failed.
std::string format_failures(const std::vector<RequestOutput>& outputs);

// The "============ Serving Benchmark Result ============" block, ending with a line of '='.
std::string format_result_block(const BenchmarkMetrics& m,
                                const std::vector<RequestOutput>& outputs, const BlockOptions& o);

// "p99", "p99.9" (vLLM's key spelling).
std::string percentile_key(double p);

struct ResultMeta {
  std::string date;  // "%Y%m%d-%H%M%S"
  std::string backend;
  std::string label;
  std::string model_id;
  std::string tokenizer_id;
  int64_t num_prompts = 0;
  double request_rate = 0;
  double burstiness = 1.0;
  std::optional<int64_t> max_concurrency;
  std::string dataset_name;
  std::optional<int64_t> random_input_len, random_output_len;
  std::vector<std::pair<std::string, std::string>> metadata;  // --metadata KEY=VALUE
};

// The result JSON object (one line, as vLLM writes it). `detailed` adds the per-request lists.
std::string build_result_json(const ResultMeta& meta, const BenchmarkMetrics& m,
                              const std::vector<RequestOutput>& outputs, const BlockOptions& o,
                              bool detailed);

// vLLM's default file name: "{label}-{rate}qps[-concurrency{c}]-{model basename}-{date}.json".
std::string default_result_filename(const ResultMeta& meta);

// One point of a sweep.
struct SweepRow {
  std::optional<int64_t> max_concurrency;
  std::optional<int64_t> input_len, output_len;
  int64_t completed = 0, failed = 0;
  double duration_s = 0;
  double ttft_mean_ms = 0, ttft_median_ms = 0, ttft_p99_ms = 0;
  double tpot_mean_ms = 0, tpot_median_ms = 0;
  double e2el_mean_ms = 0, e2el_p99_ms = 0;
  double input_tok_s = 0, output_tok_s = 0;
  double per_user_tok_s = 0;  // 1000 / mean TPOT
  double request_throughput = 0;
};
SweepRow make_sweep_row(const BenchmarkMetrics& m, const std::vector<RequestOutput>& outputs,
                        double duration_s, std::optional<int64_t> max_concurrency,
                        std::optional<int64_t> input_len, std::optional<int64_t> output_len);
// A Markdown table, one line per point.
std::string format_sweep_table(const std::vector<SweepRow>& rows);
// The sweep rows as a JSON array.
std::string sweep_json(const std::vector<SweepRow>& rows);
// Two panels against concurrency: output throughput (tok/s) and latency (mean TTFT, mean E2EL,
// ms); one line per input/output length pair.
std::string render_sweep_svg(const std::vector<SweepRow>& rows, const std::string& title);

}  // namespace strata::bench
