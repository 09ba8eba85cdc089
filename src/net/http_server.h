// An HTTP/1.1 server on an EventLoop: no thread per connection, keep-alive, Expect: 100-continue,
// size limits (413 for bodies over the limit, 431 for heads), streaming responses with chunked
// transfer encoding (server-sent events), per-connection write queues with back-pressure, a
// callback when the client goes away mid-response, and graceful shutdown.
//
// Threading: the handler runs on the loop thread. It may answer at once or keep the
// ResponseWriter and answer later from any thread; calls made off the loop thread are posted to
// it and applied in the order they were made (use one thread at a time per writer).
//
// Typical SSE use:
//   server.set_handler([&](HttpRequest req, ResponseWriter w) {
//     w.on_disconnect([id] { engine.abort(id); });
//     w.start_stream(200, sse_headers());
//     ... later, from any thread: w.write(sse_format(json)); ... w.end_stream();
//   });
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/status.h"
#include "net/event_loop.h"
#include "net/http_message.h"
#include "net/http_parser.h"

namespace strata::net {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0 picks a free port (see HttpServer::port())
  int backlog = 4096;
  HttpLimits limits;
  // A request's head and body must arrive within this many seconds of its first byte (408).
  double request_timeout_s = 60;
  // Idle keep-alive connections are closed after this many seconds.
  double keep_alive_timeout_s = 75;
  // Bytes queued on a connection at or above which ResponseWriter::writable() is false; on_drain
  // fires once the queue falls to a quarter of it.
  size_t write_high_watermark = 1u << 20;
  // Open connections beyond this get a 503 with Retry-After and are closed; 0 means no limit.
  size_t max_connections = 0;
  // SO_SNDBUF of accepted sockets (the kernel's share of a slow client's unread bytes); 0 keeps
  // the kernel's auto-tuned default (up to net.ipv4.tcp_wmem's maximum).
  int socket_send_buffer = 0;
  // Builds the responses the server sends by itself (400, 408, 413, 431, 500, 501, 503, 505).
  // Default: OpenAI-style JSON {"error": {"message", "type", "param", "code"}}.
  std::function<HttpResponse(int status, const std::string& message)> error_response;
};

// The default error_response: {"error": {"message": m, "type": "...Error", "param": null,
// "code": status}}.
HttpResponse default_error_response(int status, const std::string& message);

// Headers for an SSE stream: Content-Type: text/event-stream, Cache-Control: no-cache.
HttpHeaders sse_headers();

namespace detail {
class Connection;
struct Exchange;
}  // namespace detail

// The reply side of one request. Copyable handle; every copy refers to the same exchange. If all
// copies are dropped without a reply, the client gets a 500 (or, mid-stream, the connection is
// closed) so a connection never hangs.
class ResponseWriter {
 public:
  ResponseWriter() = default;
  explicit ResponseWriter(std::shared_ptr<detail::Exchange> ex) : ex_(std::move(ex)) {}

  // A complete response; Content-Length and Connection are set here.
  void send(HttpResponse response);
  // Starts a streamed response (chunked on HTTP/1.1; raw until close on HTTP/1.0).
  void start_stream(int status, HttpHeaders headers);
  // Queues one piece of a streamed response (one chunk). Empty data is ignored.
  void write(std::string data);
  // Ends a streamed response.
  void end_stream();
  // Closes the connection at once, without finishing the response.
  void abort();

  // `cb` runs once, on the loop thread, if the client disconnects (or the connection is closed
  // by shutdown) before the response is complete. Set it before starting a long response.
  void on_disconnect(std::function<void()> cb);
  // `cb` runs on the loop thread each time the write queue drains below the low watermark after
  // writable() was false.
  void on_drain(std::function<void()> cb);

  // Thread-safe snapshots.
  bool connected() const;
  size_t buffered_bytes() const;
  bool writable() const;
  bool valid() const { return ex_ != nullptr; }

 private:
  std::shared_ptr<detail::Exchange> ex_;
};

using HttpHandler = std::function<void(HttpRequest request, ResponseWriter writer)>;

class HttpServer {
 public:
  // `loop` must outlive the server. Destroy the server on the loop thread (or after run() ended).
  HttpServer(EventLoop* loop, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void set_handler(HttpHandler handler) { handler_ = std::move(handler); }
  // Binds and starts accepting (raises the open-file soft limit to the hard limit first).
  Status listen();
  int port() const { return port_; }
  const HttpServerOptions& options() const { return options_; }

  // Thread-safe. Stops accepting, closes idle connections, lets running responses finish (no
  // keep-alive after them) for up to `grace_s` seconds, then closes the rest (their
  // on_disconnect callbacks run) and calls `done` on the loop thread.
  void shutdown(double grace_s, std::function<void()> done);
  // Thread-safe. Stops accepting new connections.
  void stop_accepting();
  // Thread-safe. Closes every connection now.
  void close_all();

  // Open connections (not counting those being turned away by max_connections).
  size_t num_connections() const { return num_connections_.load(); }
  // Connections turned away by max_connections so far.
  uint64_t num_rejected_connections() const { return num_rejected_.load(); }
  // Requests whose response has not completed yet.
  size_t num_active() const { return num_active_.load(); }
  // Response bytes queued in the server (not yet taken by the kernel), all connections together.
  // Streams that respect ResponseWriter::writable() keep each connection's share near
  // write_high_watermark.
  size_t buffered_bytes() const { return buffered_bytes_.load(); }

 private:
  friend class detail::Connection;
  void on_accept_ready();
  void connection_closed(detail::Connection* conn);
  void exchange_done();
  void maybe_finish_shutdown();
  void do_stop_accepting();
  void do_close_all();

  EventLoop* loop_;
  HttpServerOptions options_;
  HttpHandler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  EventLoop::WatchId listen_watch_ = 0;
  bool accept_paused_ = false;
  bool draining_ = false;
  std::function<void()> shutdown_done_;
  EventLoop::TimerId shutdown_timer_ = 0;
  std::unordered_map<detail::Connection*, std::shared_ptr<detail::Connection>> connections_;
  std::unordered_set<detail::Connection*> rejecting_;  // in connections_, being turned away
  size_t num_open_ = 0;                                // connections_ minus rejecting_
  std::atomic<size_t> num_connections_{0};
  std::atomic<uint64_t> num_rejected_{0};
  std::atomic<size_t> num_active_{0};
  std::atomic<size_t> buffered_bytes_{0};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace strata::net
