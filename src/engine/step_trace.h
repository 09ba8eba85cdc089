// The engine's per-step trace (--step-trace PATH, STRATA_STEP_TRACE): one JSON object per line,
// one line per executed step, appended to PATH, to see where time goes (TTFT under concurrency:
// queueing, prefill chunking, step overhead, detokenization). scripts/step_trace_summary.py
// summarises a file. A line:
//
//   {"step": 12, "t": 8312.0412, "dur": 0.0213,
//    "phases": {"wait": 0.0004, "between": 0.00002, "schedule": 0.00003, "prepare": 0.00005,
//               "forward": 0.0198, "sample": 0.0009, "output": 0.0001},
//    "running": 8, "waiting": 3, "prefill_requests": 1, "prefill_tokens": 128,
//    "decode_tokens": 7,
//    "events": [{"id": "cmpl-1", "tokens": 128, "context": 0, "sample": true, "prefill": true,
//                "first_scheduled": true, "arrival": 8312.0301, "first_token": true},
//               {"id": "cmpl-0", "tokens": 1, "context": 40, "sample": true}]}
//
// step: consecutive from 0 over the engine's executed steps (a plan that schedules nothing is not
// a step). t: the step's start on the engine's clock (now_seconds(), steady, in seconds). dur:
// from t to the end of output processing. phases, in seconds, all >= 0:
//   wait      the engine thread blocked waiting for requests since the previous step
//             (EngineClient's queue; 0 when the engine is driven directly)
//   between   the rest of the time since the previous step ended (adding requests, aborts,
//             stats)
//   schedule  Scheduler::schedule()
//   prepare   everything before the forward pass: the engine's new-request data, the executor
//             and the worker's bookkeeping, the model runner's block tables and batch layout
//   forward   the model's forward pass (to the logits of the sampled rows)
//   sample    sampling, and prompt logprobs for the requests that asked for them
//   output    Scheduler::update, detokenization, stop strings and the chunks to the streams
// comm (only with several ranks): the seconds of forward and sample that rank 0 spent in its
// tensor/pipeline-parallel groups' calls (all-gathers, sends, waits for slower ranks).
// running / waiting: the scheduler's queues after schedule(). prefill_requests / prefill_tokens:
// entries of this step with prompt tokens still to compute, and how many of those ran;
// decode_tokens: the other scheduled tokens. events: one per scheduled entry ("tokens" it ran,
// "context" the tokens already in its KV cache before them, "sample" when the step samples a token
// for it, "prefill" when they were prompt tokens), with "first_scheduled" and "arrival" (engine
// clock) the first time a choice is scheduled, and "first_token" when the step produced its first
// output token. "choice" is the index for requests with n > 1.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::engine {

struct StepTraceEvent {
  std::string request_id;
  int choice = -1;  // -1: the request has one choice
  int64_t tokens = 0;
  int64_t context = 0;  // tokens in the KV cache before this step's
  bool sample = false;  // the step samples a token for it
  bool prefill = false;
  bool first_scheduled = false;
  double arrival = 0;  // when first_scheduled
  bool first_token = false;
};

struct StepTraceRecord {
  int64_t step = 0;
  double start = 0, duration = 0;
  double wait = 0, between = 0, schedule = 0, prepare = 0, forward = 0, sample = 0, output = 0;
  double comm = 0;  // of forward + sample: in tensor/pipeline-parallel calls (0: one process)
  int64_t running = 0, waiting = 0;
  int64_t prefill_requests = 0, prefill_tokens = 0, decode_tokens = 0;
  std::vector<StepTraceEvent> events;
  void clear_events() { events.clear(); }
};

// Appends records to a file through a buffer: flushed every `flush_every` records, by flush(),
// and when destroyed. Single-threaded (the engine thread).
class StepTraceWriter {
 public:
  // Opens `path` for appending; errors name the path and the reason.
  static Result<std::unique_ptr<StepTraceWriter>> open(const std::string& path,
                                                       int flush_every = 64);
  ~StepTraceWriter();
  StepTraceWriter(const StepTraceWriter&) = delete;
  StepTraceWriter& operator=(const StepTraceWriter&) = delete;

  void write(const StepTraceRecord& r);
  void flush();
  const std::string& path() const { return path_; }

 private:
  StepTraceWriter() = default;
  std::string path_;
  std::FILE* file_ = nullptr;
  int flush_every_ = 64;
  int unflushed_ = 0;
  std::string line_;  // reused
  bool failed_ = false;
};

}  // namespace strata::engine
