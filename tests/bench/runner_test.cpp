#include "bench/runner.h"

#include <gtest/gtest.h>

#include "bench/arrivals.h"
#include "bench/dataset.h"
#include "bench/metrics.h"
#include "bench/prompt_tokenizer.h"
#include "core/clock.h"
#include "fake_server_fixture.h"
#include "net/socket.h"

namespace strata::bench {
namespace {

using testing::endpoint;
using testing::FakeServerHarness;
using testing::payloads;

FakeServerOptions fast() {
  FakeServerOptions o;
  o.ttft_s = 0.001;
  o.itl_s = 0.0005;
  return o;
}

Result<RunResult> run(int port, Backend b, int n, int64_t tokens, int64_t concurrency = 0,
                      double timeout = 30) {
  RunnerOptions o;
  o.api_url = endpoint(port, b);
  o.backend = b;
  o.max_concurrency = concurrency;
  o.request_timeout_s = timeout;
  auto p = payloads(b, n, "hello world", tokens);
  return run_requests(o, p, std::vector<int64_t>(static_cast<size_t>(n), 3), nullptr);
}

TEST(Runner, MeasuresEveryStreamAndTakesCountsFromUsage) {
  for (Backend b : {Backend::kCompletions, Backend::kChat}) {
    FakeServerHarness h(fast());
    auto r = run(h.port(), b, 12, 5, /*concurrency=*/3);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->outputs.size(), 12u);
    bool queued = false;
    for (const auto& o : r->outputs) {
      EXPECT_TRUE(o.success) << o.error;
      EXPECT_TRUE(o.output_tokens_from_usage);
      EXPECT_EQ(o.output_tokens, 5);
      EXPECT_EQ(o.prompt_len, 12);  // the server's usage: 11 bytes + BOS
      EXPECT_EQ(o.itl.size(), 4u);
      EXPECT_GE(o.ttft, 0.001);
      EXPECT_GE(o.latency, o.ttft);
      EXPECT_EQ(o.generated_text, " tok tok tok tok tok");
      queued = queued || o.queue_time > 0.0005;
    }
    EXPECT_TRUE(queued);  // 12 requests through 3 slots
    EXPECT_LE(peak_concurrency(r->outputs), 3);
    EXPECT_EQ(h.server().num_generation_requests(), 12);
  }
}

TEST(Runner, InjectedFailuresAreCountedWithTheirErrors) {
  struct Case {
    FakeServerOptions opts;
    std::string error;
  };
  FakeServerOptions fail = fast(), cut = fast(), event = fast();
  fail.fail_every = 3;
  cut.disconnect_every = 3;
  event.error_event_every = 3;
  for (const auto& c : {Case{fail, "HTTP 500"}, Case{cut, "middle of the response"},
                        Case{event, "injected error event"}}) {
    FakeServerHarness h(c.opts);
    auto r = run(h.port(), Backend::kCompletions, 9, 6, 2);
    ASSERT_TRUE(r.ok());
    int failed = 0;
    for (const auto& o : r->outputs) {
      if (o.success) continue;
      ++failed;
      EXPECT_NE(o.error.find(c.error), std::string::npos) << o.error;
    }
    EXPECT_EQ(failed, 3) << c.error;
    auto m = compute_metrics(r->outputs, r->duration_s, {99}, {});
    EXPECT_EQ(m.completed, 6);
    EXPECT_EQ(m.failed, 3);
  }
}

TEST(Runner, HangingRequestsTimeOutInsteadOfHanging) {
  // Every request hangs (the server never answers), so each one surely runs into the timeout.
  FakeServerOptions o = fast();
  o.hang_every = 1;
  FakeServerHarness h(o);
  const double t0 = now_seconds();
  auto r = run(h.port(), Backend::kCompletions, 4, 3, 0, /*timeout=*/0.3);
  ASSERT_TRUE(r.ok());
  EXPECT_GE(now_seconds() - t0, 0.3);  // none gave up before its timeout
  int timed_out = 0;
  for (const auto& out : r->outputs) {
    EXPECT_FALSE(out.success);
    if (out.error.find("timed out") != std::string::npos) ++timed_out;
  }
  EXPECT_EQ(timed_out, 4);
  auto m = compute_metrics(r->outputs, r->duration_s, {99}, {});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 4);
}

