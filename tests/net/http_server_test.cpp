#include "net/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "net/blocking_http.h"
#include "net/http_client.h"
#include "net/loop_thread.h"
#include "net/sse.h"
#include "net_test_util.h"

namespace strata::net {
namespace {

using testing::connect_raw;
using testing::contains;
using testing::read_until;
using testing::read_until_close;
using testing::send_all;
using testing::wait_for;

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpHandler handler, HttpServerOptions opts = {}) {
    auto t = LoopThread::start();
    ASSERT_TRUE(t.ok());
    thread_ = std::move(t).value();
    opts.port = 0;
    thread_->call([&] {
      server_ = std::make_unique<HttpServer>(thread_->loop(), opts);
      server_->set_handler(std::move(handler));
      Status s = server_->listen();
      ASSERT_TRUE(s.ok()) << s.to_string();
    });
    port_ = server_->port();
  }
  void TearDown() override {
    if (thread_) {
      thread_->call([&] { server_.reset(); });
      thread_->stop();
    }
  }
  Url url(const std::string& path) {
    Url u;
    u.host = "127.0.0.1";
    u.port = port_;
    u.target = path;
    return u;
  }

  std::unique_ptr<LoopThread> thread_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

HttpHandler echo_handler() {
  return [](HttpRequest req, ResponseWriter w) {
    HttpResponse r = HttpResponse::text(200, req.method + " " + req.path + " [" + req.body + "]");
    r.headers.add("X-Query", req.query);
    w.send(std::move(r));
  };
}

TEST_F(HttpServerTest, RoundTripWithClient) {
  start(echo_handler());
  ClientRequest get;
  get.url = url("/v1/models?a=b");
  auto r = http_fetch(get);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "GET /v1/models []");
  EXPECT_EQ(r->headers.get_or("x-query", ""), "a=b");
  auto p = http_fetch(json_post(url("/p"), "{\"k\":1}"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->body, "POST /p [{\"k\":1}]");
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  start(echo_handler());
  int fd = connect_raw(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "GET /one HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string a = read_until(fd, [](const std::string& s) { return contains(s, "[]"); });
  EXPECT_TRUE(contains(a, "HTTP/1.1 200 OK")) << a;
  EXPECT_TRUE(contains(a, "GET /one []"));
  // Two pipelined requests, the second closing the connection.
  ASSERT_TRUE(send_all(fd,
                       "POST /two HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /three HTTP/1.1\r\n"
                       "Connection: close\r\n\r\n"));
  std::string b = read_until_close(fd);
  EXPECT_TRUE(contains(b, "POST /two [hi]")) << b;
  EXPECT_TRUE(contains(b, "GET /three []")) << b;
  EXPECT_TRUE(contains(b, "Connection: close"));
  ::close(fd);
}

TEST_F(HttpServerTest, ClientReusesPooledConnections) {
  start(echo_handler());
  auto t = LoopThread::start();
  ASSERT_TRUE(t.ok());
  auto client_thread = std::move(t).value();
  std::unique_ptr<HttpClient> client;
  client_thread->call([&] { client = std::make_unique<HttpClient>(client_thread->loop()); });
  for (int i = 0; i < 3; ++i) {
    std::atomic<bool> done{false};
    client_thread->call([&] {
      ClientRequest r;
      r.url = url("/x");
      client->start(r, {.on_done = [&](Status s, ClientResponse resp) {
                      EXPECT_TRUE(s.ok());
                      EXPECT_EQ(resp.status, 200);
                      done = true;
                    }});
    });
    ASSERT_TRUE(wait_for([&] { return done.load(); }));
  }
  size_t idle = 0;
  client_thread->call([&] { idle = client->num_idle_connections(); });
  EXPECT_EQ(idle, 1u);
  EXPECT_EQ(server_->num_connections(), 1u);
  client_thread->call([&] { client.reset(); });
}

TEST_F(HttpServerTest, BodyOverLimitGets413AndServerKeepsServing) {
  HttpServerOptions opts;
  opts.limits.max_body_bytes = 1000;
  start(echo_handler(), opts);
  int fd = connect_raw(port_);
  ASSERT_TRUE(send_all(fd, "POST /v1/completions HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" +
                               std::string(5000, 'x')));
  std::string resp = read_until_close(fd);
  ::close(fd);
  EXPECT_TRUE(contains(resp, "HTTP/1.1 413")) << resp;
  EXPECT_TRUE(contains(resp, "\"error\"")) << resp;
  EXPECT_TRUE(contains(resp, "\"code\":413")) << resp;
  // Chunked bodies are counted as they arrive.
  fd = connect_raw(port_);
  ASSERT_TRUE(send_all(fd, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" +
                               std::string(2048, 'y') + "\r\n"));
  resp = read_until_close(fd);
  ::close(fd);
  EXPECT_TRUE(contains(resp, "HTTP/1.1 413")) << resp;
  auto ok = http_fetch(json_post(url("/after"), std::string(900, 'z')));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, MalformedRequestsGetErrorsAndNeverStopTheServer) {
  start(echo_handler());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"GARBAGE\r\n\r\n", "400"},
      {"GET / HTTP/3.0\r\n\r\n", "505"},
      {"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", "400"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: br\r\n\r\n", "501"},
      {"GET / HTTP/1.1\r\nX: " + std::string(70000, 'a') + "\r\n\r\n", "431"},
      {std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15), "400"},
  };
  for (const auto& [bytes, status] : cases) {
    int fd = connect_raw(port_);
    ASSERT_GE(fd, 0);
    send_all(fd, bytes);
    std::string resp = read_until_close(fd);
    ::close(fd);
    EXPECT_TRUE(contains(resp, "HTTP/1.1 " + status)) << status << " got: " << resp.substr(0, 80);
  }
  auto ok = http_fetch(ClientRequest{.url = url("/still-alive")});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->body, "GET /still-alive []");
}

