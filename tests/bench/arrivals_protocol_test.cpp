#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "bench/arrivals.h"
#include "bench/openai_protocol.h"
#include "core/json.h"

namespace strata::bench {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Arrivals, InfiniteRateSendsEverythingAtOnce) {
  Rng rng(0);
  auto t = arrival_offsets(5, kInf, 1.0, &rng);
  EXPECT_EQ(t, std::vector<double>(5, 0.0));
}

TEST(Arrivals, RescaledSoTheLastArrivalIsAtNOverRate) {
  Rng rng(42);
  auto t = arrival_offsets(200, 10.0, 1.0, &rng);
  ASSERT_EQ(t.size(), 200u);
  EXPECT_NEAR(t.back(), 20.0, 1e-9);
  EXPECT_GT(t.front(), 0.0);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_GE(t[i], t[i - 1]);
  Rng again(42);
  EXPECT_EQ(arrival_offsets(200, 10.0, 1.0, &again), t);
}

TEST(Arrivals, InfiniteBurstinessIsEvenlySpaced) {
  Rng rng(1);
  auto t = arrival_offsets(4, 2.0, kInf, &rng);
  EXPECT_EQ(t, (std::vector<double>{0.5, 1.0, 1.5, 2.0}));
}

double gap_cv(double burstiness) {
  Rng rng(9);
  auto t = arrival_offsets(20000, 100.0, burstiness, &rng);
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  double mean = 0, var = 0;
  for (double g : gaps) mean += g;
  mean /= gaps.size();
  for (double g : gaps) var += (g - mean) * (g - mean);
  var /= gaps.size();
  return std::sqrt(var) / mean;
}

TEST(Arrivals, BurstinessSetsTheGapVariation) {
  // Gamma gaps with shape k have coefficient of variation 1/sqrt(k).
  EXPECT_NEAR(gap_cv(1.0), 1.0, 0.05);
  EXPECT_NEAR(gap_cv(0.25), 2.0, 0.15);
  EXPECT_NEAR(gap_cv(4.0), 0.5, 0.03);
}

TEST(Arrivals, GammaMoments) {
  for (double shape : {0.3, 1.0, 2.5}) {
    Rng rng(123);
    const int n = 200000;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; ++i) {
      double x = sample_gamma(&rng, shape, 2.0);
      ASSERT_GE(x, 0.0);
      sum += x;
      sq += x * x;
    }
    double mean = sum / n, var = sq / n - mean * mean;
    EXPECT_NEAR(mean, shape * 2.0, 0.02 * shape * 2.0) << shape;
    EXPECT_NEAR(var, shape * 4.0, 0.05 * shape * 4.0) << shape;
  }
}

TEST(Protocol, CompletionsPayload) {
  PayloadOptions o{.model = "m",
                   .ignore_eos = true,
                   .logprobs = 2,
                   .extra_body_json = R"({"temperature": 0, "top_k": 5})"};
  auto p = build_payloads(Backend::kCompletions, o, {{"hello", 3, 7}});
  ASSERT_TRUE(p.ok());
  Json j = Json::parse((*p)[0]);
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["prompt"], "hello");
  EXPECT_EQ(j["max_tokens"], 7);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_EQ(j["logprobs"], 2);
  EXPECT_EQ(j["temperature"], 0);
  EXPECT_EQ(j["top_k"], 5);
  EXPECT_FALSE(j.contains("messages"));
}

TEST(Protocol, ChatPayload) {
  auto p = build_payloads(Backend::kChat, {.model = "m"}, {{"hi \"there\"", 3, 4}});
  ASSERT_TRUE(p.ok());
  Json j = Json::parse((*p)[0]);
  EXPECT_EQ(j["messages"][0]["role"], "user");
  EXPECT_EQ(j["messages"][0]["content"], "hi \"there\"");
  EXPECT_EQ(j["max_completion_tokens"], 4);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_FALSE(j.contains("ignore_eos"));
  EXPECT_FALSE(build_payloads(Backend::kChat, {.extra_body_json = "[1]"}, {{"x", 1, 1}}).ok());
  EXPECT_FALSE(build_payloads(Backend::kChat, {.extra_body_json = "{"}, {{"x", 1, 1}}).ok());
}

TEST(Protocol, ParsesStreamChunks) {
  auto c = parse_stream_chunk(
      R"({"id":"1","object":"text_completion","choices":[{"index":0,"text":" hi","finish_reason":null}]})",
      Backend::kCompletions);
  EXPECT_TRUE(c.has_choices);
  EXPECT_EQ(c.text, " hi");
  EXPECT_EQ(c.completion_tokens, -1);
  auto u = parse_stream_chunk(
      R"({"id":"1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}})",
      Backend::kCompletions);
  EXPECT_FALSE(u.has_choices);
  EXPECT_EQ(u.prompt_tokens, 12);
  EXPECT_EQ(u.completion_tokens, 7);
  auto chat = parse_stream_chunk(
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]})", Backend::kChat);
  EXPECT_TRUE(chat.has_choices);
  EXPECT_EQ(chat.text, "Hel");
  auto reasoning = parse_stream_chunk(
      R"({"choices":[{"delta":{"reasoning_content":"think","content":null}}]})", Backend::kChat);
  EXPECT_TRUE(reasoning.has_choices);
  EXPECT_EQ(reasoning.text, "think");
  EXPECT_TRUE(parse_stream_chunk("[DONE]", Backend::kChat).done);
  auto err = parse_stream_chunk(R"({"error":{"message":"engine died","code":500}})",
                                Backend::kCompletions);
  EXPECT_NE(err.error.find("engine died"), std::string::npos);
  auto garbage = parse_stream_chunk("{not json", Backend::kCompletions);
  EXPECT_FALSE(garbage.error.empty());
  EXPECT_FALSE(parse_stream_chunk(R"({"choices":[]})", Backend::kChat).has_choices);
}

TEST(Protocol, Backends) {
  EXPECT_EQ(*parse_backend("openai"), Backend::kCompletions);
  EXPECT_EQ(*parse_backend("vllm"), Backend::kCompletions);
  EXPECT_EQ(*parse_backend("openai-chat"), Backend::kChat);
  auto bad = parse_backend("tgi");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("openai-chat"), std::string::npos);
  EXPECT_STREQ(default_endpoint(Backend::kChat), "/v1/chat/completions");
}

}  // namespace
}  // namespace strata::bench
