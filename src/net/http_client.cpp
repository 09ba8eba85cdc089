#include "net/http_client.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "core/clock.h"

namespace strata::net {

struct HttpClient::Exchange {
  RequestId id = 0;
  ClientRequest request;
  ClientCallbacks cb;
  std::string key;
  int fd = -1;
  EventLoop::WatchId watch = 0;
  EventLoop::TimerId timer = 0;
  EventLoop::TimerId connect_timer = 0;
  bool connecting = false;
  bool reused = false;
  bool retried = false;
  std::string out;
  size_t out_off = 0;
  HttpResponseParser parser;
  ClientResponse response;
  bool head_reported = false;
  size_t bytes_received = 0;
  std::string scratch;
};

namespace {
constexpr size_t kReadChunk = 64 * 1024;

std::string build_request_bytes(const ClientRequest& r, const std::string& user_agent) {
  std::string out;
  out.reserve(256 + r.body.size());
  out += r.method;
  out += ' ';
  out += r.url.target.empty() ? "/" : r.url.target;
  out += " HTTP/1.1\r\n";
  if (!r.headers.has("Host")) out += "Host: " + r.url.authority() + "\r\n";
  if (!r.headers.has("User-Agent") && !user_agent.empty())
    out += "User-Agent: " + user_agent + "\r\n";
  bool has_body = !r.body.empty() || r.method == "POST" || r.method == "PUT" || r.method == "PATCH";
  if (has_body && !r.headers.has("Content-Length") && !r.headers.has("Transfer-Encoding")) {
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  }
  for (const auto& [n, v] : r.headers.fields()) {
    out += n;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  out += "\r\n";
  out += r.body;
  return out;
}

std::string describe(const ClientRequest& r) {
  return r.method + " " + r.url.to_string();
}
}  // namespace

HttpClient::HttpClient(EventLoop* loop, HttpClientOptions options)
    : loop_(loop), options_(std::move(options)) {}

HttpClient::~HttpClient() {
  *alive_ = false;
  for (auto& [id, ex] : exchanges_) {
    if (ex->timer) loop_->cancel(ex->timer);
    if (ex->connect_timer) loop_->cancel(ex->connect_timer);
    if (ex->watch) loop_->unwatch(ex->watch);
    if (ex->fd >= 0) ::close(ex->fd);
  }
  for (auto& [key, conns] : idle_) {
    for (auto& c : conns) {
      loop_->unwatch(c.watch);
      ::close(c.fd);
    }
  }
}

size_t HttpClient::num_idle_connections() const {
  size_t n = 0;
  for (const auto& [k, v] : idle_) n += v.size();
  return n;
}

Result<SocketAddress> HttpClient::resolve(const Url& url) {
  std::string key = url.authority();
  auto it = resolved_.find(key);
  if (it != resolved_.end()) return it->second;
  auto addr = resolve_address(url.host, url.port);
  if (addr.ok()) resolved_.emplace(key, *addr);
  return addr;
}

HttpClient::RequestId HttpClient::start(ClientRequest request, ClientCallbacks callbacks) {
  auto ex = std::make_unique<Exchange>();
  ex->id = next_id_++;
  ex->parser = HttpResponseParser(options_.limits);
  ex->parser.set_head_request(request.method == "HEAD");
  ex->key = request.url.authority();
  ex->out = build_request_bytes(request, options_.user_agent);
  ex->request = std::move(request);
  ex->cb = std::move(callbacks);
  Exchange* raw = ex.get();
  RequestId id = raw->id;
  exchanges_.emplace(id, std::move(ex));
  std::weak_ptr<bool> alive = alive_;
  if (raw->request.timeout_s > 0) {
    raw->timer = loop_->run_after(raw->request.timeout_s, [this, alive, id] {
      if (alive.expired()) return;
      auto it = exchanges_.find(id);
      if (it == exchanges_.end()) return;
      it->second->timer = 0;
      char buf[64];
      snprintf(buf, sizeof(buf), "%.3g", it->second->request.timeout_s);
      fail(it->second.get(),
           unavailable(describe(it->second->request) + " timed out after " + buf + " s" +
                       (it->second->head_reported ? " (the response was still streaming)"
                                                  : " (no response yet)")));
    });
  }
  begin(raw);
  return id;
}

void HttpClient::begin(Exchange* ex) {
  RequestId id = ex->id;
  std::weak_ptr<bool> alive = alive_;
  auto& pool = idle_[ex->key];
  if (!ex->retried && !pool.empty()) {
    IdleConn c = pool.back();
    pool.pop_back();
    loop_->unwatch(c.watch);
    ex->fd = c.fd;
    ex->reused = true;
    ex->connecting = false;
  } else {
    auto addr = resolve(ex->request.url);
    Result<int> fd = addr.ok() ? start_connect(*addr) : Result<int>(addr.status());
    if (!fd.ok()) {
      Status st = fd.status();
      loop_->post([this, alive, id, st] {
        if (alive.expired()) return;
        auto it = exchanges_.find(id);
        if (it != exchanges_.end()) fail(it->second.get(), st);
      });
      return;
    }
    ex->fd = *fd;
    ex->reused = false;
    ex->connecting = true;
    if (options_.connect_timeout_s > 0) {
      ex->connect_timer = loop_->run_after(options_.connect_timeout_s, [this, alive, id] {
        if (alive.expired()) return;
        auto it = exchanges_.find(id);
        if (it == exchanges_.end()) return;
        it->second->connect_timer = 0;
        if (it->second->connecting) {
          fail(it->second.get(), unavailable("connecting to " + it->second->key + " timed out"));
        }
      });
    }
  }
  ex->watch = loop_->watch(ex->fd, EPOLLOUT | EPOLLIN | EPOLLRDHUP,
                           [this, id](uint32_t events) { on_events(id, events); });
  if (ex->watch == 0) {
    ::close(ex->fd);
    ex->fd = -1;
    loop_->post([this, alive, id] {
      if (alive.expired()) return;
      auto it = exchanges_.find(id);
      if (it != exchanges_.end()) fail(it->second.get(), unavailable("cannot watch the socket"));
    });
  }
}

void HttpClient::on_events(RequestId id, uint32_t events) {
  auto it = exchanges_.find(id);
  if (it == exchanges_.end()) return;
  Exchange* ex = it->second.get();
  if (ex->connecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int err = socket_error(ex->fd);
    if (err != 0) {
      std::string hint = err == ECONNREFUSED ? " (is the server running and listening there?)" : "";
      fail(ex, unavailable("cannot connect to " + ex->key + ": " + errno_text(err) + hint));
      return;
    }
    on_connected(ex);
    return;
  }
  if (events & EPOLLOUT) {
    do_write(ex);
    if (exchanges_.find(id) == exchanges_.end()) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) do_read(ex);
}

void HttpClient::on_connected(Exchange* ex) {
  ex->connecting = false;
  if (ex->connect_timer) loop_->cancel(ex->connect_timer);
  ex->connect_timer = 0;
  do_write(ex);
}

void HttpClient::do_write(Exchange* ex) {
  while (ex->out_off < ex->out.size()) {
    ssize_t n =
        ::send(ex->fd, ex->out.data() + ex->out_off, ex->out.size() - ex->out_off, MSG_NOSIGNAL);
    if (n > 0) {
      ex->out_off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    int err = errno;
    if (retry_on_fresh_connection(ex)) return;
    fail(ex, unavailable("connection to " + ex->key +
                         " failed while sending the request: " + errno_text(err)));
    return;
  }
  loop_->modify(ex->watch, EPOLLIN | EPOLLRDHUP);
}

void HttpClient::do_read(Exchange* ex) {
  RequestId id = ex->id;
  char buf[kReadChunk];
  while (true) {
    ssize_t n = ::recv(ex->fd, buf, sizeof(buf), 0);
    if (n > 0) {
      double t = now_seconds();
      ex->bytes_received += static_cast<size_t>(n);
      std::string* sink = ex->cb.on_data ? &ex->scratch : &ex->response.body;
      size_t used = ex->parser.feed(std::string_view(buf, static_cast<size_t>(n)), sink);
      if (!ex->head_reported && ex->parser.headers_complete()) {
        ex->head_reported = true;
        ex->response.status = ex->parser.status();
        ex->response.reason = ex->parser.reason();
        ex->response.headers = ex->parser.headers();
        if (ex->cb.on_head) {
          ex->cb.on_head(ex->response);
          if (exchanges_.find(id) == exchanges_.end()) return;
        }
      }
      if (ex->cb.on_data && !ex->scratch.empty()) {
        std::string data;
        data.swap(ex->scratch);
        ex->cb.on_data(data, t);
        if (exchanges_.find(id) == exchanges_.end()) return;
      }
      if (ex->parser.failed()) {
        fail(ex, data_loss("bad HTTP response from " + ex->key + ": " + ex->parser.error()));
        return;
      }
      if (ex->parser.complete()) {
        bool reusable = ex->parser.keep_alive() && used == static_cast<size_t>(n);
        release_connection(ex, reusable);
        complete(ex);
        return;
      }
      continue;
    }
    if (n == 0) {
      ex->parser.on_eof();
      if (ex->parser.complete()) {
        release_connection(ex, false);
        complete(ex);
        return;
      }
      if (retry_on_fresh_connection(ex)) return;
      std::string what =
          ex->bytes_received == 0
              ? "closed the connection before sending a response"
              : "closed the connection in the middle of the response (" + ex->parser.error() + ")";
      fail(ex, unavailable("server " + ex->key + " " + what));
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    int err = errno;
    if (retry_on_fresh_connection(ex)) return;
    std::string what = err == ECONNRESET ? "connection reset by the server"
                                         : "connection error: " + errno_text(err);
    fail(ex, unavailable(what + " (" + ex->key + ", " +
                         (ex->bytes_received == 0 ? "before any response)" : "mid-response)")));
    return;
  }
}

bool HttpClient::retry_on_fresh_connection(Exchange* ex) {
  // A pooled connection the server had already closed: resend once on a new connection.
  if (!ex->reused || ex->retried || ex->bytes_received != 0) return false;
  if (ex->watch) loop_->unwatch(ex->watch);
  ex->watch = 0;
  if (ex->fd >= 0) ::close(ex->fd);
  ex->fd = -1;
  ex->retried = true;
  ex->out_off = 0;
  ex->parser.reset();
  begin(ex);
  return true;
}

void HttpClient::release_connection(Exchange* ex, bool reusable) {
  if (ex->watch) loop_->unwatch(ex->watch);
  ex->watch = 0;
  if (ex->fd < 0) return;
  int fd = ex->fd;
  ex->fd = -1;
  auto& pool = idle_[ex->key];
  if (!reusable || pool.size() >= options_.max_idle_per_host) {
    ::close(fd);
    return;
  }
  std::string key = ex->key;
  std::weak_ptr<bool> alive = alive_;
  EventLoop::WatchId w = loop_->watch(fd, EPOLLIN | EPOLLRDHUP, [this, alive, key, fd](uint32_t) {
    if (!alive.expired()) drop_idle(key, fd);
  });
  if (w == 0) {
    ::close(fd);
    return;
  }
  pool.push_back({fd, w});
}

void HttpClient::drop_idle(const std::string& key, int fd) {
  auto& pool = idle_[key];
  for (size_t i = 0; i < pool.size(); ++i) {
    if (pool[i].fd != fd) continue;
    loop_->unwatch(pool[i].watch);
    ::close(fd);
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

void HttpClient::complete(Exchange* ex) {
  if (ex->timer) loop_->cancel(ex->timer);
  if (ex->connect_timer) loop_->cancel(ex->connect_timer);
  auto it = exchanges_.find(ex->id);
  std::unique_ptr<Exchange> owned = std::move(it->second);
  exchanges_.erase(it);
  if (owned->cb.on_done) owned->cb.on_done(ok_status(), std::move(owned->response));
}

void HttpClient::fail(Exchange* ex, Status status) {
  if (ex->timer) loop_->cancel(ex->timer);
  if (ex->connect_timer) loop_->cancel(ex->connect_timer);
  release_connection(ex, false);
  auto it = exchanges_.find(ex->id);
  std::unique_ptr<Exchange> owned = std::move(it->second);
  exchanges_.erase(it);
  if (owned->cb.on_done) owned->cb.on_done(std::move(status), std::move(owned->response));
}

void HttpClient::cancel(RequestId id) {
  auto it = exchanges_.find(id);
  if (it == exchanges_.end()) return;
  Exchange* ex = it->second.get();
  if (ex->timer) loop_->cancel(ex->timer);
  if (ex->connect_timer) loop_->cancel(ex->connect_timer);
  release_connection(ex, false);
  exchanges_.erase(it);
}

}  // namespace strata::net
