// The engine core (rank 0): the scheduler, an Executor that runs each step on its workers, and
// the output processing (incremental detokenization, stop strings, chunks to each request's
// stream). Single-threaded: EngineClient (engine/engine_client.h) runs it on its own thread
// behind a thread-safe interface. One step is
//   plan = scheduler.schedule()                 [sched/: bookkeeping only]
//   out  = executor.execute({plan, new requests})   [workers: model + sampling]
//   scheduler.update(plan, out's tokens) -> detokenize, stop strings, emit chunks
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "engine/engine_client.h"
#include "engine/engine_config.h"
#include "engine/engine_types.h"
#include "engine/executor.h"
#include "engine/step_trace.h"
#include "model/model_config.h"
#include "sampling/sampling_params.h"
#include "sampling/stop_checker.h"
#include "sched/scheduler.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace strata::engine {

class Engine {
 public:
  // `executor_factory` builds the executor once the model config and limits are known (default:
  // one in-process worker).
  static Result<std::unique_ptr<Engine>> create(
      const EngineConfig& config, ExecutorFactory executor_factory = default_executor_factory());
  ~Engine();

  // Checks a request against the model and limits (prompt length, sampling parameters). Safe to
  // call from any thread: reads only what is fixed at creation. The request field at fault
  // ("prompt", "top_p", ...) goes to *bad_field when given.
  Status validate(const EngineRequest& request, std::string* bad_field = nullptr) const;
  // Queues a validated request; its chunks go to `stream`.
  Status add_request(EngineRequest request, std::shared_ptr<RequestStream> stream);
  // Aborts a request (all its choices); a final "abort" chunk is pushed. No-op when unknown.
  void abort_request(const std::string& request_id);
  // Aborts everything with `why` as the error of the final chunks.
  void abort_all(const Status& why);
  // Pauses every unfinished choice of a request: it is not scheduled, and keeps its KV blocks
  // while no unpaused request needs them (sched/scheduler.h, P1-P2), until resume_request().
  // No-op when unknown.
  void pause_request(const std::string& request_id);
  void resume_request(const std::string& request_id);

  bool has_unfinished_requests() const { return !requests_.empty(); }
  // Unfinished requests that are not all paused: step() has work to do.
  // (Steps in flight under pipeline overlap are work too: step() completes them.)
  bool has_runnable_requests() const {
    return scheduler_->has_runnable_requests() || !in_flight_.empty();
  }
  int64_t num_requests() const { return static_cast<int64_t>(requests_.size()); }
  // One step. Errors are internal failures (the model rejected the batch). Under pipeline overlap
  // (Executor::max_concurrent_batches() > 1) a step first plans and submits micro-batches until
  // that many are in flight or nothing more can be planned, then completes the oldest one.
  Status step();
  // Pipeline overlap: the micro-batches the engine keeps in flight (1: none), and how many are
  // in flight now.
  int pipeline_depth() const { return depth_; }
  int num_batches_in_flight() const { return static_cast<int>(in_flight_.size()); }
  EngineStats stats() const;

  // The step trace (--step-trace; engine/step_trace.h). tracing(): whether it is on. The driver
  // of step() reports the time its thread blocked waiting for requests since the last step
  // (added to the next step's "wait" phase), and flushes the file when it stops.
  bool tracing() const { return trace_ != nullptr; }
  void add_trace_wait(double seconds) { trace_record_.wait += seconds; }
  void flush_trace() {
    if (trace_ != nullptr) trace_->flush();
  }
  // Calls `observer` after every executed step with the step's trace record (the same figures as
  // --step-trace writes, without a file); an empty function turns it off. `strata plan
  // --calibrate` times steps this way.
  void set_step_observer(std::function<void(const StepTraceRecord&)> observer) {
    step_observer_ = std::move(observer);
  }

  const EngineInfo& info() const { return info_; }
  const ModelConfig& model_config() const { return model_config_; }
  const std::shared_ptr<const Tokenizer>& tokenizer() const { return tokenizer_; }
  int64_t max_model_len() const { return config_.scheduler.max_model_len; }
  const MemoryPlan& memory_plan() const { return executor_->info().memory; }
  const EngineConfig& config() const { return config_; }
  const sampling::SamplingParams& default_sampling_params() const { return defaults_; }
  const std::vector<int32_t>& eos_token_ids() const { return eos_ids_; }
  Executor& executor() { return *executor_; }
  const sched::Scheduler& scheduler() const { return *scheduler_; }

 private:
  struct Choice;
  struct RequestState;
  // A step between schedule() and its output processing: its input, its entries' choices and
  // (pipeline overlap) its own trace record.
  struct Batch {
    StepInput input;
    std::vector<Choice*> choices;
    StepTraceRecord trace;
    uint64_t trace_attempt = 0;
    double t_start = 0, t_scheduled = 0, t_execute = 0;
  };
  Engine() = default;
  // Plans `b` (schedule(), the new requests' data, the trace's events); *run: whether it goes to
  // the executor.
  void plan_batch(Batch& b, StepTraceRecord* tr, bool* run);
  // Applies `b`'s output (output_): scheduler update, chunks to the streams, the trace record.
  Status finish_batch(Batch& b, StepTraceRecord* tr, double t_executed);
  Status step_pipelined();
  void emit(Choice& c, const sched::RequestOutput& out, const SampledEntry* sample);
  void finish_choice(Choice& c, OutputChunk& chunk, const std::string& reason);
  void release_if_done(RequestState* r);

  EngineConfig config_;
  EngineInfo info_;
  ModelConfig model_config_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  sampling::SamplingParams defaults_;
  std::vector<int32_t> eos_ids_;
  std::map<std::string, std::unique_ptr<RequestState>> requests_;
  uint64_t next_seq_ = 0;
  // Pipeline overlap: depth (1: off), the batches in flight (oldest first) and spares to reuse.
  int depth_ = 1;
  std::deque<std::unique_ptr<Batch>> in_flight_;
  std::vector<std::unique_ptr<Batch>> spare_batches_;
  // Per-step buffers.
  Batch batch_;
  StepOutput output_;
  std::vector<int32_t> sampled_;
  std::vector<std::vector<int32_t>> accepted_;   // speculative decoding: per entry
  std::vector<std::vector<int32_t>> proposals_;  // drafts the workers proposed (MTP)
  // Finished and preempted ids of plans that scheduled nothing (so were not executed): they go
  // to the workers with the next plan that is.
  std::vector<std::string> unsent_finished_, unsent_preempted_;
  // The step trace: null when off.
  std::unique_ptr<StepTraceWriter> trace_;
  std::function<void(const StepTraceRecord&)> step_observer_;
  StepTraceRecord trace_record_;
  double trace_last_step_end_ = 0;
  uint64_t trace_attempt_ = 0;  // steps begun with the trace on
  // Counters not kept by the scheduler.
  int64_t finished_stop_ = 0, finished_length_ = 0, finished_abort_ = 0;
};

}  // namespace strata::engine
