#include "net/server_connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <exception>

#include "core/logging.h"
#include "net/http_server.h"

namespace strata::net::detail {

namespace {
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kMaxPipelined = 256 * 1024;  // input buffered while a response is in progress

std::string hex_size(size_t n) {
  char buf[24];
  int len = snprintf(buf, sizeof(buf), "%zx\r\n", n);
  return std::string(buf, static_cast<size_t>(len));
}
}  // namespace

Exchange::~Exchange() {
  if (finished.load() || conn == nullptr || loop == nullptr) return;
  // No writer is left: answer or close on the loop thread.
  loop->post([c = conn, s = seq] { c->abandon(s); });
}

Connection::Connection(HttpServer* server, EventLoop* loop, int fd)
    : server_(server),
      loop_(loop),
      fd_(fd),
      parser_(server->options().limits),
      high_watermark_(server->options().write_high_watermark) {}

Connection::~Connection() {
  if (fd_ >= 0 && state_ != State::kClosed) ::close(fd_);
}

void Connection::start() {
  std::weak_ptr<Connection> weak = weak_from_this();
  watch_ = loop_->watch(fd_, EPOLLIN | EPOLLRDHUP, [weak](uint32_t ev) {
    if (auto self = weak.lock()) self->on_events(ev);
  });
  if (watch_ == 0) {
    close_connection();
    return;
  }
  arm_timer(server_->options().keep_alive_timeout_s);
}

void Connection::arm_timer(double seconds) {
  if (timer_ != 0) loop_->cancel(timer_);
  timer_ = 0;
  if (seconds <= 0) return;
  std::weak_ptr<Connection> weak = weak_from_this();
  timer_ = loop_->run_after(seconds, [weak] {
    if (auto self = weak.lock()) {
      self->timer_ = 0;
      self->on_timer();
    }
  });
}

void Connection::on_timer() {
  if (state_ == State::kClosing) {
    close_connection();
    return;
  }
  if (state_ != State::kReading) return;
  if (request_started_) {
    send_error(408, "the request was not received completely in time");
  } else {
    close_connection();
  }
}

void Connection::update_interest() {
  if (state_ == State::kClosed) return;
  uint32_t ev = EPOLLRDHUP;
  if (!read_paused_) ev |= EPOLLIN;
  if (want_write_) ev |= EPOLLOUT;
  loop_->modify(watch_, ev);
}

void Connection::on_events(uint32_t events) {
  auto self = shared_from_this();
  if (events & EPOLLERR) {
    close_connection();
    return;
  }
  if (events & EPOLLOUT) flush();
  if (state_ == State::kClosed) return;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) do_read();
}

void Connection::do_read() {
  char buf[kReadChunk];
  while (state_ != State::kClosed) {
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) {
      if (state_ == State::kClosing) continue;  // discard: we are closing anyway
      if (state_ == State::kReading) {
        if (!request_started_) {
          request_started_ = true;
          arm_timer(server_ ? server_->options().request_timeout_s : 0);
        }
        in_.append(buf, static_cast<size_t>(n));
        process_input();
      } else {
        in_.append(buf, static_cast<size_t>(n));
        if (in_.size() > kMaxPipelined) {
          read_paused_ = true;
          update_interest();
          return;
        }
      }
      continue;
    }
    if (n == 0) {  // the client closed its side: it is gone
      close_connection();
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    close_connection();  // ECONNRESET and friends
    return;
  }
}

void Connection::process_input() {
  while (state_ == State::kReading && !in_.empty()) {
    if (!request_started_) {
      request_started_ = true;
      arm_timer(server_ ? server_->options().request_timeout_s : 0);
    }
    size_t n = parser_.feed(in_);
    in_.erase(0, n);
    if (parser_.failed()) {
      send_error(parser_.error_status(), parser_.error_message());
      return;
    }
    if (parser_.headers_complete() && parser_.expects_continue() && !continue_sent_ &&
        !parser_.complete()) {
      continue_sent_ = true;
      queue("HTTP/1.1 100 Continue\r\n\r\n");
    }
    if (parser_.complete()) {
      dispatch();
      return;
    }
    if (n == 0) return;
  }
}

