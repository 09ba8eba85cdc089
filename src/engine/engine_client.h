// EngineClient: the thread-safe front of the engine, and all the server sees of it. It runs an
// Engine (engine/engine.h) on its own thread behind submit/abort queues (DESIGN.md section 1) and
// publishes what callers need to know about the model and its limits (EngineInfo) and the engine's
// counters (EngineStats). This header includes no model, kernel or scheduler header: the server
// builds on it alone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "engine/engine_types.h"
#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace strata::engine {

class Engine;
struct EngineConfig;

// Fixed at creation.
struct EngineInfo {
  std::string model_path;                      // the MODEL argument
  std::string tokenizer_path;                  // where the tokenizer (and chat template) come from
  std::shared_ptr<const Tokenizer> tokenizer;  // null for models run on token ids only
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
  int64_t max_num_seqs = 0;
  bool priority_scheduling = false;  // --scheduling-policy priority
  // Sampling defaults (vLLM's, or the model's generation_config.json): what a request starts
  // from before its own fields are applied.
  sampling::SamplingParams default_sampling_params;
  std::vector<int32_t> eos_token_ids;
  std::string backend;  // "cpu:avx2"
  int threads = 0;
  int64_t kv_cache_tokens = 0;  // tokens the whole KV pool holds
};

class EngineClient {
 public:
  static Result<std::unique_ptr<EngineClient>> create(const EngineConfig& config);
  // Runs an engine built by the caller (e.g. with another executor).
  static std::unique_ptr<EngineClient> start(std::unique_ptr<Engine> engine);
  ~EngineClient();  // aborts what is left and joins the engine thread

  const EngineInfo& info() const { return info_; }
  // Validates and queues a request (errors are returned here, synchronously; the request field
  // at fault, such as "prompt" or "top_p", goes to *bad_field when given).
  Result<std::shared_ptr<RequestStream>> submit(EngineRequest request,
                                                std::string* bad_field = nullptr);
  void abort(const std::string& request_id);
  // Pauses a request (every choice) until resume(): the engine stops scheduling it and it keeps
  // its KV blocks while no unpaused request needs them (a request whose client cannot take more
  // output). Applied in call order with resume(); unknown ids are ignored.
  void pause(const std::string& request_id);
  void resume(const std::string& request_id);
  // Stops taking requests; lets running ones finish for up to `grace_seconds`, then aborts the
  // rest with `why`; joins the engine thread.
  void shutdown(double grace_seconds, const Status& why);

  EngineStats stats() const;
  // Ok while the engine's workers can run steps; why not otherwise (a rank of a multi-process
  // deployment died). Thread-safe.
  Status health() const;
  // Requests submitted and not finished (queued in the client or the engine).
  int64_t num_unfinished() const { return unfinished_.load(); }

  // Test hook: the engine thread runs no step beyond `max_steps` steps in all (counted since
  // start, see steps_run()) until the limit is raised; negative (the default) means no limit.
  // While held it still takes new requests (they queue in the scheduler), aborts and shutdown,
  // so tests can keep requests in flight deterministically, whatever the machine's speed.
  // Production code never sets it.
  void set_step_limit(int64_t max_steps);
  // Engine steps run so far.
  int64_t steps_run() const { return steps_run_.load(); }

 private:
  EngineClient() = default;
  void loop();

  std::unique_ptr<Engine> engine_;
  EngineInfo info_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Pending {
    EngineRequest request;
    std::shared_ptr<RequestStream> stream;
  };
  std::vector<Pending> pending_;
  std::vector<std::string> aborts_;
  std::vector<std::pair<std::string, bool>> pauses_;  // (id, paused), in call order
  bool stopping_ = false;
  bool accepting_ = true;
  double drain_deadline_ = 0;
  Status stop_reason_;
  EngineStats stats_;
  std::atomic<int64_t> unfinished_{0};
  int64_t step_limit_ = -1;  // guarded by mu_
  std::atomic<int64_t> steps_run_{0};
};

}  // namespace strata::engine
