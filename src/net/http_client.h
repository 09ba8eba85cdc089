// An HTTP/1.1 client on an EventLoop: many concurrent requests on one thread, keep-alive
// connection reuse, streamed bodies with a receive timestamp per read, timeouts, and clear errors
// for refused connections, resets and truncated responses. HTTP error statuses are not transport
// errors: they arrive as complete responses and the caller decides.
//
// All methods run on the loop thread. Callbacks may start or cancel requests but must not
// destroy the client.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "net/event_loop.h"
#include "net/http_message.h"
#include "net/http_parser.h"
#include "net/socket.h"
#include "net/url.h"

namespace strata::net {

struct HttpClientOptions {
  HttpLimits limits;  // max_body_bytes bounds bodies that are not streamed
  double connect_timeout_s = 10;
  size_t max_idle_per_host = 4096;
  std::string user_agent = "strata";
};

struct ClientRequest {
  std::string method = "GET";
  Url url;
  HttpHeaders headers;  // Host, Content-Length and User-Agent are added when absent
  std::string body;
  double timeout_s = 0;  // whole request, from start to last byte; 0 = no limit
};

struct ClientResponse {
  int status = 0;
  std::string reason;
  HttpHeaders headers;
  std::string body;  // empty when the body was streamed to on_data
};

struct ClientCallbacks {
  // Once, when the response head has arrived (body empty).
  std::function<void(const ClientResponse& head)> on_head;
  // When set, body bytes (de-chunked) go here as they arrive, with the now_seconds() time they
  // were read from the socket, instead of into ClientResponse::body.
  std::function<void(std::string_view data, double recv_time)> on_data;
  // Exactly once (unless cancelled): ok with the response, or a transport error.
  std::function<void(Status status, ClientResponse response)> on_done;
};

class HttpClient {
 public:
  using RequestId = uint64_t;

  HttpClient(EventLoop* loop, HttpClientOptions options = {});
  ~HttpClient();  // closes everything; pending on_done callbacks are not called
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts a request. on_done never runs inside start() itself (errors are posted).
  RequestId start(ClientRequest request, ClientCallbacks callbacks);
  // Cancels a request in flight; its on_done is not called. Unknown ids are ignored.
  void cancel(RequestId id);
  size_t num_in_flight() const { return exchanges_.size(); }
  size_t num_idle_connections() const;

 private:
  struct Exchange;
  struct IdleConn {
    int fd;
    EventLoop::WatchId watch;
  };
  void begin(Exchange* ex);
  void on_events(RequestId id, uint32_t events);
  void on_connected(Exchange* ex);
  void do_write(Exchange* ex);
  void do_read(Exchange* ex);
  void fail(Exchange* ex, Status status);
  void complete(Exchange* ex);
  bool retry_on_fresh_connection(Exchange* ex);
  void release_connection(Exchange* ex, bool reusable);
  void drop_idle(const std::string& key, int fd);
  Result<SocketAddress> resolve(const Url& url);

  EventLoop* loop_;
  HttpClientOptions options_;
  RequestId next_id_ = 1;
  std::unordered_map<RequestId, std::unique_ptr<Exchange>> exchanges_;
  std::unordered_map<std::string, std::vector<IdleConn>> idle_;
  std::unordered_map<std::string, SocketAddress> resolved_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace strata::net
