// State shared by the server's handlers (server-internal). Lives on the loop thread: everything
// here is touched only there, except `engine` (thread-safe) and the immutable fields.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/rng.h"
#include "engine/engine_client.h"
#include "net/event_loop.h"
#include "net/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/server_config.h"
#include "server/structured_output.h"

namespace strata::server {

class Generation;
class WorkQueue;

struct ServerState {
  ServerConfig config;
  engine::EngineClient* engine = nullptr;
  net::EventLoop* loop = nullptr;
  const net::HttpServer* http = nullptr;  // its thread-safe counters
  // Request parsing, chat templates and tokenization of big bodies run here (null: inline). Its
  // tasks read only the immutable fields above (config, parse, tokenizer, ...).
  WorkQueue* work = nullptr;
  std::weak_ptr<bool> alive;  // expires when the server is destroyed
  // Tests: runs on the work thread before (false) and after (true) a request's parsing there.
  std::function<void(bool finished)> work_hook;
  std::shared_ptr<const Tokenizer> tokenizer;         // may be null
  std::shared_ptr<const ChatTemplate> chat_template;  // may be null
  ParseContext parse;                                 // points into the two above
  std::unique_ptr<ConstraintCompiler> constraints;    // structured outputs (with a tokenizer)
  int64_t max_model_len = 0;
  int32_t vocab_size = 0;
  bool priority_scheduling = false;
  ServerMetrics metrics;
  // Generation requests being answered, owned here until their engine streams are done.
  std::unordered_map<const Generation*, std::shared_ptr<Generation>> live;
  bool draining = false;       // shutting down: new requests get 503
  int64_t streams_paused = 0;  // streams waiting for their client to read (back-pressure)
  Rng id_rng;

  ServerState(ServerConfig c, int64_t max_model_len)
      : config(std::move(c)),
        max_model_len(max_model_len),
        metrics(config.model_name(), max_model_len) {}

  // "cmpl-" + 32 hex digits, unique per process.
  std::string new_id(const char* prefix);
};

}  // namespace strata::server
