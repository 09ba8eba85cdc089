// Sends the benchmark's requests and measures them, all on one thread: arrivals follow the
// configured rate (see arrivals.h), at most --max-concurrency run at once, and each streamed
// response is timed per SSE event (the time its bytes were read from the socket). A request
// fails (never hangs) on a transport error, an HTTP error status, an error event, a stream
// without any token chunk, or the per-request timeout; its error text is kept.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "bench/metrics.h"
#include "bench/openai_protocol.h"
#include "bench/progress.h"
#include "core/status.h"
#include "net/url.h"

namespace strata::bench {

struct RunnerOptions {
  net::Url api_url;  // the endpoint, e.g. http://127.0.0.1:8000/v1/completions
  Backend backend = Backend::kCompletions;
  std::vector<std::pair<std::string, std::string>> headers;       // extra request headers
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0 = unlimited
  double request_timeout_s = 6 * 3600;
  uint64_t seed = 0;
};

struct RunResult {
  std::vector<RequestOutput> outputs;  // in request order
  double duration_s = 0;               // first send to last completion
};

// Sends payloads[i] (a JSON body) for request i whose prompt has prompt_lens[i] tokens.
// `progress` may be null.
Result<RunResult> run_requests(const RunnerOptions& options,
                               const std::vector<std::string>& payloads,
                               const std::vector<int64_t>& prompt_lens, Progress* progress);

}  // namespace strata::bench
