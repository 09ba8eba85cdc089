// Runs a FakeOpenAiServer on its own loop thread for benchmark tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "bench/fake_openai_server.h"
#include "bench/openai_protocol.h"
#include "bench/runner.h"
#include "net/loop_thread.h"

namespace strata::bench::testing {

class FakeServerHarness {
 public:
  explicit FakeServerHarness(FakeServerOptions o) {
    auto t = net::LoopThread::start();
    EXPECT_TRUE(t.ok());
    thread_ = std::move(t).value();
    thread_->call([&] {
      server_ = std::make_unique<FakeOpenAiServer>(thread_->loop(), o);
      Status s = server_->listen("127.0.0.1", 0);
      EXPECT_TRUE(s.ok()) << s.to_string();
    });
  }
  ~FakeServerHarness() {
    thread_->call([&] { server_.reset(); });
    thread_->stop();
  }
  int port() const { return server_->port(); }
  std::string base_url() const { return server_->base_url(); }
  FakeOpenAiServer& server() { return *server_; }

 private:
  std::unique_ptr<net::LoopThread> thread_;
  std::unique_ptr<FakeOpenAiServer> server_;
};

inline net::Url endpoint(int port, Backend b) {
  net::Url u;
  u.host = "127.0.0.1";
  u.port = port;
  u.target = default_endpoint(b);
  return u;
}

// `n` requests of `prompt` asking for `max_tokens` each.
inline std::vector<std::string> payloads(Backend b, int n, const std::string& prompt,
                                         int64_t max_tokens) {
  std::vector<SampleRequest> reqs(static_cast<size_t>(n), {prompt, 0, max_tokens});
  auto p = build_payloads(b, {.model = "fake-model"}, reqs);
  EXPECT_TRUE(p.ok());
  return *p;
}

}  // namespace strata::bench::testing
