#include "bench/report.h"

#include "bench/progress.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/json.h"

namespace strata::bench {
namespace {

RequestOutput ok(double start, double ttft, std::vector<double> itl, double latency,
                 int64_t out_tokens, int64_t prompt) {
  RequestOutput o;
  o.success = true;
  o.start_time = start;
  o.ttft = ttft;
  o.itl = std::move(itl);
  o.latency = latency;
  o.output_tokens = out_tokens;
  o.prompt_len = prompt;
  o.generated_text.assign(1, 'x');
  return o;
}

std::vector<RequestOutput> example() {
  RequestOutput failed;
  failed.error = "HTTP 500 Internal Server Error: boom";
  return {ok(0.0, 0.1, {0.05, 0.05, 0.1}, 0.3, 4, 10), ok(0.5, 0.25, {0.25}, 0.5, 2, 20), failed,
          ok(0.9, 0.4, {}, 0.4, 1, 5)};
}

BlockOptions block_options() {
  BlockOptions o;
  o.max_concurrency = 4;
  o.request_rate = 10;
  o.duration_s = 2.0;
  o.goodput = true;
  o.percentile_metrics = {"ttft", "tpot", "itl", "e2el"};
  o.percentiles = {99};
  return o;
}

TEST(Report, PythonFormatting) {
  EXPECT_EQ(py_float(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(py_float(10), "10.0");
  EXPECT_EQ(py_float(0.5), "0.5");
  EXPECT_EQ(py_float(1.25), "1.25");
  EXPECT_EQ(py_float(0.0001), "0.0001");
  EXPECT_EQ(py_float(0.00001), "1e-05");
  EXPECT_EQ(py_float(1e16), "1e+16");
  EXPECT_EQ(py_float(123456.0), "123456.0");
  EXPECT_EQ(center(" Serving Benchmark Result ", 50, '='),
            "============ Serving Benchmark Result ============");
  EXPECT_EQ(center("Time to First Token", 50, '-'),
            "---------------Time to First Token----------------");
  EXPECT_EQ(percentile_key(99), "p99");
  EXPECT_EQ(percentile_key(99.9), "p99.9");
}

// The expected text was produced with Python's str.format, the layout vllm bench serve uses.
TEST(Report, ResultBlockMatchesVllmLayoutExactly) {
  auto outputs = example();
  auto m = compute_metrics(outputs, 2.0, {99}, {{"ttft", 250}});
  std::string expected =
      "============ Serving Benchmark Result ============\n"
      "Successful requests:                     3         \n"
      "Failed requests:                         1         \n"
      "Maximum request concurrency:             4         \n"
      "Request rate configured (RPS):           10.00     \n"
      "Benchmark duration (s):                  2.00      \n"
      "Total input tokens:                      35        \n"
      "Total generated tokens:                  7         \n"
      "Request throughput (req/s):              1.50      \n"
      "Request goodput (req/s):                 1.00      \n"
      "Output token throughput (tok/s):         3.50      \n"
      "Peak output token throughput (tok/s):    5.00      \n"
      "Peak concurrent requests:                2.00      \n"
      "Total token throughput (tok/s):          21.00     \n"
      "---------------Time to First Token----------------\n"
      "Mean TTFT (ms):                          250.00    \n"
      "Median TTFT (ms):                        250.00    \n"
      "P99 TTFT (ms):                           397.00    \n"
      "-----Time per Output Token (excl. 1st token)------\n"
      "Mean TPOT (ms):                          158.33    \n"
      "Median TPOT (ms):                        158.33    \n"
      "P99 TPOT (ms):                           248.17    \n"
      "---------------Inter-token Latency----------------\n"
      "Mean ITL (ms):                           112.50    \n"
      "Median ITL (ms):                         75.00     \n"
      "P99 ITL (ms):                            245.50    \n"
      "----------------End-to-end Latency----------------\n"
      "Mean E2EL (ms):                          400.00    \n"
      "Median E2EL (ms):                        400.00    \n"
      "P99 E2EL (ms):                           498.00    \n"
      "==================================================\n";
  EXPECT_EQ(format_result_block(m, outputs, block_options()), expected);
}

TEST(Report, OptionalLinesFollowTheRun) {
  auto outputs = example();
  auto m = compute_metrics(outputs, 2.0, {50, 99.9}, {});
  BlockOptions o = block_options();
  o.max_concurrency.reset();
  o.request_rate = std::numeric_limits<double>::infinity();
  o.goodput = false;
  o.percentile_metrics = {"ttft", "client_queue_time"};
  o.percentiles = {50, 99.9};
  std::string s = format_result_block(m, outputs, o);
  EXPECT_EQ(s.find("Maximum request concurrency"), std::string::npos);
  EXPECT_EQ(s.find("Request rate configured"), std::string::npos);
  EXPECT_EQ(s.find("goodput"), std::string::npos);
  EXPECT_EQ(s.find("Inter-token"), std::string::npos);
  EXPECT_EQ(s.find("Client Queue"), std::string::npos);  // only under --max-concurrency
  EXPECT_NE(s.find("P50 TTFT (ms):"), std::string::npos);
  EXPECT_NE(s.find("P99.9 TTFT (ms):"), std::string::npos);
  o.max_concurrency = 2;
  EXPECT_NE(format_result_block(m, outputs, o).find("Mean Client Queue Time (ms):"),
            std::string::npos);
}

TEST(Report, FailuresAreListed) {
  std::string s = format_failures(example());
  EXPECT_EQ(s,
            "Failed requests during benchmark run detected (capping to 10):\n"
            "Error 0: HTTP 500 Internal Server Error: boom\n");
  std::vector<RequestOutput> many(12);
  for (int i = 0; i < 12; ++i) many[i].error = std::string("e").append(std::to_string(i));
  std::string t = format_failures(many);
  EXPECT_NE(t.find("Error 9: e9"), std::string::npos);
  EXPECT_EQ(t.find("Error 10"), std::string::npos);
  EXPECT_EQ(format_failures({ok(0, 0.1, {}, 0.1, 1, 1)}), "");
}

TEST(Report, ResultJsonUsesVllmFieldNames) {
  auto outputs = example();
  auto m = compute_metrics(outputs, 2.0, {99}, {{"ttft", 250}});
  ResultMeta meta{.date = "20250101-120000",
                  .backend = "openai",
                  .model_id = "org/model-x",
                  .tokenizer_id = "org/model-x",
                  .num_prompts = 4,
                  .request_rate = 10,
                  .burstiness = 1.0,
                  .max_concurrency = 4,
                  .dataset_name = "random",
                  .random_input_len = 32,
                  .random_output_len = 8,
                  .metadata = {{"version", "0.1"}}};
  Json j = Json::parse(build_result_json(meta, m, outputs, block_options(), false));
  EXPECT_EQ(j["backend"], "openai");
  EXPECT_EQ(j["endpoint_type"], "openai");
  EXPECT_EQ(j["model_id"], "org/model-x");
  EXPECT_EQ(j["num_prompts"], 4);
  EXPECT_EQ(j["request_rate"], 10.0);
  EXPECT_EQ(j["max_concurrency"], 4);
  EXPECT_EQ(j["version"], "0.1");
  EXPECT_EQ(j["completed"], 3);
  EXPECT_EQ(j["failed"], 1);
  EXPECT_EQ(j["total_input_tokens"], 35);
  EXPECT_EQ(j["total_output_tokens"], 7);
  EXPECT_DOUBLE_EQ(j["duration"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["request_throughput"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["request_goodput"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["output_throughput"].get<double>(), 3.5);
  EXPECT_DOUBLE_EQ(j["total_token_throughput"].get<double>(), 21.0);
  EXPECT_DOUBLE_EQ(j["max_output_tokens_per_s"].get<double>(), 5.0);
  EXPECT_EQ(j["max_concurrent_requests"], 2);
  EXPECT_NEAR(j["mean_ttft_ms"].get<double>(), 250, 1e-9);
  EXPECT_NEAR(j["p99_ttft_ms"].get<double>(), 397, 1e-9);
  EXPECT_TRUE(j.contains("std_itl_ms"));
  EXPECT_TRUE(j.contains("median_e2el_ms"));
  EXPECT_FALSE(j.contains("ttfts"));
  EXPECT_FALSE(j.contains("errors"));

  Json d = Json::parse(build_result_json(meta, m, outputs, block_options(), true));
  EXPECT_EQ(d["input_lens"], Json::parse("[10, 20, 0, 5]"));
  EXPECT_EQ(d["output_lens"], Json::parse("[4, 2, 0, 1]"));
  EXPECT_EQ(d["itls"][0].size(), 3u);
  EXPECT_EQ(d["errors"][2], "HTTP 500 Internal Server Error: boom");
  EXPECT_EQ(d["generated_texts"][0], "x");
  EXPECT_EQ(d["ttfts"].size(), 4u);

  meta.request_rate = std::numeric_limits<double>::infinity();
  meta.max_concurrency.reset();
  Json k = Json::parse(build_result_json(meta, m, outputs, block_options(), false));
  EXPECT_EQ(k["request_rate"], "inf");
  EXPECT_TRUE(k["max_concurrency"].is_null());
}

TEST(Report, DefaultFileNameFollowsVllm) {
  ResultMeta meta{.date = "20250101-120000",
                  .backend = "openai",
                  .model_id = "org/model-x",
                  .request_rate = std::numeric_limits<double>::infinity(),
                  .max_concurrency = 8};
  EXPECT_EQ(default_result_filename(meta),
            "openai-infqps-concurrency8-model-x-20250101-120000.json");
  meta.label = "run";
  meta.request_rate = 2;
  meta.max_concurrency.reset();
  EXPECT_EQ(default_result_filename(meta), "run-2.0qps-model-x-20250101-120000.json");
}

TEST(Report, SweepTableAndChart) {
  auto outputs = example();
  auto m = compute_metrics(outputs, 2.0, {99}, {});
  std::vector<SweepRow> rows = {make_sweep_row(m, outputs, 2.0, 1, 32, 8),
                                make_sweep_row(m, outputs, 2.0, 4, 32, 8),
                                make_sweep_row(m, outputs, 2.0, std::nullopt, 32, 8)};
  EXPECT_NEAR(rows[0].per_user_tok_s, 1000.0 / m.tpot.mean_ms, 1e-9);
  EXPECT_NEAR(rows[0].input_tok_s, 17.5, 1e-9);
  EXPECT_NEAR(rows[0].ttft_p99_ms, 397, 1e-9);
  std::string table = format_sweep_table(rows);
  EXPECT_NE(table.find("| Concurrency |"), std::string::npos);
  EXPECT_NE(table.find("Per-user tok/s"), std::string::npos);
  EXPECT_NE(table.find("unlimited"), std::string::npos);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 5);
  std::string svg = render_sweep_svg(rows, "title <&>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("title &lt;&amp;&gt;"), std::string::npos);
  EXPECT_EQ(std::count(svg.begin(), svg.end(), '\n') > 20, true);
  size_t polylines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) {
    ++polylines;
  }
  EXPECT_EQ(polylines, 3u);  // throughput + TTFT + E2EL for one length pair
  Json sj = Json::parse(sweep_json(rows));
  ASSERT_EQ(sj.size(), 3u);
  EXPECT_EQ(sj[1]["max_concurrency"], 4);
  EXPECT_TRUE(sj[2]["max_concurrency"].is_null());
}

}  // namespace
}  // namespace strata::bench

namespace strata::bench {
namespace {

TEST(ProgressOutput, BarAndLines) {
  Progress lines(ProgressMode::kLines, 10, stdout, 5);
  lines.start(100.0);
  for (int i = 0; i < 3; ++i) lines.request_done(i != 1);
  lines.add_tokens(50);
  EXPECT_EQ(lines.render(102.0),
            "Progress: 3/10 requests done (30%), 2.0 s elapsed, 25.0 output tok/s, 1 failed");
  EXPECT_EQ(lines.tick_interval(), 5);
  Progress bar(ProgressMode::kBar, 4, stdout);
  bar.start(0.0);
  bar.request_done(true);
  bar.request_done(true);
  bar.add_tokens(10);
  EXPECT_EQ(bar.render(65.0),
            " 50% |###############...............| 2/4 [01:05 elapsed, 0.2 tok/s]");
  EXPECT_EQ(bar.tick_interval(), 0.1);
  EXPECT_EQ(choose_progress_mode(stdout, /*disabled=*/true), ProgressMode::kOff);
}

}  // namespace
}  // namespace strata::bench
