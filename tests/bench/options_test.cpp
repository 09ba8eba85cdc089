#include <gtest/gtest.h>

#include <cmath>

#include "bench/serve.h"

namespace strata::bench {
namespace {

Result<ServeBenchConfig> parse(std::vector<std::string> argv) {
  OptionSet set;
  add_serve_bench_options(set);
  auto args = set.parse(argv);
  if (!args.ok()) return args.status();
  return parse_serve_bench_config(*args);
}

std::string error_of(std::vector<std::string> argv) {
  auto r = parse(std::move(argv));
  return r.ok() ? "" : r.status().message();
}

TEST(ServeOptions, DefaultsMatchVllm) {
  auto c = parse({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->base_url, "http://127.0.0.1:8000");
  EXPECT_EQ(c->endpoint, "/v1/completions");
  EXPECT_EQ(c->dataset_name, "random");
  EXPECT_EQ(c->num_prompts, 1000);
  EXPECT_EQ(c->input_lens, std::vector<int64_t>{1024});
  EXPECT_EQ(c->output_lens, std::vector<int64_t>{128});
  EXPECT_TRUE(std::isinf(c->request_rate));
  EXPECT_EQ(c->burstiness, 1.0);
  ASSERT_EQ(c->concurrencies.size(), 1u);
  EXPECT_FALSE(c->concurrencies[0].has_value());
  EXPECT_EQ(c->percentiles, std::vector<double>{99});
  EXPECT_TRUE(c->ignore_eos);  // forced for the random dataset, as in vLLM
  EXPECT_TRUE(c->goodput.empty());
}

TEST(ServeOptions, ParsesListsRatesGoodputAndSampling) {
  auto c = parse({"--base-url",
                  "http://h:9000/",
                  "--backend",
                  "openai-chat",
                  "--max-concurrency",
                  "1,4,16",
                  "--random-input-len",
                  "128,512",
                  "--request-rate",
                  "12.5",
                  "--burstiness",
                  "0.5",
                  "--goodput",
                  "ttft:500",
                  "tpot:50",
                  "--goodput=e2el:900",
                  "--temperature",
                  "0",
                  "--top-k",
                  "5",
                  "--extra-body",
                  "{\"seed\": 3}",
                  "--metric-percentiles",
                  "50,90,99",
                  "--header",
                  "X-A=1",
                  "--api-key",
                  "k",
                  "--metadata",
                  "tp=1"});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->base_url, "http://h:9000");
  EXPECT_EQ(c->endpoint, "/v1/chat/completions");
  ASSERT_EQ(c->concurrencies.size(), 3u);
  EXPECT_EQ(*c->concurrencies[2], 16);
  EXPECT_EQ(c->input_lens, (std::vector<int64_t>{128, 512}));
  EXPECT_EQ(c->request_rate, 12.5);
  EXPECT_EQ(c->burstiness, 0.5);
  EXPECT_EQ(c->goodput.at("ttft"), 500);
  EXPECT_EQ(c->goodput.at("tpot"), 50);
  EXPECT_EQ(c->goodput.at("e2el"), 900);
  EXPECT_TRUE(c->temperature_set);
  EXPECT_NE(c->extra_body_json.find("\"top_k\":5"), std::string::npos);
  EXPECT_NE(c->extra_body_json.find("\"seed\":3"), std::string::npos);
  EXPECT_NE(c->extra_body_json.find("\"temperature\":0"), std::string::npos);
  EXPECT_EQ(c->percentiles, (std::vector<double>{50, 90, 99}));
  ASSERT_EQ(c->headers.size(), 2u);
  EXPECT_EQ(c->headers[0].second, "Bearer k");
  EXPECT_EQ(c->headers[1].first, "X-A");
  EXPECT_EQ(c->metadata[0].first, "tp");
}

TEST(ServeOptions, ErrorsNameTheOption) {
  EXPECT_NE(error_of({"--dataset-name", "sonnet"}).find("--dataset-name"), std::string::npos);
  EXPECT_NE(error_of({"--dataset-name", "sharegpt"}).find("--dataset-path"), std::string::npos);
  EXPECT_NE(error_of({"--dataset-path", "x.json"}).find("--dataset-path"), std::string::npos);
  EXPECT_NE(error_of({"--request-rate", "fast"}).find("--request-rate"), std::string::npos);
  EXPECT_NE(error_of({"--request-rate", "0"}).find("--request-rate"), std::string::npos);
  EXPECT_NE(error_of({"--max-concurrency", "0"}).find("--max-concurrency"), std::string::npos);
  EXPECT_NE(error_of({"--max-concurrency", "4,x"}).find("--max-concurrency"), std::string::npos);
  EXPECT_NE(error_of({"--goodput", "ttfx:5"}).find("--goodput"), std::string::npos);
  EXPECT_NE(error_of({"--goodput", "ttft"}).find("--goodput"), std::string::npos);
  EXPECT_NE(error_of({"--goodput", "ttft:-1"}).find("--goodput"), std::string::npos);
  EXPECT_NE(error_of({"stray"}).find("stray"), std::string::npos);
  EXPECT_NE(error_of({"--percentile-metrics", "ttft,bogus"}).find("bogus"), std::string::npos);
  EXPECT_NE(error_of({"--metric-percentiles", "101"}).find("--metric-percentiles"),
            std::string::npos);
  EXPECT_NE(error_of({"--random-range-ratio", "1.5"}).find("--random-range-ratio"),
            std::string::npos);
  EXPECT_NE(error_of({"--backend", "tgi"}).find("--backend"), std::string::npos);
  EXPECT_NE(error_of({"--extra-body", "[1]"}).find("--extra-body"), std::string::npos);
  EXPECT_NE(error_of({"--header", "novalue"}).find("--header"), std::string::npos);
  EXPECT_NE(error_of({"--num-prompts", "0"}).find("--num-prompts"), std::string::npos);
  EXPECT_NE(error_of({"--dataset-name", "sharegpt", "--dataset-path", "f.json",
                      "--random-input-len", "1,2"})
                .find("random"),
            std::string::npos);
}

}  // namespace
}  // namespace strata::bench
