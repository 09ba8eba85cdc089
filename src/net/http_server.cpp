#include "net/http_server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "core/json.h"
#include "core/logging.h"
#include "net/server_connection.h"
#include "net/socket.h"

namespace strata::net {

using detail::Connection;
using detail::Exchange;

HttpResponse default_error_response(int status, const std::string& message) {
  const char* type = "BadRequestError";
  switch (status) {
    case 401:
      type = "AuthenticationError";
      break;
    case 403:
      type = "PermissionDeniedError";
      break;
    case 404:
      type = "NotFoundError";
      break;
    case 405:
      type = "MethodNotAllowedError";
      break;
    case 408:
      type = "RequestTimeoutError";
      break;
    case 413:
      type = "RequestTooLargeError";
      break;
    case 429:
      type = "RateLimitError";
      break;
    case 501:
      type = "NotImplementedError";
      break;
    case 503:
      type = "ServiceUnavailableError";
      break;
    default:
      if (status >= 500) type = "InternalServerError";
  }
  Json body = {
      {"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}};
  return HttpResponse::json(status, body.dump(-1, ' ', false, Json::error_handler_t::replace));
}

HttpHeaders sse_headers() {
  HttpHeaders h;
  h.add("Content-Type", "text/event-stream; charset=utf-8");
  h.add("Cache-Control", "no-cache");
  return h;
}

// ---------------------------------------------------------------------------------------------
// ResponseWriter

namespace {
template <typename F>
void on_loop(const std::shared_ptr<Exchange>& ex, F&& fn) {
  if (ex->loop->in_loop_thread()) {
    fn();
  } else {
    ex->loop->post(std::forward<F>(fn));
  }
}
}  // namespace

void ResponseWriter::send(HttpResponse response) {
  if (!ex_) return;
  on_loop(ex_, [ex = ex_, r = std::move(response)]() mutable {
    ex->conn->send_response(ex->seq, std::move(r));
  });
}

void ResponseWriter::start_stream(int status, HttpHeaders headers) {
  if (!ex_) return;
  on_loop(ex_, [ex = ex_, status, h = std::move(headers)]() mutable {
    ex->conn->start_stream(ex->seq, status, std::move(h));
  });
}

void ResponseWriter::write(std::string data) {
  if (!ex_ || data.empty()) return;
  on_loop(ex_, [ex = ex_, d = std::move(data)]() mutable {
    ex->conn->write_chunk(ex->seq, std::move(d));
  });
}

void ResponseWriter::end_stream() {
  if (!ex_) return;
  on_loop(ex_, [ex = ex_] { ex->conn->end_stream(ex->seq); });
}

void ResponseWriter::abort() {
  if (!ex_) return;
  on_loop(ex_, [ex = ex_] { ex->conn->abort(ex->seq); });
}

void ResponseWriter::on_disconnect(std::function<void()> cb) {
  if (!ex_) return;
  on_loop(ex_, [ex = ex_, cb = std::move(cb)]() mutable {
    ex->conn->set_on_disconnect(ex, std::move(cb));
  });
}

void ResponseWriter::on_drain(std::function<void()> cb) {
  if (!ex_) return;
  on_loop(ex_, [ex = ex_, cb = std::move(cb)]() mutable {
    if (!ex->finished.load()) ex->on_drain = std::move(cb);
  });
}

bool ResponseWriter::connected() const {
  return ex_ && !ex_->conn->closed();
}
size_t ResponseWriter::buffered_bytes() const {
  return ex_ ? ex_->conn->buffered() : 0;
}
bool ResponseWriter::writable() const {
  return ex_ && !ex_->conn->closed() && ex_->conn->buffered() < ex_->conn->high_watermark();
}

// ---------------------------------------------------------------------------------------------
// HttpServer

HttpServer::HttpServer(EventLoop* loop, HttpServerOptions options)
    : loop_(loop), options_(std::move(options)) {}

HttpServer::~HttpServer() {
  *alive_ = false;
  if (shutdown_timer_ != 0) loop_->cancel(shutdown_timer_);
  do_stop_accepting();
  auto conns = connections_;
  connections_.clear();
  for (auto& [ptr, conn] : conns) {
    conn->detach_server();
    conn->close_connection();
  }
}

Status HttpServer::listen() {
  uint64_t limit = raise_open_file_limit();
  if (limit > 0 && limit < 2100) {
    STRATA_LOG(WARNING) << "open-file limit is " << limit << "; fewer than ~" << limit - 50
                        << " concurrent connections fit (raise it with `ulimit -n`)";
  }
  auto fd = listen_tcp(options_.host, options_.port, options_.backlog, &port_);
  if (!fd.ok()) return fd.status();
  listen_fd_ = *fd;
  listen_watch_ = loop_->watch(listen_fd_, EPOLLIN, [this](uint32_t) { on_accept_ready(); });
  if (listen_watch_ == 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    return unavailable("cannot watch the listening socket");
  }
  return ok_status();
}

void HttpServer::on_accept_ready() {
  while (listen_fd_ >= 0) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: pause accepting briefly instead of spinning on a readable socket.
        STRATA_LOG(WARNING) << "cannot accept a connection: " << errno_text(errno)
                            << "; pausing accepts for 100 ms";
        if (!accept_paused_) {
          accept_paused_ = true;
          loop_->unwatch(listen_watch_);
          listen_watch_ = 0;
          std::weak_ptr<bool> alive = alive_;
          loop_->run_after(0.1, [this, alive] {
            if (alive.expired() || listen_fd_ < 0) return;
            accept_paused_ = false;
            listen_watch_ =
                loop_->watch(listen_fd_, EPOLLIN, [this](uint32_t) { on_accept_ready(); });
          });
        }
      }
      return;
    }
    set_nodelay(fd);
    if (options_.socket_send_buffer > 0) {
      int v = options_.socket_send_buffer;
      (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
    }
    if (draining_) {
      ::close(fd);
      continue;
    }
    const bool over = options_.max_connections > 0 && num_open_ >= options_.max_connections;
    auto conn = std::make_shared<Connection>(this, loop_, fd);
    connections_.emplace(conn.get(), conn);
    if (over) {
      // Answered 503 + Retry-After and closed politely (the request, already on its way, is read
      // and dropped, so that the close does not reset the connection and lose the answer).
      // Counted apart: a burst of these cannot hold anyone else out.
      num_rejected_++;
      rejecting_.insert(conn.get());
      conn->start();
      conn->reject(503, "the server has too many open connections (" +
                            std::to_string(options_.max_connections) + "); retry later");
      continue;
    }
    num_open_++;
    num_connections_ = num_open_;
    conn->start();
  }
}

void HttpServer::connection_closed(Connection* conn) {
  if (connections_.erase(conn) == 0) return;
  if (rejecting_.erase(conn) == 0) num_open_--;
  num_connections_ = num_open_;
  maybe_finish_shutdown();
}

void HttpServer::exchange_done() {
  if (num_active_ > 0) num_active_--;
}

void HttpServer::maybe_finish_shutdown() {
  if (!draining_ || !connections_.empty() || !shutdown_done_) return;
  if (shutdown_timer_ != 0) loop_->cancel(shutdown_timer_);
  shutdown_timer_ = 0;
  auto done = std::move(shutdown_done_);
  shutdown_done_ = nullptr;
  loop_->post(std::move(done));
}

void HttpServer::do_stop_accepting() {
  if (listen_watch_ != 0) loop_->unwatch(listen_watch_);
  listen_watch_ = 0;
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void HttpServer::stop_accepting() {
  if (loop_->in_loop_thread()) {
    do_stop_accepting();
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  loop_->post([this, alive] {
    if (!alive.expired()) do_stop_accepting();
  });
}

void HttpServer::do_close_all() {
  std::vector<std::shared_ptr<Connection>> conns;
  for (auto& [ptr, conn] : connections_) conns.push_back(conn);
  for (auto& c : conns) c->close_connection();
}

void HttpServer::close_all() {
  if (loop_->in_loop_thread()) {
    do_close_all();
    return;
  }
  std::weak_ptr<bool> alive = alive_;
  loop_->post([this, alive] {
    if (!alive.expired()) do_close_all();
  });
}

void HttpServer::shutdown(double grace_s, std::function<void()> done) {
  std::weak_ptr<bool> alive = alive_;
  auto run = [this, alive, grace_s, done = std::move(done)]() mutable {
    if (alive.expired()) return;
    draining_ = true;
    shutdown_done_ = done ? std::move(done) : [] {};
    do_stop_accepting();
    std::vector<std::shared_ptr<Connection>> idle;
    for (auto& [ptr, conn] : connections_) {
      if (conn->idle()) idle.push_back(conn);
    }
    for (auto& c : idle) c->close_connection();
    if (!connections_.empty()) {
      shutdown_timer_ = loop_->run_after(grace_s, [this, alive] {
        if (alive.expired()) return;
        shutdown_timer_ = 0;
        do_close_all();
      });
    }
    maybe_finish_shutdown();
  };
  if (loop_->in_loop_thread()) {
    run();
  } else {
    loop_->post(std::move(run));
  }
}

}  // namespace strata::net
