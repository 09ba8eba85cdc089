// Load: the server holds 1000 concurrent streaming (SSE) connections and every stream completes
// with all of its events. Prints the figures. Labelled slow.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <memory>

#include "core/clock.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "net/loop_thread.h"
#include "net/sse.h"
#include "net_test_util.h"

namespace strata::net {
namespace {

TEST(NetLoad, Holds1000ConcurrentStreamingConnections) {
  const int kStreams = 1000;
  const int kEvents = 20;
  const double kGap = 0.05;
  auto st = LoopThread::start();
  auto ct = LoopThread::start();
  ASSERT_TRUE(st.ok() && ct.ok());
  auto server_thread = std::move(st).value();
  auto client_thread = std::move(ct).value();
  std::unique_ptr<HttpServer> server;
  int active = 0, peak = 0;
  // Streams wait until every client's request has arrived, so all of them overlap whatever the
  // machine's speed (server loop thread only).
  std::vector<std::shared_ptr<std::function<void()>>> parked;
  server_thread->call([&] {
    HttpServerOptions o;
    o.port = 0;
    server = std::make_unique<HttpServer>(server_thread->loop(), o);
    server->set_handler([&](HttpRequest, ResponseWriter w) {
      w.start_stream(200, sse_headers());
      peak = std::max(peak, ++active);
      auto sent = std::make_shared<int>(0);
      auto tick = std::make_shared<std::function<void()>>();
      *tick = [&, w, sent, tick]() mutable {
        w.write(sse_format("{\"n\":" + std::to_string((*sent)++) + "}"));
        if (*sent == kEvents) {
          w.write(sse_format("[DONE]"));
          w.end_stream();
          --active;
          *tick = nullptr;  // break the self-reference
          return;
        }
        server_thread->loop()->run_after(kGap, [tick] {
          if (*tick) (*tick)();
        });
      };
      parked.push_back(tick);
      if (static_cast<int>(parked.size()) == kStreams) {
        for (auto& t : parked) (*t)();
        parked.clear();
      }
    });
    ASSERT_TRUE(server->listen().ok());
  });
  std::atomic<int> done{0}, ok{0};
  std::vector<int> events(kStreams, 0);
  std::vector<std::unique_ptr<SseParser>> parsers;
  for (int i = 0; i < kStreams; ++i) parsers.push_back(std::make_unique<SseParser>());
  std::unique_ptr<HttpClient> client;
  double t0 = now_seconds();
  client_thread->call([&] {
    client = std::make_unique<HttpClient>(client_thread->loop());
    for (int i = 0; i < kStreams; ++i) {
      ClientRequest r;
      r.method = "POST";
      r.url.host = "127.0.0.1";
      r.url.port = server->port();
      r.url.target = "/v1/completions";
      r.body = "{}";
      r.timeout_s = 600;
      client->start(r, {.on_data =
                            [&, i](std::string_view d, double) {
                              parsers[i]->feed(d, [&](const SseEvent& e) {
                                if (e.data != "[DONE]") events[i]++;
                              });
                            },
                        .on_done =
                            [&](Status s, ClientResponse resp) {
                              if (s.ok() && resp.status == 200)
                                ok++;
                              else
                                ADD_FAILURE() << s.to_string();
                              done++;
                            }});
    }
  });
  ASSERT_TRUE(testing::wait_for([&] { return done.load() == kStreams; }, 600));
  double elapsed = now_seconds() - t0;
  int complete_streams = 0;
  client_thread->call([&] {
    for (int n : events) complete_streams += n == kEvents;
    client.reset();
  });
  int server_peak = 0;
  server_thread->call([&] {
    server_peak = peak;
    server.reset();
  });
  std::printf(
      "[net load] %d concurrent SSE streams x %d events: all done in %.2f s, %d complete, "
      "peak concurrent streams on the server %d\n",
      kStreams, kEvents, elapsed, complete_streams, server_peak);
  EXPECT_EQ(ok.load(), kStreams);
  EXPECT_EQ(complete_streams, kStreams);
  EXPECT_EQ(server_peak, kStreams);
}

}  // namespace
}  // namespace strata::net