TEST_F(HttpServerTest, ExpectContinue) {
  start(echo_handler());
  int fd = connect_raw(port_);
  send_all(fd, "POST /c HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  std::string interim =
      read_until(fd, [](const std::string& s) { return contains(s, "\r\n\r\n"); });
  EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  send_all(fd, "body");
  std::string resp = read_until(fd, [](const std::string& s) { return contains(s, "]"); });
  EXPECT_TRUE(contains(resp, "POST /c [body]")) << resp;
  ::close(fd);
}

TEST_F(HttpServerTest, StreamsServerSentEventsWrittenFromAnotherThread) {
  // Each event must reach the client while the stream is still open: the writer thread sends the
  // next event only once the client has seen the previous one (a server that held the events
  // back until the end would leave the writer waiting, and the test fails).
  std::vector<std::thread> workers;
  std::mutex mu;
  std::atomic<int> received{0};
  std::atomic<int> unseen{0};  // events the client had not seen when the writer gave up
  start([&](HttpRequest req, ResponseWriter w) {
    w.start_stream(200, sse_headers());
    std::lock_guard<std::mutex> lock(mu);
    workers.emplace_back([w, &received, &unseen]() mutable {
      for (int i = 0; i < 5; ++i) {
        w.write(sse_format("{\"i\":" + std::to_string(i) + "}"));
        if (!wait_for([&] { return received.load() > i; }, 120)) unseen++;
      }
      w.write(sse_format("[DONE]"));
      w.end_stream();
    });
  });
  auto t = LoopThread::start();
  ASSERT_TRUE(t.ok());
  auto ct = std::move(t).value();
  std::unique_ptr<HttpClient> client;
  std::vector<std::string> events;
  std::atomic<bool> done{false};
  Status final_status;
  int status = 0;
  SseParser sse;
  ct->call([&] {
    client = std::make_unique<HttpClient>(ct->loop());
    ClientRequest r = json_post(url("/v1/completions"), "{}");
    client->start(r, {.on_head = [&](const ClientResponse& h) { status = h.status; },
                      .on_data =
                          [&](std::string_view data, double) {
                            sse.feed(data, [&](const SseEvent& e) {
                              events.push_back(e.data);
                              received++;
                            });
                          },
                      .on_done =
                          [&](Status s, ClientResponse) {
                            final_status = s;
                            done = true;
                          }});
  });
  ASSERT_TRUE(wait_for([&] { return done.load(); }, 600));
  ct->call([&] { client.reset(); });
  for (auto& w : workers) w.join();
  EXPECT_TRUE(final_status.ok()) << final_status.to_string();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(unseen.load(), 0) << "events were held back instead of streamed";
  ASSERT_EQ(events.size(), 6u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(events[i], "{\"i\":" + std::to_string(i) + "}");
  EXPECT_EQ(events[5], "[DONE]");
}

TEST_F(HttpServerTest, DisconnectMidStreamRunsTheCallback) {
  std::atomic<bool> disconnected{false};
  std::vector<ResponseWriter> kept;
  start([&](HttpRequest, ResponseWriter w) {
    w.on_disconnect([&] { disconnected = true; });
    w.start_stream(200, sse_headers());
    w.write(sse_format("first"));
    kept.push_back(w);  // the "engine" keeps generating
  });
  int fd = connect_raw(port_);
  send_all(fd, "POST /v1/completions HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  std::string got = read_until(fd, [](const std::string& s) { return contains(s, "first"); });
  EXPECT_TRUE(contains(got, "Transfer-Encoding: chunked")) << got;
  EXPECT_TRUE(contains(got, "text/event-stream")) << got;
  ::close(fd);
  EXPECT_TRUE(wait_for([&] { return disconnected.load(); }));
  bool connected = true;
  thread_->call([&] {
    connected = kept[0].connected();
    kept[0].write("ignored after disconnect");
    kept.clear();
  });
  EXPECT_FALSE(connected);
}

TEST_F(HttpServerTest, CallbacksHoldingTheWriterAreReleased) {
  // Callbacks that capture the writer form a cycle through the exchange; it is broken when the
  // response completes (checked by the leak sanitizer).
  start([](HttpRequest, ResponseWriter w) {
    w.on_disconnect([w] {});
    w.on_drain([w] {});
    w.start_stream(200, sse_headers());
    w.write(sse_format("x"));
    w.end_stream();
  });
  for (int i = 0; i < 3; ++i) {
    auto r = http_fetch(ClientRequest{.url = url("/s")});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->body, "data: x\n\n");
  }
}

TEST_F(HttpServerTest, DroppedWriterAndThrowingHandlerGet500) {
  start([](HttpRequest req, ResponseWriter) {
    if (req.path == "/throw") throw std::runtime_error("boom");
  });
  auto a = http_fetch(ClientRequest{.url = url("/drop")});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->status, 500);
  auto b = http_fetch(ClientRequest{.url = url("/throw")});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->status, 500);
  EXPECT_TRUE(contains(b->body, "\"error\""));
}

