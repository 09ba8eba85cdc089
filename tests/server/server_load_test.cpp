// 1000 concurrent streaming connections against the real `strata serve` binary on loopback: all
// are held open at once, every stream completes with its own correct greedy text (no request
// lost or mixed up), and the server keeps answering. Prints the figures.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <map>

#include "core/clock.h"
#include "net/http_client.h"
#include "server_process.h"
#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerProcess;

constexpr int kStreams = 1000;
constexpr int kPrompts = 50;
constexpr int kMaxTokens = 16;

std::string prompt_json(int p) {
  return "[256, " + std::to_string(65 + p % 26) + ", " + std::to_string(97 + p / 26) + "]";
}

TEST(ServerLoad, ThousandConcurrentStreams) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  ASSERT_GE(rl.rlim_cur, 2 * kStreams + 100u) << "raise the open-file limit (ulimit -n)";
  // The engine is held (STRATA_DEBUG_STEP_LIMIT_FILE) while the streams connect, so all of them
  // are open at once whatever the machine's speed.
  testing::StepLimitFile limit("load", -1);
  ServerProcess p(testing::tiny_serve_args({"--kv-cache-memory", "256MiB", "--max-num-seqs", "1024",
                                            "--disable-log-requests", "--threads", "2"}),
                  120, false, {limit.env()});
  ASSERT_TRUE(p.ok()) << p.output();

  // Reference greedy texts, one request at a time.
  std::vector<std::string> expected(kPrompts);
  for (int i = 0; i < kPrompts; ++i) {
    net::ClientRequest r;
    r.method = "POST";
    r.url = *net::parse_url(p.base() + "/v1/completions");
    r.body = R"({"prompt": )" + prompt_json(i) + R"(, "max_tokens": )" +
             std::to_string(kMaxTokens) + R"(, "temperature": 0, "ignore_eos": true})";
    auto resp = net::http_fetch(r);
    ASSERT_TRUE(resp.ok() && resp->status == 200);
    expected[i] = testing::parse(resp->body)["choices"][0]["text"];
  }

  struct Stream {
    std::string body;
    int status = 0;
    std::string error;
    bool done = false;
    double first_byte = -1, end = -1;
  };
  limit.set(0);
  ASSERT_TRUE(p.wait_output("debug step limit set to 0")) << p.output();
  std::vector<Stream> streams(kStreams);
  auto lt = net::LoopThread::start();
  ASSERT_TRUE(lt.ok());
  std::unique_ptr<net::HttpClient> client;
  std::atomic<int> finished{0};
  const double t0 = now_seconds();
  (*lt)->call([&] {
    client = std::make_unique<net::HttpClient>((*lt)->loop());
    for (int i = 0; i < kStreams; ++i) {
      net::ClientRequest r;
      r.method = "POST";
      r.url = *net::parse_url(p.base() + "/v1/completions");
      r.headers.set("Content-Type", "application/json");
      r.timeout_s = 600;
      r.body = R"({"prompt": )" + prompt_json(i % kPrompts) + R"(, "max_tokens": )" +
               std::to_string(kMaxTokens) +
               R"(, "temperature": 0, "ignore_eos": true, "stream": true,
                   "stream_options": {"include_usage": true}})";
      net::ClientCallbacks cb;
      Stream* s = &streams[i];
      cb.on_head = [s](const net::ClientResponse& head) { s->status = head.status; };
      cb.on_data = [s](std::string_view d, double t) {
        if (s->first_byte < 0) s->first_byte = t;
        s->body.append(d);
      };
      cb.on_done = [s, &finished](Status st, net::ClientResponse) {
        if (!st.ok()) s->error = st.message();
        s->done = true;
        s->end = now_seconds();
        finished++;
      };
      client->start(std::move(r), std::move(cb));
    }
  });
  // The server holds every connection at once: all the requests wait in the held engine.
  double peak_connections = 0;
  auto metric = [&](const std::string& name) {
    net::ClientRequest r;
    r.url = *net::parse_url(p.base() + "/metrics");
    auto resp = net::http_fetch(r);
    if (!resp.ok()) return -1.0;
    size_t pos = resp->body.find("\n" + name + "{");
    if (pos == std::string::npos) return -1.0;
    size_t end = resp->body.find('\n', pos + 1);
    std::string line = resp->body.substr(pos + 1, end - pos - 1);
    return std::stod(line.substr(line.rfind(' ') + 1));
  };
  const double waiting_by = now_seconds() + 600;  // a safety net, not a measure
  while (metric("vllm:num_requests_waiting") < kStreams && now_seconds() < waiting_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(metric("vllm:num_requests_waiting"), kStreams);
  EXPECT_EQ(metric("vllm:num_requests_running"), 0);
  peak_connections = metric("strata:http_connections");
  limit.set(-1);
  const double t_release = now_seconds();
  while (finished < kStreams && now_seconds() - t0 < 1200)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double wall = now_seconds() - t_release;  // from the release of the held engine
  (*lt)->call([&] { client.reset(); });
  ASSERT_EQ(finished.load(), kStreams);

  int ok = 0;
  double first_byte_max = 0;
  for (int i = 0; i < kStreams; ++i) {
    const Stream& s = streams[i];
    ASSERT_TRUE(s.error.empty()) << "stream " << i << ": " << s.error;
    ASSERT_EQ(s.status, 200) << s.body;
    std::string text;
    int64_t usage = -1;
    bool done = false;
    for (const auto& d : testing::sse_data(s.body)) {
      if (d == "[DONE]") {
        done = true;
        continue;
      }
      Json j = testing::parse(d);
      if (j["choices"].empty())
        usage = j["usage"]["completion_tokens"];
      else
        text += j["choices"][0]["text"].get<std::string>();
    }
    EXPECT_TRUE(done) << "stream " << i;
    EXPECT_EQ(usage, kMaxTokens) << "stream " << i;
    EXPECT_EQ(text, expected[i % kPrompts]) << "stream " << i << " got another request's text";
    ok += done && usage == kMaxTokens && text == expected[i % kPrompts];
    first_byte_max = std::max(first_byte_max, s.first_byte - t0);
  }
  EXPECT_EQ(ok, kStreams);
  EXPECT_GE(peak_connections, kStreams) << "the streams were not held open together";
  std::printf(
      "[load] %d concurrent streams x %d tokens: all %d correct in %.2f s (%.1f req/s, %.0f "
      "output tok/s) after the release; open connections while held %.0f; last first byte "
      "%.2f s after the first send\n",
      kStreams, kMaxTokens, ok, wall, kStreams / wall, kStreams * kMaxTokens / wall,
      peak_connections, first_byte_max);
  // Still serving.
  net::ClientRequest r;
  r.url = *net::parse_url(p.base() + "/health");
  auto health = net::http_fetch(r);
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait_exit(120), 0);
}

}  // namespace
}  // namespace strata::server
