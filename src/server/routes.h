// Request routing and the small endpoints (server-internal): API-key checks, 404/405, /health,
// /version, /metrics, /v1/models, /tokenize, /detokenize, and the hand-off of completion and chat
// requests to Generation.
#pragma once

#include <cstddef>

#include "net/http_server.h"
#include "server/server_state.h"
#include "server/work_queue.h"

namespace strata::server {

// Bodies up to this size are parsed on the loop thread (well under a millisecond); bigger ones on
// the server's WorkQueue, so that the loop keeps serving other connections meanwhile.
inline constexpr size_t kInlineBodyBytes = 16 * 1024;

struct Routes {
  ServerState* st;

  void dispatch(net::HttpRequest req, net::ResponseWriter w, size_t num_connections);

 private:
  bool authorized(const net::HttpRequest& req) const;
  void generate(ApiKind kind, net::HttpRequest req, net::ResponseWriter w);
  net::HttpResponse models(const std::string& only) const;
  // Both read only immutable state: they run on the work queue for big bodies.
  static net::HttpResponse tokenize(const ServerState* st, const std::string& body);
  static net::HttpResponse detokenize(const ServerState* st, const std::string& body);
  net::HttpResponse metrics(size_t num_connections) const;
};

// Runs `work()` (anything that grows with the body: JSON parsing, chat templates, tokenization),
// then `then(result)` on the loop thread: inline for bodies up to kInlineBodyBytes, otherwise
// `work` on st->work and `then` posted back (skipped if the server is gone by then).
template <typename Work, typename Then>
void run_off_loop(ServerState* st, size_t body_bytes, Work work, Then then) {
  if (body_bytes <= kInlineBodyBytes || st->work == nullptr) {
    then(work());
    return;
  }
  std::weak_ptr<bool> alive = st->alive;
  st->work->post([st, alive, work = std::move(work), then = std::move(then)]() mutable {
    if (st->work_hook) st->work_hook(false);
    auto result = work();
    if (st->work_hook) st->work_hook(true);
    st->loop->post([alive, result = std::move(result), then = std::move(then)]() mutable {
      if (!alive.expired()) then(std::move(result));
    });
  });
}

}  // namespace strata::server