void Connection::send_error(int status, const std::string& message) {
  if (state_ == State::kClosed || server_ == nullptr) {
    close_connection();
    return;
  }
  const auto& opts = server_->options();
  HttpResponse r = opts.error_response ? opts.error_response(status, message)
                                       : default_error_response(status, message);
  r.status = status;
  r.headers.set("Content-Length", std::to_string(r.body.size()));
  r.headers.set("Connection", "close");
  if (status == 503 && !r.headers.has("Retry-After")) r.headers.set("Retry-After", "1");
  state_ = State::kClosing;
  if (timer_ != 0) loop_->cancel(timer_);
  timer_ = 0;
  queue(serialize_response_head(r.status, r.reason, r.headers) + r.body);
  if (state_ != State::kClosed && out_off_ == out_.size()) finish_closing();
}

void Connection::finish_closing() {
  if (state_ != State::kClosing || shut_wr_) return;
  shut_wr_ = true;
  ::shutdown(fd_, SHUT_WR);
  if (read_paused_) {
    read_paused_ = false;
    update_interest();
  }
  arm_timer(1.0);
}

void Connection::dispatch() {
  if (server_ == nullptr) {
    close_connection();
    return;
  }
  if (timer_ != 0) loop_->cancel(timer_);
  timer_ = 0;
  HttpRequest request = std::move(parser_.request());
  parser_.reset();
  request_started_ = false;
  continue_sent_ = false;
  state_ = State::kHandling;
  keep_alive_ = request.keep_alive() && !server_->draining_;
  version_minor_ = request.version_minor;
  head_request_ = request.method == "HEAD";
  auto ex = std::make_shared<Exchange>();
  ex->conn = shared_from_this();
  ex->loop = loop_;
  ex->seq = ++seq_;
  current_ = ex;
  exchange_open_ = true;
  server_->num_active_++;
  ResponseWriter writer(ex);
  ex.reset();
  if (!server_->handler_) {
    writer.send(default_error_response(404, "no handler is installed"));
    return;
  }
  try {
    server_->handler_(std::move(request), writer);
  } catch (const std::exception& e) {
    STRATA_LOG(ERROR) << "HTTP handler threw: " << e.what();
    if (state_ == State::kHandling) {
      writer.send(default_error_response(500, "internal error while handling the request"));
    } else {
      writer.abort();
    }
  } catch (...) {
    STRATA_LOG(ERROR) << "HTTP handler threw a non-standard exception";
    writer.abort();
  }
}

void Connection::send_response(uint64_t seq, HttpResponse r) {
  if (!live(seq) || state_ != State::kHandling) return;
  bool no_body =
      head_request_ || r.status == 204 || r.status == 304 || (r.status >= 100 && r.status < 200);
  if (r.headers.has_token("Connection", "close")) keep_alive_ = false;
  if (r.status != 204 && r.status != 304) {
    r.headers.set("Content-Length", std::to_string(r.body.size()));
  }
  r.headers.remove("Transfer-Encoding");
  if (!keep_alive_) {
    r.headers.set("Connection", "close");
  } else if (version_minor_ == 0) {
    r.headers.set("Connection", "keep-alive");
  }
  std::string bytes = serialize_response_head(r.status, r.reason, r.headers, version_minor_);
  if (!no_body) bytes += r.body;
  queue(bytes);
  finish_exchange();
}

void Connection::start_stream(uint64_t seq, int status, HttpHeaders headers) {
  if (!live(seq) || state_ != State::kHandling) return;
  headers.remove("Content-Length");
  if (headers.has_token("Connection", "close")) keep_alive_ = false;
  if (version_minor_ >= 1) {
    chunked_ = true;
    headers.set("Transfer-Encoding", "chunked");
  } else {
    chunked_ = false;
    keep_alive_ = false;
    headers.remove("Transfer-Encoding");
  }
  headers.set("Connection", keep_alive_ ? "keep-alive" : "close");
  state_ = State::kStreaming;
  queue(serialize_response_head(status, "", headers, version_minor_));
}

void Connection::write_chunk(uint64_t seq, std::string data) {
  if (!live(seq) || state_ != State::kStreaming || data.empty() || head_request_) return;
  if (chunked_) {
    std::string framed = hex_size(data.size());
    framed.reserve(framed.size() + data.size() + 2);
    framed += data;
    framed += "\r\n";
    queue(framed);
  } else {
    queue(data);
  }
}

void Connection::end_stream(uint64_t seq) {
  if (!live(seq) || state_ != State::kStreaming) return;
  if (chunked_ && !head_request_) queue("0\r\n\r\n");
  if (state_ == State::kClosed) return;
  finish_exchange();
}

void Connection::abort(uint64_t seq) {
  if (!live(seq)) return;
  exchange_open_ = false;
  if (auto ex = current_.lock()) {
    ex->finished = true;
    ex->on_disconnect = nullptr;
    ex->on_drain = nullptr;
  }
  if (server_) server_->exchange_done();
  close_connection();
}

