// The simulator: the real scheduler (sched/, with its kv/ bookkeeping) run on a virtual clock.
// Each step it plans a batch, a step-time function (usually CostModel::step_time) says how long
// the batch takes, the clock moves by that much, and update() gets made-up sampled tokens (never
// EOS: requests end at their output length, as `strata bench serve --ignore-eos` asks). The
// client side is modelled as `strata bench serve` drives a server: requests are sent at their
// arrival times (bench/arrivals.h), at most --max-concurrency in flight; each sampled token is a
// streamed chunk. The result is a list of bench::RequestOutput, so bench's metrics, table and
// chart apply unchanged. Nothing here reads the wall clock.
//
// Requests reach the scheduler request_admission_s apart (the server admits them one by one).
// Timing within a step: a batch planned at t0 runs until t1 = t0 + step_time(batch); its sampled
// tokens arrive at t1; requests that arrive in (t0, t1] are sent at their arrival times but wait
// for the next plan (at t1), as a request reaching a busy engine does; a --max-concurrency slot
// freed by a request finishing at t1 is taken by the next queued request at t1.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "bench/metrics.h"
#include "bench/prompt_tokenizer.h"
#include "bench/report.h"
#include "core/status.h"
#include "kv/cache_config.h"
#include "plan/cost_model.h"
#include "sched/scheduler.h"
#include "sched/scheduler_config.h"