TEST_F(HttpServerTest, ClientErrorsAreClear) {
  std::vector<ResponseWriter> kept;
  start([&](HttpRequest req, ResponseWriter w) {
    if (req.path == "/hang") {
      kept.push_back(w);
    } else if (req.path == "/cut") {
      w.start_stream(200, sse_headers());
      w.write(sse_format("partial"));
      w.abort();
    }
  });
  auto hang = http_fetch(ClientRequest{.url = url("/hang"), .timeout_s = 0.2});
  ASSERT_FALSE(hang.ok());
  EXPECT_TRUE(contains(hang.status().message(), "timed out")) << hang.status().message();
  auto cut = http_fetch(ClientRequest{.url = url("/cut")});
  ASSERT_FALSE(cut.ok());
  EXPECT_TRUE(contains(cut.status().message(), "middle of the response")) << cut.status().message();
  // A port nobody listens on.
  int free_port = 0;
  {
    auto fd = listen_tcp("127.0.0.1", 0, 1, &free_port);
    ASSERT_TRUE(fd.ok());
    ::close(*fd);
  }
  Url u = url("/");
  u.port = free_port;
  auto refused = http_fetch(ClientRequest{.url = u});
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.status().message(), "refused")) << refused.status().message();
  thread_->call([&] { kept.clear(); });
}