void Connection::abandon(uint64_t seq) {
  if (!live(seq)) return;
  if (state_ == State::kHandling) {
    STRATA_LOG(WARNING) << "HTTP handler dropped a request without answering it";
    send_response(seq, default_error_response(500, "the server dropped the request"));
  } else {
    abort(seq);
  }
}

void Connection::set_on_disconnect(const std::shared_ptr<Exchange>& ex, std::function<void()> cb) {
  if (ex->disconnected) {
    loop_->post(std::move(cb));  // the client left before the callback was set
  } else if (!ex->finished.load()) {
    ex->on_disconnect = std::move(cb);
  }
}

void Connection::finish_exchange() {
  exchange_open_ = false;
  if (auto ex = current_.lock()) {
    ex->finished = true;
    // Callbacks often hold the writer (and so the exchange): drop them to break the cycle.
    ex->on_disconnect = nullptr;
    ex->on_drain = nullptr;
  }
  current_.reset();
  bool draining = server_ == nullptr || server_->draining_;
  if (server_) server_->exchange_done();
  if (state_ == State::kClosed) return;
  if (keep_alive_ && !draining) {
    state_ = State::kReading;
    chunked_ = false;
    arm_timer(server_->options().keep_alive_timeout_s);
    if (read_paused_) {
      read_paused_ = false;
      update_interest();
    }
    if (!in_.empty()) {
      std::weak_ptr<Connection> weak = weak_from_this();
      loop_->post([weak] {
        if (auto self = weak.lock()) self->process_input();
      });
    }
  } else {
    state_ = State::kClosing;
    if (out_off_ == out_.size()) finish_closing();
  }
}

void Connection::queue(std::string_view data) {
  if (state_ == State::kClosed || data.empty()) return;
  if (out_off_ == out_.size() && !want_write_) {
    out_.clear();
    out_off_ = 0;
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      close_connection();
      return;
    }
    if (data.empty()) return;
  }
  out_.append(data);
  set_buffered(out_.size() - out_off_);
  if (buffered_ >= high_watermark_) above_high_ = true;
  if (!want_write_) {
    want_write_ = true;
    update_interest();
  }
}

void Connection::flush() {
  auto self = shared_from_this();
  while (out_off_ < out_.size()) {
    ssize_t n = ::send(fd_, out_.data() + out_off_, out_.size() - out_off_, MSG_NOSIGNAL);
    if (n > 0) {
      out_off_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    close_connection();
    return;
  }
  if (out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
    if (want_write_) {
      want_write_ = false;
      update_interest();
    }
  } else if (out_off_ > (1u << 20)) {
    out_.erase(0, out_off_);
    out_off_ = 0;
  }
  set_buffered(out_.size() - out_off_);
  if (above_high_ && buffered_ <= high_watermark_ / 4) {
    above_high_ = false;
    if (auto ex = current_.lock(); ex && ex->on_drain && exchange_open_) {
      auto cb = ex->on_drain;  // a copy: the callback may finish the exchange and clear it
      cb();
    }
  }
  if (state_ == State::kClosing && out_off_ == out_.size()) finish_closing();
}

void Connection::set_buffered(size_t bytes) {
  const size_t old = buffered_.exchange(bytes);
  if (server_ != nullptr && old != bytes) {
    if (bytes > old)
      server_->buffered_bytes_ += bytes - old;
    else
      server_->buffered_bytes_ -= old - bytes;
  }
}

void Connection::close_connection() {
  if (state_ == State::kClosed) return;
  auto self = shared_from_this();
  state_ = State::kClosed;
  closed_ = true;
  if (timer_ != 0) loop_->cancel(timer_);
  timer_ = 0;
  if (watch_ != 0) loop_->unwatch(watch_);
  watch_ = 0;
  ::close(fd_);
  fd_ = -1;
  out_.clear();
  out_off_ = 0;
  set_buffered(0);
  bool notify = exchange_open_;
  exchange_open_ = false;
  std::shared_ptr<Exchange> ex = current_.lock();
  current_.reset();
  std::function<void()> on_disconnect;
  if (ex) {
    ex->finished = true;
    ex->disconnected = notify;
    on_disconnect = std::move(ex->on_disconnect);
    ex->on_disconnect = nullptr;
    ex->on_drain = nullptr;
  }
  HttpServer* server = server_;
  if (notify && server) server->exchange_done();
  if (server) server->connection_closed(this);
  if (notify && on_disconnect) on_disconnect();
}

}  // namespace strata::net::detail
