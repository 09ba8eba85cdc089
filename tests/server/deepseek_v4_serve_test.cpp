// `strata serve` on DeepSeek-V4 (the Flash config scaled down, dummy weights, an fp8 cache)
// through HTTP: prompts that share a 512-token prefix hit the prefix cache, resume from the
// window state kept at the block boundary, and answer exactly as a server without prefix
// caching does; /metrics counts the hits.
#include <gtest/gtest.h>

#include <string>

#include "core/json.h"
#include "net/blocking_http.h"
#include "server_process.h"
#include "test_util.h"

namespace strata::server {
namespace {

using testing::ServerProcess;

net::ClientResponse request(int port, const std::string& method, const std::string& path,
                            const std::string& body = "") {
  net::ClientRequest r;
  r.method = method;
  r.url = *net::parse_url("http://127.0.0.1:" + std::to_string(port) + path);
  r.body = body;
  r.timeout_s = 120;
  if (!body.empty()) r.headers.set("Content-Type", "application/json");
  auto resp = net::http_fetch(std::move(r));
  EXPECT_TRUE(resp.ok()) << resp.status().message();
  return resp.ok() ? *resp : net::ClientResponse{};
}

std::vector<std::string> serve_and_ask(bool prefix_caching, double* hits) {
  std::vector<std::string> args = {
      ::strata::testing::shared_data_path("configs/deepseek-v4-flash"),
      "--load-format",
      "dummy",
      "--hf-overrides",
      R"({"num_hidden_layers": 4, "hidden_size": 512, "n_routed_experts": 16,
          "num_attention_heads": 8, "q_lora_rank": 128, "o_groups": 4, "o_lora_rank": 64,
          "moe_intermediate_size": 128, "vocab_size": 32000, "index_n_heads": 4})",
      "--tokenizer",
      ::strata::testing::shared_data_path("tokenizers/llama2"),
      "--kv-cache-memory",
      "256MiB",
      "--max-model-len",
      "2048",
      "--max-num-seqs",
      "4",
      "--kv-cache-dtype",
      "fp8"};
  if (!prefix_caching) args.push_back("--no-enable-prefix-caching");
  ServerProcess p(args);
  EXPECT_TRUE(p.ok()) << p.output();
  std::vector<std::string> texts;
  if (!p.ok()) return texts;
  std::string prefix;
  for (int i = 0; i < 60; ++i) prefix += "Once upon a time a little robot counted the stars. ";
  for (const char* q : {"What is one?", "Tell me two.", "What is one?"}) {
    Json body = {{"prompt", prefix + q}, {"max_tokens", 8}, {"temperature", 0}};
    auto r = request(p.port(), "POST", "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    auto j = parse_json(r.body, "response");
    if (!j.ok()) continue;
    EXPECT_GT((*j)["usage"]["prompt_tokens"].get<int>(), 512);
    texts.push_back((*j)["choices"][0]["text"].get<std::string>());
  }
  auto m = request(p.port(), "GET", "/metrics");
  const std::string key = "vllm:prefix_cache_hits_total{";
  const size_t at = m.body.find(key);
  EXPECT_NE(at, std::string::npos) << m.body;
  if (at != std::string::npos) *hits = std::stod(m.body.substr(m.body.find("} ", at) + 2));
  return texts;
}

TEST(DeepseekV4Serve, PrefixHitsResumeFromTheWindowStateAndAnswerAsWithout) {
  STRATA_REQUIRE_SHARED("configs/deepseek-v4-flash/config.json");
  STRATA_REQUIRE_SHARED("tokenizers/llama2/tokenizer.model");
  double hits_on = -1, hits_off = -1;
  const auto with = serve_and_ask(true, &hits_on);
  const auto without = serve_and_ask(false, &hits_off);
  ASSERT_EQ(with.size(), 3u);
  ASSERT_EQ(without.size(), 3u);
  EXPECT_EQ(with, without);
  EXPECT_EQ(with[0], with[2]);  // the same prompt again: all its cached blocks hit
  // The second and third prompts share the first 512 tokens (two 256-token blocks) at least.
  EXPECT_GE(hits_on, 1024);
  EXPECT_EQ(hits_off, 0);
}

}  // namespace
}  // namespace strata::server
