// End-to-end checks of the benchmark against the scripted fake server: measured TTFT and ITL
// match the scripted delays, and the real `strata bench serve` binary prints the vLLM block and
// writes the result files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <numeric>

#include "bench/metrics.h"
#include "bench/serve.h"
#include "core/file_util.h"
#include "core/json.h"
#include "fake_server_fixture.h"
#include "net/socket.h"
#include "result_checks.h"
#include "test_util.h"

namespace strata::bench {
namespace {

using testing::endpoint;
using testing::FakeServerHarness;
using testing::payloads;

TEST(BenchE2E, MeasuredTimesCoverTheScriptedDelaysAndAddUp) {
  FakeServerOptions fo;
  fo.ttft_s = 0.050;
  fo.itl_s = 0.020;
  FakeServerHarness h(fo);
  RunnerOptions o;
  o.api_url = endpoint(h.port(), Backend::kCompletions);
  o.max_concurrency = 4;
  auto r = run_requests(o, payloads(Backend::kCompletions, 16, "timing", 10),
                        std::vector<int64_t>(16, 7), nullptr);
  ASSERT_TRUE(r.ok());
  auto m = compute_metrics(r->outputs, r->duration_s, {50, 99}, {});
  ASSERT_EQ(m.completed, 16);
  // The server sends the first token 50 ms after it gets the request and each later one 20 ms
  // after the previous: lower bounds whatever the machine's speed. (Upper bounds would depend on
  // how quickly this machine runs the client, so none are checked.)
  std::vector<double> ttfts, e2els, tpots, itls;
  for (const auto& out : r->outputs) {
    ASSERT_TRUE(out.success) << out.error;
    EXPECT_EQ(out.output_tokens, 10);
    ASSERT_EQ(out.itl.size(), 9u);
    EXPECT_GE(out.ttft, 0.050);
    EXPECT_GE(out.latency, 0.050 + 9 * 0.020);
    const double gaps = std::accumulate(out.itl.begin(), out.itl.end(), 0.0);
    EXPECT_NEAR(out.latency, out.ttft + gaps, 1e-9);  // the gaps add up to the decode time
    EXPECT_LE(out.start_time + out.latency, r->outputs.front().start_time + r->duration_s + 1e-9);
    ttfts.push_back(out.ttft);
    e2els.push_back(out.latency);
    tpots.push_back((out.latency - out.ttft) / 9);
    itls.insert(itls.end(), out.itl.begin(), out.itl.end());
  }
  // The summaries are the means of the per-request values.
  EXPECT_NEAR(m.ttft.mean_ms, testing::mean_of(ttfts) * 1e3, 1e-6);
  EXPECT_NEAR(m.e2el.mean_ms, testing::mean_of(e2els) * 1e3, 1e-6);
  EXPECT_NEAR(m.tpot.mean_ms, testing::mean_of(tpots) * 1e3, 1e-6);
  EXPECT_NEAR(m.itl.mean_ms, testing::mean_of(itls) * 1e3, 1e-6);
  EXPECT_GE(m.ttft.median_ms, 50.0);
  EXPECT_GE(m.e2el.median_ms, 230.0);
  EXPECT_EQ(m.total_output, 160);
  EXPECT_EQ(m.max_concurrent_requests, 4);
}

struct CliResult {
  int exit_code = -1;
  std::string out;
};

CliResult run_cli(const std::string& args) {
  std::string cmd = std::string(STRATA_BINARY_DIR) + "/strata " + args + " 2>&1";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string fresh_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + "/strata_bench_" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Asserts that `lines` appear in `text` in this order.
void expect_in_order(const std::string& text, const std::vector<std::string>& lines) {
  size_t pos = 0;
  for (const auto& l : lines) {
    size_t found = text.find(l, pos);
    ASSERT_NE(found, std::string::npos) << "missing or out of order: '" << l << "' in\n" << text;
    pos = found + l.size();
  }
}

FakeServerOptions quick() {
  FakeServerOptions o;
  o.ttft_s = 0.005;
  o.itl_s = 0.002;
  return o;
}

TEST(BenchE2E, CliPrintsTheBlockAndSavesTheJson) {
  FakeServerHarness h(quick());
  std::string dir = fresh_dir("cli");
  auto r = run_cli("bench serve --base-url " + h.base_url() +
                   " --num-prompts 8 --random-input-len 32 --random-output-len 4 "
                   "--max-concurrency 2 --temperature 0 --goodput ttft:1000 tpot:1000 "
                   "--save-result --save-detailed --result-dir " +
                   dir + " --result-filename r.json --progress-interval 0.01");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  expect_in_order(r.out, {"Starting main benchmark run...",
                          "Traffic request rate: inf",
                          "Burstiness factor: 1.0 (Poisson process)",
                          "Maximum request concurrency: 2",
                          "Progress: 8/8 requests done",
                          "============ Serving Benchmark Result ============",
                          "Successful requests:                     8",
                          "Failed requests:                         0",
                          "Maximum request concurrency:             2",
                          "Benchmark duration (s):",
                          "Total input tokens:                      256",
                          "Total generated tokens:                  32",
                          "Request throughput (req/s):",
                          "Request goodput (req/s):",
                          "Output token throughput (tok/s):",
                          "Peak output token throughput (tok/s):",
                          "Peak concurrent requests:                2.00",
                          "Total token throughput (tok/s):",
                          "---------------Time to First Token----------------",
                          "Mean TTFT (ms):",
                          "Median TTFT (ms):",
                          "P99 TTFT (ms):",
                          "-----Time per Output Token (excl. 1st token)------",
                          "Mean TPOT (ms):",
                          "Median TPOT (ms):",
                          "P99 TPOT (ms):",
                          "---------------Inter-token Latency----------------",
                          "Mean ITL (ms):",
                          "Median ITL (ms):",
                          "P99 ITL (ms):",
                          "----------------End-to-end Latency----------------",
                          "Mean E2EL (ms):",
                          "Median E2EL (ms):",
                          "P99 E2EL (ms):",
                          "==================================================",
                          "Saved the result to " + dir + "/r.json"});
  auto text = read_file(dir + "/r.json");
  ASSERT_TRUE(text.ok());
  Json j = Json::parse(*text);
  EXPECT_EQ(j["completed"], 8);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["total_input_tokens"], 256);
  EXPECT_EQ(j["total_output_tokens"], 32);
  EXPECT_EQ(j["max_concurrency"], 2);
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["backend"], "openai");
  EXPECT_EQ(j["model_id"], "fake-model");
  EXPECT_EQ(j["num_prompts"], 8);
  EXPECT_DOUBLE_EQ(j["request_goodput"].get<double>(), j["request_throughput"].get<double>());
  EXPECT_EQ(j["input_lens"].size(), 8u);
  EXPECT_EQ(j["itls"][0].size(), 3u);
  EXPECT_TRUE(j.contains("p99_e2el_ms"));
  for (const auto& len : j["output_lens"]) EXPECT_EQ(len, 4);
  for (const auto& len : j["input_lens"]) EXPECT_EQ(len, 32);
  testing::expect_consistent_result(j, /*min_ttft_s=*/0.005);
}

TEST(BenchE2E, CliSweepWritesTableJsonAndChart) {
  FakeServerHarness h(quick());
  std::string dir = fresh_dir("sweep");
  auto r = run_cli("bench serve --base-url " + h.base_url() +
                   " --model fake-model --num-prompts 4 --random-input-len 16 "
                   "--random-output-len 2,3 --max-concurrency 1,4 --disable-tqdm --save-result "
                   "--result-dir " +
                   dir + " --result-filename s.json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  expect_in_order(r.out, {"Sweep point 1/4: max concurrency 1, input len 16, output len 2",
                          "Sweep point 4/4: max concurrency 4, input len 16, output len 3",
                          "Sweep Summary", "| Concurrency | Input len | Output len |"});
  for (const char* f : {"s-c1-in16-out2.json", "s-c4-in16-out2.json", "s-c1-in16-out3.json",
                        "s-c4-in16-out3.json", "s-sweep.json", "s-sweep.svg"}) {
    EXPECT_TRUE(file_exists(dir + "/" + f)) << f << "\n" << r.out;
  }
  Json sweep = Json::parse(*read_file(dir + "/s-sweep.json"));
  ASSERT_EQ(sweep.size(), 4u);
  EXPECT_EQ(sweep[3]["max_concurrency"], 4);
  EXPECT_EQ(sweep[3]["random_output_len"], 3);
  std::string svg = *read_file(dir + "/s-sweep.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("Output throughput"), std::string::npos);
}

TEST(BenchE2E, CliCountsFailuresWithTheirErrors) {
  FakeServerOptions o = quick();
  o.fail_every = 2;
  FakeServerHarness h(o);
  auto r = run_cli("bench serve --base-url " + h.base_url() +
                   " --backend openai-chat --num-prompts 6 --random-input-len 8 "
                   "--random-output-len 2 --disable-tqdm");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  expect_in_order(
      r.out, {"Failed requests during benchmark run detected (capping to 10):", "Error 0: HTTP 500",
              "injected failure", "Successful requests:                     3",
              "Failed requests:                         3"});
}

TEST(BenchE2E, CliShareGptAgainstChat) {
  STRATA_REQUIRE_SHARED("datasets/ShareGPT_V3_filtered_500.json");
  FakeServerHarness h(quick());
  auto r = run_cli("bench serve --base-url " + h.base_url() +
                   " --backend openai-chat --dataset-name sharegpt --dataset-path " +
                   strata::testing::shared_data_path("datasets/ShareGPT_V3_filtered_500.json") +
                   " --num-prompts 10 --sharegpt-output-len 3 --request-rate 200 --disable-tqdm");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  expect_in_order(r.out,
                  {"Traffic request rate: 200.0", "Successful requests:                     10",
                   "Request rate configured (RPS):           200.00",
                   "Total generated tokens:                  30"});
}

TEST(BenchE2E, CliWithLocalTokenizer) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf/tokenizer.json");
  FakeServerHarness h(quick());
  std::string dir = fresh_dir("localtok");
  std::string tok = strata::testing::shared_data_path("models/stories260K-hf");
  auto r = run_cli("bench serve --base-url " + h.base_url() + " --tokenizer " + tok +
                   " --num-prompts 4 --random-input-len 40 --random-output-len 3 --disable-tqdm "
                   "--save-result --result-dir " +
                   dir + " --result-filename t.json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  Json j = Json::parse(*read_file(dir + "/t.json"));
  EXPECT_EQ(j["tokenizer_id"], tok);
  EXPECT_EQ(j["completed"], 4);
  EXPECT_EQ(j["total_output_tokens"], 12);
  auto bad = run_cli("bench serve --base-url " + h.base_url() +
                     " --tokenizer /nonexistent/tok --num-prompts 1");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("--tokenizer /nonexistent/tok"), std::string::npos) << bad.out;
}