TEST_F(HttpServerTest, GracefulShutdownDrainsThenCloses) {
  std::vector<ResponseWriter> streams;
  std::atomic<int> disconnects{0};
  start([&](HttpRequest req, ResponseWriter w) {
    w.on_disconnect([&] { disconnects++; });
    w.start_stream(200, sse_headers());
    streams.push_back(w);
  });
  int a = connect_raw(port_);
  int b = connect_raw(port_);
  int idle = connect_raw(port_);
  send_all(a, "GET /a HTTP/1.1\r\n\r\n");
  send_all(b, "GET /b HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(wait_for([&] { return server_->num_active() == 2; }));
  std::atomic<bool> done{false};
  const double t0 = now_seconds();
  // Stream a finishes within the grace period (it is written in the same loop turn that starts
  // the shutdown, so the deadline cannot pass first, however slow the machine); b does not and
  // is closed at the deadline.
  thread_->call([&] {
    server_->shutdown(0.3, [&] { done = true; });
    streams[0].write(sse_format("bye"));
    streams[0].end_stream();
  });
  // The idle connection is closed at once; new connections are refused.
  std::string idle_bytes = read_until_close(idle);
  EXPECT_TRUE(idle_bytes.empty());
  EXPECT_TRUE(wait_for([&] {
    int fd = connect_raw(port_);
    if (fd >= 0) ::close(fd);
    return fd < 0;
  }));
  std::string got_a = read_until_close(a);
  EXPECT_TRUE(contains(got_a, "bye")) << got_a;
  EXPECT_TRUE(contains(got_a, "0\r\n\r\n")) << got_a;
  std::string got_b = read_until_close(b);  // closed at the deadline, its response unfinished
  EXPECT_FALSE(contains(got_b, "0\r\n\r\n")) << got_b;
  EXPECT_GE(now_seconds() - t0, 0.3);
  EXPECT_TRUE(wait_for([&] { return done.load(); }));
  EXPECT_EQ(disconnects.load(), 1);
  ::close(a);
  ::close(b);
  ::close(idle);
  thread_->call([&] { streams.clear(); });
}

TEST_F(HttpServerTest, BackPressureSignalsDrain) {
  const size_t kChunk = 256 * 1024;
  const size_t kTotal = 64u << 20;  // far more than loopback socket buffers hold
  std::atomic<int> drains{0};
  std::atomic<size_t> max_buffered{0};
  struct Stream {
    ResponseWriter w;
    size_t sent = 0;
  };
  auto stream = std::make_shared<Stream>();
  HttpServerOptions opts;
  opts.write_high_watermark = 1u << 20;
  start(
      [&, stream](HttpRequest, ResponseWriter w) {
        stream->w = w;
        w.start_stream(200, HttpHeaders());
        auto pump = std::make_shared<std::function<void()>>();
        *pump = [&, stream] {
          while (stream->sent < kTotal && stream->w.writable()) {
            stream->w.write(std::string(kChunk, 'x'));
            stream->sent += kChunk;
            max_buffered = std::max(max_buffered.load(), stream->w.buffered_bytes());
          }
          if (stream->sent >= kTotal) {
            stream->w.end_stream();
            stream->w.on_drain(nullptr);
          }
        };
        w.on_drain([&, pump] {
          drains++;
          (*pump)();
        });
        (*pump)();
      },
      opts);
  int fd = connect_raw(port_);
  send_all(fd, "GET /big HTTP/1.1\r\n\r\n");
  // The client reads nothing until the writer has filled its queue to the high watermark and
  // stopped (the socket buffers are far smaller than 16 MiB); then it reads everything.
  ASSERT_TRUE(wait_for([&] { return max_buffered.load() >= opts.write_high_watermark; }));
  size_t received = 0;
  char buf[16384];
  std::string tail;
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    received += static_cast<size_t>(n);
    tail.append(buf, static_cast<size_t>(n));
    if (tail.size() > 16) tail.erase(0, tail.size() - 16);
    if (contains(tail, "0\r\n\r\n")) break;
  }
  ::close(fd);
  EXPECT_GT(received, kTotal);
  EXPECT_GT(drains.load(), 0);
  EXPECT_LE(max_buffered.load(), opts.write_high_watermark + kChunk + 64);
  thread_->call([&] { stream->w = ResponseWriter(); });
}

}  // namespace
}  // namespace strata::net
