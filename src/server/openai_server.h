// `strata serve`'s HTTP front end: OpenAI's /v1/completions, /v1/chat/completions and
// /v1/models, vLLM's /tokenize, /detokenize, /health, /version and /metrics, API-key checks,
// queue limits, the periodic stats line and graceful shutdown. Runs on one event loop (no thread
// per connection) and talks to the engine only through EngineClient; request bodies over 16 KiB
// are parsed, templated and tokenized on a few work threads, so the loop stays responsive.
//
// Usage:
//   auto server = OpenAiServer::create(config, engine_client, loop);   // loop thread
//   (*server)->start();                       // listens; (*server)->port() is the bound port
//   loop->run();
//   ... from any thread: server->shutdown([&] { loop->stop(); });
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include "core/status.h"
#include "engine/engine_client.h"
#include "net/event_loop.h"
#include "net/http_server.h"
#include "server/server_config.h"

namespace strata::server {

struct ServerState;
class StatsLogger;
class WorkQueue;

class OpenAiServer {
 public:
  // `engine` and `loop` must outlive the server; create, start and destroy it on the loop thread
  // (or while the loop is not running). Fails when --chat-template cannot be loaded.
  static Result<std::unique_ptr<OpenAiServer>> create(ServerConfig config,
                                                      engine::EngineClient* engine,
                                                      net::EventLoop* loop);
  ~OpenAiServer();

  // Binds and starts accepting; logs the address.
  Status start();
  int port() const;

  // Thread-safe, once. Stops accepting, answers new requests with 503, lets in-flight requests
  // finish for config.shutdown_timeout seconds, then aborts the rest (streams get an error event
  // and [DONE], other requests a 503) and shuts the engine down. `done` runs on the loop thread
  // when every connection is closed.
  void shutdown(std::function<void()> done);

  // Handles one request (the HTTP server's handler; public for tests that drive it directly).
  void handle(net::HttpRequest request, net::ResponseWriter writer);

  // Tests: `hook(false)` runs on a work thread before a big request body is parsed (and
  // tokenized) there, `hook(true)` after, before the result goes back to the event loop. Set it
  // before start().
  void set_work_hook(std::function<void(bool finished)> hook);

 private:
  OpenAiServer() = default;
  void schedule_stats();
  void log_stats();

  std::unique_ptr<ServerState> state_;
  std::unique_ptr<WorkQueue> work_;  // destroyed (joined) first: its tasks read state_
  std::unique_ptr<net::HttpServer> http_;
  std::unique_ptr<StatsLogger> stats_;
  net::EventLoop::TimerId stats_timer_ = 0;
  std::thread engine_stopper_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace strata::server
