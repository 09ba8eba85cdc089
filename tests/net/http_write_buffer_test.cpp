// HttpServer::buffered_bytes(): the server-wide count of response bytes waiting for slow
// clients, kept in step with each connection's queue as it grows, drains and closes.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "net/http_server.h"
#include "net/loop_thread.h"
#include "net_test_util.h"

namespace strata::net {
namespace {

using testing::connect_raw;
using testing::send_all;
using testing::wait_for;

TEST(HttpWriteBuffer, CountsQueuedBytesAcrossConnectionsUntilTheyDrainOrClose) {
  auto t = LoopThread::start();
  ASSERT_TRUE(t.ok());
  std::unique_ptr<LoopThread> thread = std::move(t).value();
  std::unique_ptr<HttpServer> server;
  std::vector<ResponseWriter> writers;  // loop thread only
  HttpServerOptions opts;
  opts.port = 0;
  opts.write_high_watermark = 64 * 1024;
  const size_t kChunk = 4096;
  thread->call([&] {
    server = std::make_unique<HttpServer>(thread->loop(), opts);
    // Each request streams until its connection stops taking data: the kernel's buffers fill
    // (the client reads nothing), then the server's queue reaches the watermark.
    server->set_handler([&](HttpRequest, ResponseWriter w) {
      w.start_stream(200, HttpHeaders());
      while (w.writable()) w.write(std::string(kChunk, 'x'));
      writers.push_back(w);
    });
    ASSERT_TRUE(server->listen().ok());
  });
  const int port = server->port();
  int a = connect_raw(port), b = connect_raw(port);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_TRUE(send_all(a, "GET /a HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(send_all(b, "GET /b HTTP/1.1\r\n\r\n"));
  size_t total = 0, sum = 0;
  auto snapshot = [&] {
    thread->call([&] {
      total = server->buffered_bytes();
      sum = 0;
      for (auto& w : writers) sum += w.buffered_bytes();
    });
  };
  ASSERT_TRUE(wait_for(
      [&] {
        size_t n = 0;
        thread->call([&] { n = writers.size(); });
        return n == 2;
      },
      30));
  snapshot();
  EXPECT_EQ(total, sum);
  // Each queue stopped at the watermark, overshooting by less than a chunk (and its framing).
  EXPECT_GE(total, 2 * opts.write_high_watermark);
  EXPECT_LT(total, 2 * (opts.write_high_watermark + kChunk + 16));

  ::close(a);  // its queue goes with it
  ASSERT_TRUE(wait_for(
      [&] {
        snapshot();
        return total == sum && total < opts.write_high_watermark + kChunk + 16;
      },
      30));
  EXPECT_GE(total, opts.write_high_watermark);

  // Reading drains the other one to nothing.
  char buf[65536];
  ASSERT_TRUE(wait_for(
      [&] {
        while (::recv(b, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
        }
        snapshot();
        return total == 0;
      },
      30));
  ::close(b);
  thread->call([&] {
    writers.clear();
    server.reset();
  });
  thread->stop();
}

}  // namespace
}  // namespace strata::net