namespace strata::plan {

// One request of a workload.
struct SimRequest {
  double arrival_s = 0;    // when the client wants to send it, from the start of the run
  int64_t prompt_len = 1;  // tokens
  int64_t output_len = 1;  // generated tokens (max_tokens, EOS ignored)
  // Requests of one prefix group (>= 0) share their first prefix_len prompt tokens, so prefix
  // caching can hit; otherwise every prompt differs from every other from its first token.
  int64_t prefix_group = -1;
  int64_t prefix_len = 0;
};

// `random:in=N,out=M[,range=R][,prefix=P][,n=NUM][,rate=QPS][,burstiness=B][,seed=S]`: vLLM's
// random dataset (lengths uniform in [floor(L (1 - R)), ceil(L (1 + R))], an optional P-token
// prefix shared by all prompts) with bench serve's arrival model (rate inf: all at once).
struct RandomWorkload {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0;
  int64_t prefix_len = 0;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  uint64_t seed = 0;
};
// Errors name the bad key or value. Random workloads only (parse_workload takes every kind).
Result<RandomWorkload> parse_workload_spec(const std::string& spec);
std::vector<SimRequest> make_random_workload(const RandomWorkload& w);

// `sharegpt:path=FILE[,n=NUM][,output-len=M][,tokenizer=PATH][,rate=QPS][,burstiness=B][,seed=S]`:
// the requests `strata bench serve --dataset-name sharegpt --dataset-path FILE --num-prompts NUM
// [--sharegpt-output-len M] --request-rate QPS --burstiness B --seed S` sends (bench's
// sample_sharegpt, oversampling included, and bench's arrival times). Prompt lengths are token
// counts from the tokenizer (`tokenizer=`, else the served model's). FILE and PATH cannot contain
// commas.
struct ShareGptWorkload {
  std::string path;
  int64_t num_prompts = 1000;         // bench serve's --num-prompts default
  std::optional<int64_t> output_len;  // unset: each conversation's reply length
  std::string tokenizer;              // empty: the model's
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  uint64_t seed = 0;
};

using Workload = std::variant<RandomWorkload, ShareGptWorkload>;
// Any `--workload` spec. Errors name the bad key or value and show the kind's syntax.
Result<Workload> parse_workload(const std::string& spec);

// A workload's requests, with the nominal lengths that label sweep rows (set for random
// workloads only, as bench serve labels them) and notes worth printing (bench's oversampling and
// token-count notes).
struct WorkloadRequests {
  std::vector<SimRequest> requests;
  std::optional<int64_t> input_len, output_len;
  std::vector<std::string> notes;
};
// ShareGPT with prompt lengths counted by `tok`. Requests with the same prompt text (oversampled
// copies, repeated conversations) share all their prompt tokens (one prefix group), so prefix
// caching hits them as it would on the server; distinct prompts share nothing.
Result<WorkloadRequests> make_sharegpt_workload(const ShareGptWorkload& w,
                                                bench::PromptTokenizer& tok);
// Builds any workload. `model_tokenizer` is the tokenizer the engine would serve with (its
// --tokenizer, else the model path); a ShareGPT workload without `tokenizer=` loads it, and fails
// with a message naming `tokenizer=` when there is none there.
Result<WorkloadRequests> make_workload(const Workload& w, const std::string& model_tokenizer);

struct SimulationConfig {
  sched::SchedulerConfig scheduler;        // max_model_len must be set (> 0)
  kv::CacheConfig cache;                   // KV tiers are not simulated
  int64_t num_kv_blocks = 0;               // the pool, including the null block (>= 2)
  std::optional<int64_t> max_concurrency;  // client-side cap; nullopt: unlimited
  // The server's time to admit one request (HTTP, tokenization, hand-off to the engine), one
  // after another: a request sent at t reaches the scheduler at max(t, the previous one's) + this.
  // With 0, a burst of requests all reach the first step; with any positive value, as in a real
  // server, the first step starts with the first request alone.
  double request_admission_s = 0;
  // Guard against a scheduler that stops making progress (a bug): the simulation fails after
  // this many steps instead of looping.
  int64_t max_steps = 100'000'000;
  // Pipeline parallelism with micro-batches in flight, as the engine runs it (engine.cpp: up to
  // --pipeline-parallel-size disjoint batches submitted before the oldest completes): with
  // pipeline_depth > 1 and stage_cost set, batch b's stage s starts when stage s has finished
  // batch b-1 and stage s-1 has finished batch b (CostModel's stage_s), and the oldest batch
  // completes (its tokens are sampled, overhead_s on the first stage's device) before the next
  // is planned once `pipeline_depth` are in flight. Otherwise one step at a time (step_time).
  int pipeline_depth = 1;
  std::function<StepCost(std::span<const SequenceWork>)> stage_cost;
};

// Seconds one step of `batch` takes (> 0, finite).
using StepTimeFn = std::function<double(std::span<const SequenceWork>)>;

struct SimulationResult {
  // One per workload request, in workload order; times are virtual seconds from the start.
  // Requests the scheduler refused at submit (prompt too long, ...) are failures with its error.
  std::vector<bench::RequestOutput> outputs;
  double duration_s = 0;  // from the start to the last completion
  int64_t num_steps = 0;
  int64_t max_running = 0;  // the most requests running in one step
  sched::SchedulerStats stats;
};

// Runs the workload to completion. Errors: a bad config (the scheduler's validation), a step
// time that is not positive and finite (kInvalidArgument), no progress within max_steps
// (kInternal).
Result<SimulationResult> simulate(const SimulationConfig& config,
                                  std::span<const SimRequest> workload,
                                  const StepTimeFn& step_time);

// A sweep over client concurrency, as `strata bench serve --max-concurrency a,b,c` runs one.
struct SweepOptions {
  std::vector<std::optional<int64_t>> concurrencies = {std::nullopt};
  std::vector<double> percentiles = {99};
  // Labels of the sweep rows (the workload's nominal lengths).
  std::optional<int64_t> input_len, output_len;
};
struct SweepPoint {
  std::optional<int64_t> max_concurrency;
  SimulationResult result;
  bench::BenchmarkMetrics metrics;  // bench::compute_metrics of the outputs
  bench::SweepRow row;              // for bench::format_sweep_table / render_sweep_svg
};
Result<std::vector<SweepPoint>> simulate_sweep(const SimulationConfig& config,
                                               std::span<const SimRequest> workload,
                                               const StepTimeFn& step_time,
                                               const SweepOptions& options);

}  // namespace strata::plan