TEST(BenchE2E, CliErrorsAreClear) {
  int port = 0;
  {
    auto fd = net::listen_tcp("127.0.0.1", 0, 1, &port);
    ASSERT_TRUE(fd.ok());
    ::close(*fd);
  }
  auto down = run_cli("bench serve --port " + std::to_string(port) + " --num-prompts 2");
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_NE(down.out.find("refused"), std::string::npos) << down.out;
  EXPECT_NE(down.out.find("--model"), std::string::npos) << down.out;
  auto bad = run_cli("bench serve --dataset-name nope");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("--dataset-name"), std::string::npos) << bad.out;
  auto unknown = run_cli("bench serve --no-such-flag 1");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.out.find("no-such-flag"), std::string::npos) << unknown.out;
}

TEST(BenchE2E, OutputTokensAreRecountedWhenTheServerSendsNoUsage) {
  FakeServerOptions o = quick();
  o.report_usage = false;
  FakeServerHarness h(o);
  OptionSet set;
  add_serve_bench_options(set);
  auto args = set.parse({"--base-url", h.base_url(), "--num-prompts", "3", "--random-input-len",
                         "10", "--random-output-len", "4", "--disable-tqdm", "--temperature", "0"});
  ASSERT_TRUE(args.ok());
  auto config = parse_serve_bench_config(*args);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(run_serve_bench(*config, out), 0);
  std::rewind(out);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), out)) > 0) text.append(buf, n);
  std::fclose(out);
  // Without usage the generated text " tok tok tok tok" is re-tokenized by the server's
  // byte-level /tokenize: 16 tokens per request rather than 4 chunks.
  expect_in_order(text, {"Total input tokens:                      27",
                         "Total generated tokens:                  48"});
}

}  // namespace
}  // namespace strata::bench