TEST(Runner, RefusedConnectionsFail) {
  int port = 0;
  auto fd = net::listen_tcp("127.0.0.1", 0, 1, &port);
  ASSERT_TRUE(fd.ok());
  ::close(*fd);
  auto r = run(port, Backend::kCompletions, 5, 3);
  ASSERT_TRUE(r.ok());
  for (const auto& o : r->outputs) {
    EXPECT_FALSE(o.success);
    EXPECT_NE(o.error.find("refused"), std::string::npos) << o.error;
  }
}

TEST(Runner, StreamsWithoutUsageLeaveCountsToTheCaller) {
  FakeServerOptions o = fast();
  o.report_usage = false;
  FakeServerHarness h(o);
  auto r = run(h.port(), Backend::kCompletions, 2, 4);
  ASSERT_TRUE(r.ok());
  for (const auto& out : r->outputs) {
    EXPECT_TRUE(out.success);
    EXPECT_FALSE(out.output_tokens_from_usage);
    EXPECT_EQ(out.output_tokens, 0);
    EXPECT_EQ(out.prompt_len, 3);  // the dataset's count stays
  }
}

TEST(Runner, RequestRateSpreadsArrivals) {
  FakeServerHarness h(fast());
  RunnerOptions o;
  o.api_url = endpoint(h.port(), Backend::kCompletions);
  o.request_rate = 40;
  o.seed = 5;
  auto p = payloads(Backend::kCompletions, 8, "x", 2);
  // The schedule the runner draws (same seed): no request may be sent before its time.
  const std::vector<double> offsets = run_arrival_offsets(8, o.request_rate, o.burstiness, o.seed);
  ASSERT_EQ(offsets.size(), 8u);
  EXPECT_NEAR(offsets.back(), 0.2, 1e-9);  // rescaled to end at 8 / 40 s
  const double t0 = now_seconds();
  auto r = run_requests(o, p, std::vector<int64_t>(8, 1), nullptr);
  ASSERT_TRUE(r.ok());
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_TRUE(r->outputs[i].success) << r->outputs[i].error;
    EXPECT_GE(r->outputs[i].start_time, t0 + offsets[i]) << "request " << i << " sent early";
  }
  EXPECT_GE(r->duration_s, offsets.back());
}

TEST(ServerTokenizer, BuildsExactPromptsThroughVllmAndLlamaCppEndpoints) {
  for (const char* api : {"vllm", "llama.cpp"}) {
    FakeServerOptions o = fast();
    o.tokenize_api = api;
    FakeServerHarness h(o);
    auto tok = make_server_tokenizer({.base_url = h.base_url(), .model = "fake-model"});
    EXPECT_EQ(tok->num_special_tokens_to_add(), 1) << api;  // the fake server's BOS
    EXPECT_EQ(tok->vocab_size(), 0);
    auto ds = sample_random(
        *tok, {.num_prompts = 6, .input_len = 40, .output_len = 3, .range_ratio = 0.3, .seed = 4});
    ASSERT_TRUE(ds.ok()) << api << ": " << ds.status().to_string();
    for (const auto& r : ds->requests) {
      // The fake tokenizer is byte-level: the prompt has exactly prompt_len bytes.
      EXPECT_EQ(static_cast<int64_t>(r.prompt.size()), r.prompt_len) << api;
      EXPECT_GE(r.prompt_len, 27);
      EXPECT_LE(r.prompt_len, 51);
    }
    auto back = tok->decode({{104, 105}});
    ASSERT_TRUE(back.ok());
    EXPECT_EQ((*back)[0], "hi");
  }
}

TEST(ServerTokenizer, MissingEndpointsAreAClearError) {
  FakeServerOptions o = fast();
  o.tokenize_api = "none";
  FakeServerHarness h(o);
  auto tok = make_server_tokenizer({.base_url = h.base_url(), .model = "fake-model"});
  auto ds = sample_random(*tok, {.num_prompts = 2, .input_len = 10});
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("--tokenizer"), std::string::npos) << ds.status().message();
}

}  // namespace
}  // namespace strata::bench
