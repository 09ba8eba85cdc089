// The event loop stays responsive while a huge request is parsed and tokenized: that work runs on
// the server's work threads, so /health and /metrics answer meanwhile. The ordering is made
// certain by a hook that holds the big request on its work thread until /health has answered
// (with the parsing on the loop thread, /health could not answer at all); the /health latency
// is measured and printed, with only a generous sanity bound.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerHarness;

struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, finished = false, open = false;
};

TEST(ServerResponsiveness, HealthAnswersWhileA30MBRequestIsParsedAndTokenized) {
  ServerHarness h(testing::tiny_engine_config(), testing::local_server_config());
  ASSERT_TRUE(h.ok());
  Gate g;
  h.server().set_work_hook([&g](bool finished) {
    std::unique_lock<std::mutex> lock(g.mu);
    if (!finished) {
      g.started = true;
    } else {
      g.finished = true;
      g.cv.notify_all();
      g.cv.wait(lock, [&] { return g.open; });  // held until /health has answered
    }
    g.cv.notify_all();
  });
  // 30 MB of text in one completion prompt (far over max_model_len once tokenized).
  std::string text;
  text.reserve(30u << 20);
  const char* words[] = {"once ", "upon ", "a ", "time ", "there ", "was ", "a ", "tokenizer "};
  for (size_t i = 0; text.size() < (30u << 20); ++i) text += words[(i * 7 + i / 3) % 8];
  const std::string body = R"({"prompt": ")" + text + R"(", "max_tokens": 4})";
  text.clear();
  ASSERT_GT(body.size(), 30u << 20);

  int big = testing::connect_raw(h.port(), 120);
  ASSERT_GE(big, 0);
  std::thread sender(
      [&] { testing::send_all(big, testing::http_post_text("/v1/completions", body)); });
  {
    std::unique_lock<std::mutex> lock(g.mu);
    ASSERT_TRUE(g.cv.wait_for(lock, std::chrono::seconds(120), [&] { return g.started; }))
        << "the big request was never handed to a work thread";
  }
  auto t0 = std::chrono::steady_clock::now();
  auto health = h.get("/health");
  const double latency =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool parse_done_at_health;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    parse_done_at_health = g.finished;
  }
  auto metrics = h.get("/metrics");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(metrics.status, 200);
  std::printf("/health answered in %.1f ms while the 30 MB request was %s\n", latency * 1e3,
              parse_done_at_health ? "parsed and waiting to go back to the loop"
                                   : "being parsed and tokenized");
  EXPECT_LT(latency, 5.0) << "sanity bound only";
  // The big request has not been answered: /health went first.
  char c;
  EXPECT_EQ(::recv(big, &c, 1, MSG_DONTWAIT | MSG_PEEK), -1);
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.open = true;
  }
  g.cv.notify_all();
  sender.join();
  std::string resp = testing::read_until(big, [](const std::string& b) {
    size_t head = b.find("\r\n\r\n");
    return head != std::string::npos && b.find("}}", head) != std::string::npos;
  });
  ::close(big);
  ASSERT_EQ(resp.rfind("HTTP/1.1 400", 0), 0u) << resp.substr(0, 300);
  Json err = testing::parse(resp.substr(resp.find("\r\n\r\n") + 4));
  EXPECT_EQ(err["error"]["param"], "prompt");
  EXPECT_NE(err["error"]["message"].get<std::string>().find("maximum context length"),
            std::string::npos);
  EXPECT_EQ(h.get("/health").status, 200);
}

}  // namespace
}  // namespace strata::server
