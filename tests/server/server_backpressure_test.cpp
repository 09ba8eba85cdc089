// Back-pressure on streams (--stream-buffer-size, --stream-stall-timeout): a client that stops
// reading pauses its request in the engine (KV kept, no more tokens made) with the server's queue
// held near the buffer size; reading again resumes it; a client that never reads again gets its
// request aborted, its KV freed and its connection closed. Nothing here depends on the speed of
// the machine: the socket buffers are pinned small on both sides, so the stream's output (MBs)
// cannot fit in them and must pause, and every wait is for an event.
#include <gtest/gtest.h>

#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerHarness;

constexpr int64_t kBuffer = 16 * 1024;
constexpr int kChoices = 2;
constexpr int kMaxTokens = 1500;
// One SSE event (one token of one choice, with 20 top logprobs) and its chunk framing, at most.
constexpr double kEventBytes = 8 * 1024;

engine::EngineConfig engine_config() {
  engine::EngineConfig c = testing::tiny_engine_config(64 << 20);
  c.scheduler.max_model_len = 4096;
  return c;
}

ServerConfig server_config(double stall_timeout) {
  ServerConfig c = testing::local_server_config();
  c.stream_buffer_bytes = kBuffer;
  c.stream_stall_timeout = stall_timeout;
  c.socket_send_buffer = 16 * 1024;
  return c;
}

// A client with a small receive buffer (so the kernel holds little on its side) that sends one
// big streaming request and reads nothing.
int start_big_stream(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int rcvbuf = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{60, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  const std::string body = R"({"prompt": [256, 72, 105], "stream": true, "temperature": 0,
      "ignore_eos": true, "logprobs": 20, "n": )" +
                           std::to_string(kChoices) + R"(, "max_tokens": )" +
                           std::to_string(kMaxTokens) + "}";
  if (!testing::send_all(fd, testing::http_post_text("/v1/completions", body))) {
    ::close(fd);
    return -1;
  }
  return fd;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

TEST(ServerBackPressure, ANonReadingStreamPausesWithBoundedMemoryThenResumes) {
  ServerHarness h(engine_config(), server_config(/*stall_timeout=*/0));
  ASSERT_TRUE(h.ok());
  int fd = start_big_stream(h.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(testing::wait_for([&] { return h.metric("strata:streams_paused") == 1; }, 120))
      << "the stream never paused";
  // Every choice is paused in the engine (the pause goes through its queue).
  ASSERT_TRUE(testing::wait_for([&] { return h.client().stats().num_paused == kChoices; }, 60));
  const double queued = h.metric("strata:http_write_buffer_bytes");
  const engine::EngineStats paused = h.client().stats();
  std::printf(
      "paused stream: %.0f bytes queued in the server (--stream-buffer-size %lld), "
      "after %lld of %d tokens\n",
      queued, static_cast<long long>(kBuffer), static_cast<long long>(paused.generation_tokens),
      kChoices * kMaxTokens);
  EXPECT_GE(queued, static_cast<double>(kBuffer));
  EXPECT_LE(queued, static_cast<double>(kBuffer) + kEventBytes);
  EXPECT_GT(paused.kv_blocks_referenced, 0) << "a paused request keeps its KV";
  EXPECT_LT(paused.generation_tokens, kChoices * kMaxTokens);

  // Another request runs meanwhile; the paused one makes no tokens.
  auto r = h.post("/v1/completions", R"({"prompt": [256, 80], "max_tokens": 10,
                                         "ignore_eos": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  // (Stats are published after the step whose chunks made the response.)
  ASSERT_TRUE(testing::wait_for([&] {
    return h.client().stats().requests_finished_length == paused.requests_finished_length + 1;
  }));
  EXPECT_EQ(h.client().stats().generation_tokens, paused.generation_tokens + 10);
  EXPECT_EQ(h.metric("strata:streams_paused"), 1);
  EXPECT_LE(h.metric("strata:http_write_buffer_bytes"), static_cast<double>(kBuffer) + kEventBytes);

  // Reading resumes it, to the end.
  std::string got = testing::read_until(fd, [](const std::string& b) {
    return b.size() > 16 && b.find("data: [DONE]", b.size() - 64) != std::string::npos;
  });
  ::close(fd);
  EXPECT_NE(got.find("data: [DONE]"), std::string::npos) << "the stream did not finish";
  EXPECT_EQ(count(got, "\"finish_reason\":\"length\""), static_cast<size_t>(kChoices));
  EXPECT_EQ(count(got, "\"text_offset\""), static_cast<size_t>(kChoices * kMaxTokens));
  EXPECT_TRUE(testing::wait_for([&] {
    return h.metric("strata:streams_paused") == 0 &&
           h.metric("strata:http_write_buffer_bytes") == 0 &&
           h.metric("strata:kv_cache_blocks", "state=\"referenced\"") == 0;
  }));
  EXPECT_EQ(h.metric("strata:streams_stalled_total"), 0);
}

TEST(ServerBackPressure, AStalledStreamIsAbortedAndItsKvFreed) {
  ServerHarness h(engine_config(), server_config(/*stall_timeout=*/0.5));
  ASSERT_TRUE(h.ok());
  int fd = start_big_stream(h.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(testing::wait_for([&] { return h.metric("strata:streams_stalled_total") == 1; }, 120))
      << "the stalled stream was not aborted";
  ASSERT_TRUE(testing::wait_for([&] {
    return h.metric("strata:kv_cache_blocks", "state=\"referenced\"") == 0 &&
           h.metric("vllm:num_requests_running") == 0;
  }));
  EXPECT_EQ(h.metric("vllm:request_success_total", "finished_reason=\"abort\""), kChoices);
  EXPECT_EQ(h.metric("strata:streams_paused"), 0);
  EXPECT_TRUE(testing::wait_for([&] { return h.metric("strata:http_write_buffer_bytes") == 0; }));
  EXPECT_LT(h.client().stats().generation_tokens, kChoices * kMaxTokens);
  // The client finds a cut stream: what was sent, then the end of the connection.
  std::string got = testing::read_until(fd, [](const std::string&) { return false; });
  ::close(fd);
  EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos);
  EXPECT_EQ(got.find("data: [DONE]"), std::string::npos);
  // The server goes on serving.
  auto r = h.post("/v1/completions", R"({"prompt": [256, 80], "max_tokens": 3})");
  EXPECT_EQ(r.status, 200) << r.body;
}

}  // namespace
}  // namespace strata::server
