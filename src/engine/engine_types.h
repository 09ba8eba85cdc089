// What goes into the engine (EngineRequest) and what comes out (OutputChunk, through a
// RequestStream), plus the statistics the server exports.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"

namespace strata::grammar {
class CompiledGrammar;  // grammar/grammar.h
}

namespace strata::engine {

struct EngineRequest {
  std::string request_id;                 // unique among unfinished requests
  std::vector<int32_t> prompt_token_ids;  // with BOS etc. already applied
  sampling::SamplingParams params;        // validated by submit()
  int64_t priority = 0;                   // --scheduling-policy priority: lower runs first
  std::string cache_salt;                 // requests with different salts never share KV
  double arrival_time = -1;               // now_seconds(); < 0: the time of submit()
  bool detokenize = true;                 // produce text (needs a tokenizer)
  // Structured output: every choice's tokens are masked to this grammar (compiled against the
  // model's vocabulary); null: unconstrained.
  std::shared_ptr<const grammar::CompiledGrammar> constraint;
};

// Timestamps (now_seconds() clock) of one choice, final in its last chunk.
struct RequestTimes {
  double arrival = 0;
  double first_scheduled = -1;
  double first_token = -1;
  double last_token = -1;
  double finished = -1;
};

// One event for one choice of a request: new tokens and the text they release.
struct OutputChunk {
  int index = 0;                   // choice index (0 .. n-1)
  std::vector<int32_t> token_ids;  // new tokens since the previous chunk of this choice
  std::string text;                // new text (complete UTF-8; stop strings held back)
  std::vector<sampling::TokenLogprobs> logprobs;  // one per new token, when requested
  // Prompt logprobs (first chunk of choice 0 only, when requested): one entry per prompt token,
  // the first empty (nothing predicts it).
  std::vector<std::optional<sampling::TokenLogprobs>> prompt_logprobs;
  bool finished = false;
  std::string finish_reason;  // "stop", "length" or "abort" when finished
  // What stopped it: the stop token id or the stop string (empty: EOS, length or abort).
  std::variant<std::monostate, int32_t, std::string> stop_reason;
  int64_t num_prompt_tokens = 0;
  int64_t num_output_tokens = 0;  // so far, for this choice
  int64_t num_cached_tokens = 0;  // prompt tokens served from the prefix cache
  double time = 0;                // when the engine produced it
  RequestTimes times;             // filled in the last chunk
  Status error;                   // not ok: the request failed (the chunk is also `finished`)
};

// The consumer side of one request. Chunks arrive from the engine thread; read them with next()
// (blocking) or drain() from a notify callback (event loops).
class RequestStream {
 public:
  RequestStream(std::string request_id, int num_choices)
      : request_id_(std::move(request_id)), num_choices_(num_choices) {}
  const std::string& request_id() const { return request_id_; }
  int num_choices() const { return num_choices_; }

  // Blocks until a chunk is available; nullopt once every choice has finished and all chunks
  // were taken.
  std::optional<OutputChunk> next();
  // Takes every chunk available now; *done is set when nothing more will come.
  std::vector<OutputChunk> drain(bool* done);
  // Called from the engine thread after chunks are pushed (keep it short: post to a loop).
  void set_notify(std::function<void()> notify);

  // Engine side.
  void push(OutputChunk chunk);

 private:
  std::string request_id_;
  int num_choices_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<OutputChunk> chunks_;
  int finished_choices_ = 0;
  std::function<void()> notify_;
};

// A snapshot of the engine's counters (cumulative) and gauges.
struct EngineStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t num_paused = 0;  // sequences paused (EngineClient::pause), running or waiting
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_referenced = 0;
  int64_t kv_blocks_cached_free = 0;
  int64_t kv_blocks_free = 0;
  double kv_cache_usage = 0;  // referenced / total
  // Models with per-sequence state (KvSpec::has_state(): DeepSeek-V4's window and compressor
  // state, outside the paged blocks that kv_cache_usage counts): slots, in use by running
  // sequences, and prefix-cache snapshots ready; state_slot_bytes per slot. 0 slots: none.
  int64_t state_slots_running = 0, state_slots_in_use = 0;
  int64_t state_snapshots = 0, state_snapshots_ready = 0;
  int64_t state_slot_bytes = 0;
  int64_t state_restores = 0;        // prefix-cache hits resumed from a snapshot, cumulative
  int64_t prefix_cache_queries = 0;  // tokens
  int64_t prefix_cache_hits = 0;     // tokens
  // KV tiers (kv/kv_tiers.h): the scheduler's lookups in them, and their own counters.
  bool has_kv_tiers = false;
  int64_t external_prefix_cache_queries = 0;  // tokens
  int64_t external_prefix_cache_hits = 0;     // tokens
  struct Tier {
    bool present = false;
    int64_t blocks = 0, capacity_blocks = 0;  // held / can hold
    int64_t hits = 0;                         // blocks loaded from it
    int64_t stores = 0;                       // blocks written into it
    int64_t bytes_in = 0, bytes_out = 0;
    double usage() const {
      return capacity_blocks ? static_cast<double>(blocks) / capacity_blocks : 0;
    }
  };
  Tier cpu_tier, disk_tier;
  int64_t kv_tier_block_bytes = 0;
  int64_t kv_tier_loads = 0;           // blocks loaded or failed
  int64_t kv_tier_load_missing = 0;    // failed: gone
  int64_t kv_tier_load_corrupt = 0;    // failed: verification
  int64_t kv_tier_load_io_errors = 0;  // failed: I/O error
  int64_t kv_tier_stores_dropped = 0;
  int64_t kv_tier_disk_write_failures = 0;
  // Speculative decoding (vLLM's spec_decode counters).
  bool speculative = false;
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  int64_t num_preemptions = 0;
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  int64_t num_steps = 0;
  int64_t requests_finished_stop = 0;
  int64_t requests_finished_length = 0;
  int64_t requests_finished_abort = 0;
};

}  // namespace strata::engine
