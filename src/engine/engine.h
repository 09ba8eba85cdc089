// The engine: one model, one KV pool, one scheduler, one sampler. Engine is the single-threaded
// core (step() = schedule, run the model, sample, update, emit outputs); EngineClient runs it on
// its own thread behind a thread-safe submit/abort interface (DESIGN.md section 1).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "engine/engine_config.h"
#include "engine/engine_types.h"
#include "engine/model_runner.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "sampling/stop_checker.h"
#include "sched/scheduler.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace strata::engine {

// What the engine decided at start-up (logged, and reported by /v1/models and benchmarks).
struct MemoryPlan {
  int64_t memory_budget = 0;  // bytes the engine may use
  int64_t weight_bytes = 0;
  int64_t workspace_bytes = 0;
  int64_t kv_bytes = 0;
  int64_t kv_bytes_per_token = 0;
  int64_t num_blocks = 0;  // usable KV blocks (the null block excluded)
  int64_t block_size = 0;
  int64_t num_tokens() const { return num_blocks * block_size; }
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  ~Engine();

  // Checks a request against the model and limits (prompt length, sampling parameters). Safe to
  // call from any thread: reads only what is fixed at creation.
  Status validate(const EngineRequest& request) const;
  // Queues a validated request; its chunks go to `stream`.
  Status add_request(EngineRequest request, std::shared_ptr<RequestStream> stream);
  // Aborts a request (all its choices); a final "abort" chunk is pushed. No-op when unknown.
  void abort_request(const std::string& request_id);
  // Aborts everything with `why` as the error of the final chunks.
  void abort_all(const Status& why);

  bool has_unfinished_requests() const { return !requests_.empty(); }
  int64_t num_requests() const { return static_cast<int64_t>(requests_.size()); }
  // One step. Errors are internal failures (the model rejected the batch).
  Status step();
  EngineStats stats() const;

  const ModelConfig& model_config() const { return model_->config(); }
  const std::shared_ptr<const Tokenizer>& tokenizer() const { return tokenizer_; }
  int64_t max_model_len() const { return config_.scheduler.max_model_len; }
  const MemoryPlan& memory_plan() const { return plan_; }
  const EngineConfig& config() const { return config_; }
  // Sampling defaults (vLLM's, or the model's generation_config.json with --generation-config
  // auto): what a request starts from before its own fields are applied.
  const sampling::SamplingParams& default_sampling_params() const { return defaults_; }
  const std::vector<int32_t>& eos_token_ids() const { return eos_ids_; }
  Model& model() { return *model_; }
  ThreadPool& pool() { return *pool_; }

 private:
  struct Choice;
  struct RequestState;
  Engine() = default;
  void emit(Choice& c, const sched::RequestOutput& out, const sampling::SampleOutput* sample);
  void finish_choice(Choice& c, OutputChunk& chunk, const std::string& reason);
  Status compute_prompt_logprobs(const sched::SchedulerOutput& plan);
  void release_if_done(RequestState* r);

  EngineConfig config_;
  MemoryPlan plan_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  KvStorage storage_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::unique_ptr<sampling::Sampler> sampler_;
  std::unique_ptr<ModelRunner> runner_;
  sampling::SamplingParams defaults_;
  std::vector<int32_t> eos_ids_;
  std::map<std::string, std::unique_ptr<RequestState>> requests_;
  uint64_t next_seq_ = 0;
  // Per-step buffers.
  std::vector<float> logits_, prompt_logits_;
  std::vector<sampling::SamplingRow> rows_;
  std::vector<sampling::SampleOutput> samples_;
  std::vector<int32_t> sampled_;
  std::vector<int> plan_to_row_;
  // Counters not kept by the scheduler.
  int64_t finished_stop_ = 0, finished_length_ = 0, finished_abort_ = 0;
};

// Thread-safe front: runs an Engine on its own thread.
class EngineClient {
 public:
  static Result<std::unique_ptr<EngineClient>> create(const EngineConfig& config);
  ~EngineClient();  // aborts what is left and joins the engine thread

  // Validates and queues a request (errors are returned here, synchronously).
  Result<std::shared_ptr<RequestStream>> submit(EngineRequest request);
  void abort(const std::string& request_id);
  // Stops taking requests; lets running ones finish for up to `grace_seconds`, then aborts the
  // rest with `why`; joins the engine thread.
  void shutdown(double grace_seconds, const Status& why);

  EngineStats stats() const;
  // Requests submitted and not finished (queued in the client or the engine).
  int64_t num_unfinished() const { return unfinished_.load(); }
  const Engine& engine() const { return *engine_; }

 private:
  EngineClient() = default;
  void loop();

  std::unique_ptr<Engine> engine_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Pending {
    EngineRequest request;
    std::shared_ptr<RequestStream> stream;
  };
  std::vector<Pending> pending_;
  std::vector<std::string> aborts_;
  bool stopping_ = false;
  bool accepting_ = true;
  double drain_deadline_ = 0;
  Status stop_reason_;
  EngineStats stats_;
  std::atomic<int64_t> unfinished_{0};
};

}  // namespace strata::engine
