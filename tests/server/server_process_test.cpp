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
  ServerProcess p(tiny_serve_args({"--trust-remote-code", "--enforce-eager", "--data-parallel-size",
                                   "2", "--cpu-offload-gb", "4", "--served-model-name", "tiny",
                                   "--max-log-len", "4", "--log-stats-interval", "0.2"}));
  ASSERT_TRUE(p.ok()) << p.output();
  const std::string out = p.output();
  for (const char* f : {"--trust-remote-code is accepted but has no effect",
                        "--enforce-eager is accepted but has no effect",
                        "--data-parallel-size 2 is accepted but has no effect",
                        "--cpu-offload-gb is accepted but has no effect"}) {
    size_t first = out.find(f);
    EXPECT_NE(first, std::string::npos) << f << "\n" << out;
    EXPECT_EQ(out.find(f, first + 1), std::string::npos) << "twice: " << f;
  }
  auto r = post(p.port(), "/v1/completions",
                R"({"model": "tiny", "prompt": "Hello world", "max_tokens": 20,
                    "ignore_eos": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  // The request line: prompt cut to --max-log-len characters, token counts, times, reason.
  ASSERT_TRUE(p.wait_output("Finished request cmpl-")) << p.output();
  EXPECT_TRUE(p.wait_output("prompt: 'Hell...', prompt_tokens: 12, output_tokens: 20"))
      << p.output();
  EXPECT_NE(p.output().find("finish_reason: length"), std::string::npos);
  // The stats line in vLLM's format, logged while busy.
  EXPECT_TRUE(p.wait_output("Avg prompt throughput: ")) << p.output();
  EXPECT_NE(p.output().find("Avg generation throughput: "), std::string::npos);
  EXPECT_NE(p.output().find("reqs, Preemptions: "), std::string::npos);
  p.signal(SIGINT);
  EXPECT_EQ(p.wait_exit(120), 0) << p.output();
}

TEST(ServeBinary, UnknownFlagIsAnErrorNamingIt) {
  ServerProcess p(tiny_serve_args({"--no-such-flag", "3"}));
  EXPECT_FALSE(p.ok());
  EXPECT_EQ(p.wait_exit(120), 2);
  EXPECT_NE(p.output().find("--no-such-flag"), std::string::npos) << p.output();
}

TEST(ServeBinary, ToolAndReasoningParserFlags) {
  {
    ServerProcess p(tiny_serve_args({"--tool-call-parser", "hermes3"}));
    EXPECT_FALSE(p.ok());
    EXPECT_NE(p.wait_exit(120), 0);
    EXPECT_NE(p.output().find("--tool-call-parser: unknown parser 'hermes3'; known parsers: "
                              "deepseek_v3, deepseek_v31, deepseek_v32, deepseek_v4, hermes"),
              std::string::npos)
        << p.output();
  }
  ServerProcess p(tiny_serve_args({"--enable-auto-tool-choice", "--tool-call-parser", "deepseek_v4",
                                   "--reasoning-parser", "deepseek_v4"}));
  ASSERT_TRUE(p.ok()) << p.output();
  EXPECT_EQ(p.output().find("not built yet"), std::string::npos) << p.output();
  EXPECT_NE(p.output().find("tool-call parser 'deepseek_v4'"), std::string::npos) << p.output();
  p.signal(SIGINT);
  EXPECT_EQ(p.wait_exit(120), 0) << p.output();
}

TEST(ServeBinary, PortInUseIsAClearError) {
  ServerProcess a(tiny_serve_args());
  ASSERT_TRUE(a.ok()) << a.output();
  auto args = tiny_serve_args({"--port", std::to_string(a.port())});
  ServerProcess b(args);
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.wait_exit(120), 1);
  EXPECT_NE(b.output().find("cannot listen"), std::string::npos) << b.output();
  a.signal(SIGTERM);
  EXPECT_EQ(a.wait_exit(120), 0);
}

