// `strata bench serve`: vLLM's serving benchmark (same option names, same printed block) against
// any OpenAI-compatible server, plus sweeps over --max-concurrency / --random-input-len /
// --random-output-len lists with a summary table and an SVG chart.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/dataset.h"
#include "bench/openai_protocol.h"
#include "core/options.h"
#include "core/status.h"

namespace strata::bench {

struct ServeBenchConfig {
  // Endpoint.
  std::string backend_name = "openai";
  Backend backend = Backend::kCompletions;
  std::string base_url;  // "http://127.0.0.1:8000"
  std::string endpoint;  // "/v1/completions"
  std::string model;     // empty: the server's first model
  std::string served_model_name;
  std::vector<std::pair<std::string, std::string>> headers;
  double request_timeout_s = 6 * 3600;
  double ready_check_timeout_s = 0;
  std::string label;
  // Dataset.
  std::string dataset_name = "random";  // random | sharegpt | prefix-repetition
  std::string dataset_path;
  int64_t num_prompts = 1000;
  uint64_t seed = 0;
  std::vector<int64_t> input_lens = {1024};
  std::vector<int64_t> output_lens = {128};
  double range_ratio = 0;
  int64_t prefix_len = 0;
  std::optional<int64_t> sharegpt_output_len;
  PrefixRepetitionOptions prefix_repetition;
  bool no_oversample = false;
  std::string tokenizer_path;
  // Traffic.
  double request_rate = 0;  // set to infinity by the parser's default
  double burstiness = 1.0;
  std::vector<std::optional<int64_t>> concurrencies = {std::nullopt};
  int64_t num_warmups = 0;
  bool ignore_eos = false;
  std::string extra_body_json;  // sampling parameters and --extra-body, merged
  bool temperature_set = false;
  std::optional<int> logprobs;
  // Results.
  std::vector<std::string> percentile_metrics = {"ttft", "tpot", "itl", "e2el"};
  std::vector<double> percentiles = {99};
  std::map<std::string, double> goodput;
  bool save_result = false;
  bool save_detailed = false;
  bool append_result = false;
  std::string result_dir;
  std::string result_filename;
  std::vector<std::pair<std::string, std::string>> metadata;
  bool disable_progress = false;
  double progress_interval_s = 5;
};

void add_serve_bench_options(OptionSet& options);
// Validates everything a user can get wrong; messages name the option.
Result<ServeBenchConfig> parse_serve_bench_config(const Args& args);
// Runs the benchmark (or sweep), printing to `out`. Returns the process exit code.
int run_serve_bench(const ServeBenchConfig& config, FILE* out);

}  // namespace strata::bench
