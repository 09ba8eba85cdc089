// Request routing and the small endpoints (server-internal): API-key checks, 404/405, /health,
// /version, /metrics, /v1/models, /tokenize, /detokenize, and the hand-off of completion and chat
// requests to Generation.
#pragma once

#include <cstddef>

#include "net/http_server.h"
#include "server/server_state.h"

namespace strata::server {

struct Routes {
  ServerState* st;

  void dispatch(net::HttpRequest req, net::ResponseWriter w, size_t num_connections);

 private:
  bool authorized(const net::HttpRequest& req) const;
  void generate(ApiKind kind, const net::HttpRequest& req, net::ResponseWriter w);
  net::HttpResponse models(const std::string& only) const;
  net::HttpResponse tokenize(const net::HttpRequest& req) const;
  net::HttpResponse detokenize(const net::HttpRequest& req) const;
  net::HttpResponse metrics(size_t num_connections) const;
};

}  // namespace strata::server