// Sends a streamed completion on a raw socket and reads up to its first token event.
int start_stream(int port, int max_tokens) {
  int fd = testing::connect_raw(port);
  EXPECT_GE(fd, 0);
  if (fd < 0) return fd;
  EXPECT_TRUE(testing::send_all(
      fd,
      testing::http_post_text("/v1/completions", R"({"prompt": [256, 72], "max_tokens": )" +
                                                     std::to_string(max_tokens) +
                                                     R"(, "stream": true, "ignore_eos": true})")));
  std::string got = testing::read_until(
      fd, [](const std::string& b) { return b.find("data: {") != std::string::npos; });
  EXPECT_NE(got.find("data: {"), std::string::npos) << got;
  return fd;
}

TEST(ServeBinary, SigtermFinishesThenAbortsInFlightStreams) {
  // The engine runs one step (the first token) and then holds (STRATA_DEBUG_STEP_LIMIT_FILE),
  // so the stream is surely still running when the 0.2 s drain period ends.
  testing::StepLimitFile limit("sigterm_abort", 1);
  ServerProcess p(tiny_serve_args({"--shutdown-timeout", "0.2"}), 120, false, {limit.env()});
  ASSERT_TRUE(p.ok()) << p.output();
  EXPECT_NE(p.output().find("debug step limit set to 1 (steps run so far: 0)"), std::string::npos)
      << p.output();
  int fd = start_stream(p.port(), 400);
  ASSERT_GE(fd, 0);
  p.signal(SIGTERM);
  std::string rest = testing::read_until(
      fd, [](const std::string& b) { return b.find("data: [DONE]") != std::string::npos; });
  ::close(fd);
  EXPECT_NE(rest.find("\"error\""), std::string::npos) << rest;
  EXPECT_NE(rest.find("ServiceUnavailableError"), std::string::npos) << rest;
  EXPECT_NE(rest.find("aborted after 1 generated tokens"), std::string::npos) << rest;
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos) << rest;
  EXPECT_EQ(p.wait_exit(120), 0) << p.output();
  EXPECT_NE(p.output().find("received SIGTERM"), std::string::npos);
  EXPECT_NE(p.output().find("server stopped"), std::string::npos);
}

TEST(ServeBinary, SigtermLetsInFlightStreamsFinish) {
  // Held after one step until the shutdown has begun, then released: the stream ends normally
  // within the (long) drain period and the server exits 0.
  testing::StepLimitFile limit("sigterm_drain", 1);
  ServerProcess p(tiny_serve_args({"--shutdown-timeout", "600"}), 120, false, {limit.env()});
  ASSERT_TRUE(p.ok()) << p.output();
  int fd = start_stream(p.port(), 30);
  ASSERT_GE(fd, 0);
  p.signal(SIGTERM);
  ASSERT_TRUE(p.wait_output("received SIGTERM")) << p.output();
  ASSERT_TRUE(p.wait_output("request(s) in flight get up to 600 s to finish")) << p.output();
  limit.set(-1);
  std::string rest = testing::read_until(
      fd, [](const std::string& b) { return b.find("data: [DONE]") != std::string::npos; });
  ::close(fd);
  EXPECT_EQ(rest.find("\"error\""), std::string::npos) << rest;
  EXPECT_NE(rest.find("\"finish_reason\":\"length\""), std::string::npos) << rest;
  EXPECT_EQ(p.wait_exit(120), 0) << p.output();
  EXPECT_NE(p.output().find("debug step limit set to -1"), std::string::npos) << p.output();
}

TEST(ServeBinary, IdleSigintExitsZero) {
  for (bool background : {false, true}) {
    // A background job of a shell starts with SIGINT ignored; Ctrl-C semantics must still hold.
    ServerProcess p(tiny_serve_args(), 120, /*ignore_sigint=*/background);
    ASSERT_TRUE(p.ok()) << p.output();
    p.signal(SIGINT);
    EXPECT_EQ(p.wait_exit(120), 0) << "background " << background << "\n" << p.output();
  }
}

}  // namespace
}  // namespace strata::server
