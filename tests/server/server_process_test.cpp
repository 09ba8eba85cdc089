// The real `strata serve` binary: vLLM flags accepted with warnings, unknown flags refused by
// name, the listening line, request and stats log lines, and graceful SIGTERM/SIGINT shutdown
// (in-flight streams end with an error event and [DONE], exit code 0).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include "server_process.h"
#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerProcess;
using testing::tiny_serve_args;

net::ClientResponse post(int port, const std::string& path, const std::string& body) {
  net::ClientRequest r;
  r.method = "POST";
  r.url = *net::parse_url("http://127.0.0.1:" + std::to_string(port) + path);
  r.body = body;
  r.timeout_s = 60;
  r.headers.set("Content-Type", "application/json");
  auto resp = net::http_fetch(std::move(r));
  EXPECT_TRUE(resp.ok()) << resp.status().message();
  return resp.ok() ? *resp : net::ClientResponse{};
}

TEST(ServeBinary, VllmFlagsWarnOnceAndServe) {
  ServerProcess p(tiny_serve_args(
      {"--trust-remote-code", "--enforce-eager", "--tensor-parallel-size", "2", "--swap-space", "4",
       "--served-model-name", "tiny", "--max-log-len", "4", "--log-stats-interval", "0.2"}));
  ASSERT_TRUE(p.ok()) << p.output();
  const std::string out = p.output();
  for (const char* f : {"--trust-remote-code is accepted but has no effect",
                        "--enforce-eager is accepted but has no effect",
                        "--tensor-parallel-size 2 is accepted but has no effect",
                        "--swap-space is accepted but has no effect"}) {
    size_t first = out.find(f);
    EXPECT_NE(first, std::string::npos) << f << "\n" << out;
    EXPECT_EQ(out.find(f, first + 1), std::string::npos) << "twice: " << f;
  }
  auto r = post(p.port(), "/v1/completions",
                R"({"model": "tiny", "prompt": "Hello world", "max_tokens": 20,
                    "ignore_eos": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  // The request line: prompt cut to --max-log-len characters, token counts, times, reason.
  ASSERT_TRUE(p.wait_output("Finished request cmpl-", 10)) << p.output();
  EXPECT_TRUE(p.wait_output("prompt: 'Hell...', prompt_tokens: 12, output_tokens: 20", 1))
      << p.output();
  EXPECT_NE(p.output().find("finish_reason: length"), std::string::npos);
  // The stats line in vLLM's format, logged while busy.
  EXPECT_TRUE(p.wait_output("Avg prompt throughput: ", 5)) << p.output();
  EXPECT_NE(p.output().find("Avg generation throughput: "), std::string::npos);
  EXPECT_NE(p.output().find("reqs, Preemptions: "), std::string::npos);
  p.signal(SIGINT);
  EXPECT_EQ(p.wait_exit(20), 0) << p.output();
}

TEST(ServeBinary, UnknownFlagIsAnErrorNamingIt) {
  ServerProcess p(tiny_serve_args({"--no-such-flag", "3"}), 20);
  EXPECT_FALSE(p.ok());
  EXPECT_EQ(p.wait_exit(20), 2);
  EXPECT_NE(p.output().find("--no-such-flag"), std::string::npos) << p.output();
}

TEST(ServeBinary, PortInUseIsAClearError) {
  ServerProcess a(tiny_serve_args());
  ASSERT_TRUE(a.ok()) << a.output();
  auto args = tiny_serve_args({"--port", std::to_string(a.port())});
  ServerProcess b(args, 30);
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.wait_exit(30), 1);
  EXPECT_NE(b.output().find("cannot listen"), std::string::npos) << b.output();
  a.signal(SIGTERM);
  EXPECT_EQ(a.wait_exit(20), 0);
}

TEST(ServeBinary, SigtermFinishesThenAbortsInFlightStreams) {
  // The stream must still be running when the drain timeout ends, even on a fast machine: a long
  // context (4000 tokens) and a short drain (0.2 s).
  ServerProcess p(tiny_serve_args({"--shutdown-timeout", "0.2", "--max-model-len", "4096"}));
  ASSERT_TRUE(p.ok()) << p.output();
  int fd = testing::connect_raw(p.port(), 30);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(testing::send_all(
      fd, testing::http_post_text("/v1/completions",
                                  R"({"prompt": [256, 72], "max_tokens": 4000, "stream": true,
                                      "ignore_eos": true})")));
  std::string got = testing::read_until(
      fd, [](const std::string& b) { return b.find("data: {") != std::string::npos; });
  ASSERT_NE(got.find("data: {"), std::string::npos) << got;
  p.signal(SIGTERM);
  std::string rest = testing::read_until(
      fd, [](const std::string& b) { return b.find("data: [DONE]") != std::string::npos; });
  ::close(fd);
  EXPECT_NE(rest.find("\"error\""), std::string::npos) << rest;
  EXPECT_NE(rest.find("ServiceUnavailableError"), std::string::npos) << rest;
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos) << rest;
  EXPECT_EQ(p.wait_exit(20), 0) << p.output();
  EXPECT_NE(p.output().find("received SIGTERM"), std::string::npos);
  EXPECT_NE(p.output().find("server stopped"), std::string::npos);
}

TEST(ServeBinary, IdleSigintExitsZero) {
  for (bool background : {false, true}) {
    // A background job of a shell starts with SIGINT ignored; Ctrl-C semantics must still hold.
    ServerProcess p(tiny_serve_args(), 60, /*ignore_sigint=*/background);
    ASSERT_TRUE(p.ok()) << p.output();
    p.signal(SIGINT);
    EXPECT_EQ(p.wait_exit(20), 0) << "background " << background << "\n" << p.output();
  }
}

}  // namespace
}  // namespace strata::server
