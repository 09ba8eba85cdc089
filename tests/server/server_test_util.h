// Helpers for server tests: an in-process server (engine + OpenAiServer on a loop thread), HTTP
// calls with the net client, raw sockets for streaming and disconnect tests, and a JSON/SSE
// reader.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/json.h"
#include "engine/engine.h"
#include "net/blocking_http.h"
#include "net/loop_thread.h"
#include "net/sse.h"
#include "server/openai_server.h"
#include "test_util.h"

namespace strata::server::testing {

inline engine::EngineConfig tiny_engine_config(int64_t kv_bytes = 16 << 20) {
  engine::EngineConfig c;
  c.model.model = strata::testing::repo_path("models/strata-tiny");
  c.model.load_format = "dummy";
  c.cache.kv_cache_memory_bytes = kv_bytes;
  c.scheduler.max_model_len = 512;
  c.threads = 1;
  c.seed = 7;
  return c;
}

inline ServerConfig local_server_config() {
  ServerConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.log_requests = false;
  c.log_stats = false;
  c.version = "test";
  return c;
}

class ServerHarness {
 public:
  ServerHarness(const engine::EngineConfig& ecfg, ServerConfig scfg) {
    auto client = engine::EngineClient::create(ecfg);
    if (!client.ok()) {
      ADD_FAILURE() << "engine: " << client.status().message();
      return;
    }
    client_ = std::move(client).value();
    auto lt = net::LoopThread::start();
    if (!lt.ok()) {
      ADD_FAILURE() << "loop: " << lt.status().message();
      return;
    }
    loop_ = std::move(lt).value();
    loop_->call([&] {
      auto s = OpenAiServer::create(std::move(scfg), client_.get(), loop_->loop());
      if (!s.ok()) {
        ADD_FAILURE() << "server: " << s.status().message();
        return;
      }
      server_ = std::move(s).value();
      Status st = server_->start();
      if (!st.ok()) ADD_FAILURE() << "listen: " << st.message();
      port_ = server_->port();
    });
  }

  ~ServerHarness() {
    if (shutdown_requested_)
      wait_shutdown(120);
    else if (client_)
      client_->shutdown(0, unavailable("test over"));
    if (loop_) loop_->call([&] { server_.reset(); });
    loop_.reset();
    client_.reset();
  }

  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }
  engine::EngineClient& client() { return *client_; }
  OpenAiServer& server() { return *server_; }

  // Starts a graceful shutdown (as SIGTERM does).
  void shutdown() {
    shutdown_requested_ = true;
    server_->shutdown([this] { shutdown_done_ = true; });
  }
  bool wait_shutdown(double timeout_s) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (!shutdown_done_ && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return shutdown_done_;
  }

  net::ClientResponse request(const std::string& method, const std::string& path,
                              const std::string& body = "",
                              std::vector<std::pair<std::string, std::string>> headers = {}) {
    net::ClientRequest r;
    r.method = method;
    auto url = net::parse_url(base() + path);
    EXPECT_TRUE(url.ok());
    r.url = *url;
    r.body = body;
    r.timeout_s = 60;
    if (!body.empty()) r.headers.set("Content-Type", "application/json");
    for (auto& [k, v] : headers) r.headers.set(k, v);
    auto resp = net::http_fetch(std::move(r));
    EXPECT_TRUE(resp.ok()) << resp.status().message();
    return resp.ok() ? *resp : net::ClientResponse{};
  }
  net::ClientResponse post(const std::string& path, const std::string& body,
                           std::vector<std::pair<std::string, std::string>> headers = {}) {
    return request("POST", path, body, std::move(headers));
  }
  net::ClientResponse get(const std::string& path) { return request("GET", path); }

  // One value of /metrics, e.g. metric("vllm:num_requests_running") or
  // metric("strata:kv_cache_blocks", "state=\"referenced\""); -1 when absent.
  double metric(const std::string& name, const std::string& label = "") {
    std::string text = get("/metrics").body;
    size_t pos = 0;
    while ((pos = text.find(name + "{", pos)) != std::string::npos) {
      size_t end = text.find('\n', pos);
      std::string line = text.substr(pos, end - pos);
      pos = end;
      if (!label.empty() && line.find(label) == std::string::npos) continue;
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return -1;
  }

 private:
  std::unique_ptr<engine::EngineClient> client_;
  std::unique_ptr<net::LoopThread> loop_;
  std::unique_ptr<OpenAiServer> server_;
  int port_ = 0;
  bool shutdown_requested_ = false;
  std::atomic<bool> shutdown_done_{false};
};

// Holds the engine so requests stay in flight whatever the machine's speed: no engine step beyond
// `steps` more than have run so far (EngineClient::set_step_limit), until release() or the end of
// the scope.
class StepHold {
 public:
  StepHold(engine::EngineClient& client, int64_t steps) : client_(&client) {
    client.set_step_limit(client.steps_run() + steps);
  }
  ~StepHold() { release(); }
  StepHold(const StepHold&) = delete;
  StepHold& operator=(const StepHold&) = delete;
  void release() {
    if (client_ != nullptr) client_->set_step_limit(-1);
    client_ = nullptr;
  }

 private:
  engine::EngineClient* client_;
};

inline Json parse(const std::string& text) {
  auto j = parse_json(text, "response");
  EXPECT_TRUE(j.ok()) << text;
  return j.ok() ? *j : Json();
}

// The data payloads of an SSE body, in order ("[DONE]" included).
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  net::SseParser p;
  p.feed(body, [&](const net::SseEvent& e) { out.push_back(e.data); });
  p.finish([&](const net::SseEvent& e) { out.push_back(e.data); });
  return out;
}

// The JSON objects of a response: its body, or each event of a streamed one ("[DONE]" left out).
inline std::vector<Json> response_bodies(const std::string& body, bool stream) {
  std::vector<Json> out;
  if (!stream) {
    out.push_back(parse(body));
    return out;
  }
  for (const auto& d : sse_data(body))
    if (d != "[DONE]") out.push_back(parse(d));
  return out;
}

// A blocking loopback socket with a receive timeout (a safety net against hangs, not a test of
// speed); -1 on failure.
inline int connect_raw(int port, double recv_timeout_s = 120.0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{};
  tv.tv_sec = static_cast<long>(recv_timeout_s);
  tv.tv_usec = static_cast<long>((recv_timeout_s - static_cast<double>(tv.tv_sec)) * 1e6);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

inline bool send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

inline std::string read_until(int fd, const std::function<bool(const std::string&)>& done) {
  std::string buf;
  char tmp[65536];
  while (!done(buf)) {
    ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
  }
  return buf;
}

inline std::string http_post_text(const std::string& path, const std::string& body,
                                  const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Polls `pred` until it holds. The deadline only keeps a broken build from hanging: it is far
// longer than anything needs on a loaded machine, and never what a test measures.
inline bool wait_for(const std::function<bool()>& pred, double timeout_s = 120.0) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

}  // namespace strata::server::testing
