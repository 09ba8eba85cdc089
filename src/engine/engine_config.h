// Everything needed to build an engine, and the command-line options that fill it (shared by
// `generate`, `serve` and `bench throughput`; vLLM's names).
#pragma once

#include <cstdint>
#include <string>

#include "core/options.h"
#include "core/status.h"
#include "kv/cache_config.h"
#include "model/model.h"
#include "sched/scheduler_config.h"

namespace strata::engine {

struct EngineConfig {
  LoadOptions model;      // path, load format, dtype, hf overrides (limits/pool set by the engine)
  std::string tokenizer;  // tokenizer path; empty: the model's own (none is fine for dummy runs)
  kv::CacheConfig cache;
  sched::SchedulerConfig scheduler;
  int threads = 0;               // compute threads; 0: all available
  std::string kernels = "auto";  // kernel variant (kernels/backend.h); auto: the fastest supported
  uint64_t seed = 0;             // engine generator (unseeded requests) and dummy weights
  int max_logprobs = 20;         // largest logprobs / prompt_logprobs a request may ask for
  // auto: sampling defaults from the model's generation_config.json; a folder: from the
  // generation_config.json in it; vllm or none: vLLM's defaults.
  std::string generation_config = "auto";
  // Back the whole KV pool with RAM at start (after checking that much is free), so a pool too
  // big for the machine is a start-up error, not an out-of-memory kill under load. Off: pages
  // are backed on first use (quicker starts for tests and short benchmarks).
  bool commit_kv_cache = true;
  // --step-trace: append one JSON line per engine step to this file (engine/step_trace.h);
  // empty: off.
  std::string step_trace;
};

// Declares model, tokenizer, cache, scheduler and engine options.
void add_engine_options(OptionSet& options);
// Reads them back; MODEL is positional()[0].
Result<EngineConfig> engine_config_from_args(const Args& args);
// Completes a config for the model (Engine::create and `strata plan` both run it): max_model_len
// from the model when not given, the checks of the scheduler and cache options, and the model's
// workspace limits (token budget, context, logits rows including speculative verification).
Status resolve_engine_config(const ModelConfig& model, EngineConfig* config);

// Physical memory this process may use (RAM, or the cgroup limit when lower), in bytes.
int64_t available_memory_bytes();
// Memory that can be taken now without pushing anything out: MemAvailable, or what the cgroup
// limit leaves (limit - usage) when lower; -1 when neither can be read.
int64_t free_memory_bytes();

}  // namespace strata::engine
