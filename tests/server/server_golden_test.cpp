// Greedy output of stories260K over the OpenAI API equals the golden file (token ids through
// return_tokens_as_token_ids, and the text), for completions and streams.
#include <gtest/gtest.h>

#include "core/file_util.h"
#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerHarness;

TEST(ServerGolden, Stories260KGreedyMatchesGolden) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf/config.json");
  STRATA_REQUIRE_SHARED("golden/stories260K.json");
  auto golden = read_json_file(strata::testing::shared_data_path("golden/stories260K.json"));
  ASSERT_TRUE(golden.ok());
  engine::EngineConfig e;
  e.model.model = strata::testing::shared_data_path("models/stories260K-hf");
  e.cache.kv_cache_memory_bytes = 8 << 20;
  e.threads = 1;
  ServerConfig c = testing::local_server_config();
  c.served_model_names = {"stories"};
  ServerHarness h(e, c);
  ASSERT_TRUE(h.ok());
  for (const auto& cs : (*golden)["cases"]) {
    const std::vector<int32_t> want = cs["generated_ids"].get<std::vector<int32_t>>();
    Json req;
    req["model"] = "stories";
    req["prompt"] = cs["prompt"];
    req["max_tokens"] = want.size();
    req["temperature"] = 0;
    req["ignore_eos"] = true;
    req["logprobs"] = 0;
    req["return_tokens_as_token_ids"] = true;
    for (bool stream : {false, true}) {
      req["stream"] = stream;
      auto r = h.post("/v1/completions", req.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      std::vector<int32_t> got;
      std::string text;
      std::vector<Json> bodies;
      if (stream) {
        for (const auto& d : testing::sse_data(r.body))
          if (d != "[DONE]") bodies.push_back(testing::parse(d));
      } else {
        bodies.push_back(testing::parse(r.body));
      }
      for (const Json& b : bodies) {
        const Json& ch = b["choices"][0];
        text += ch["text"].get<std::string>();
        for (const auto& t : ch["logprobs"]["tokens"]) {
          std::string s = t;
          ASSERT_EQ(s.rfind("token_id:", 0), 0u) << s;
          got.push_back(std::stoi(s.substr(9)));
        }
      }
      EXPECT_EQ(got, want) << "prompt '" << cs["prompt"] << "' stream " << stream;
      // The text as a detokenizer (HF, vLLM) gives it: for an empty prompt the continuation is
      // the whole text, whose first SentencePiece space is dropped ("text"); otherwise the
      // continuation keeps its leading space ("completion_text").
      const std::string want_text = cs["prompt"] == "" ? cs["text"].get<std::string>()
                                                       : cs["completion_text"].get<std::string>();
      EXPECT_EQ(text, want_text) << "prompt '" << cs["prompt"] << "'";
    }
  }
}

// TinyLLama-v0 (real weights in Q4_0) served over the API: the golden greedy ids, streamed and
// not, run by the integer kernels.
TEST(ServerGolden, TinyLlamaQ4_0GreedyMatchesGolden) {
  STRATA_REQUIRE_SHARED("models/tinyllama-v0/TinyLLama-v0.Q4_0.gguf");
  STRATA_REQUIRE_SHARED("golden/tinyllama-v0.json");
  auto golden = read_json_file(strata::testing::shared_data_path("golden/tinyllama-v0.json"));
  ASSERT_TRUE(golden.ok());
  engine::EngineConfig e;
  e.model.model = strata::testing::shared_data_path("models/tinyllama-v0/TinyLLama-v0.Q4_0.gguf");
  e.cache.kv_cache_memory_bytes = 8 << 20;
  e.threads = 2;
  ServerConfig c = testing::local_server_config();
  c.served_model_names = {"tinyllama"};
  ServerHarness h(e, c);
  ASSERT_TRUE(h.ok());
  for (const auto& cs : (*golden)["cases"]) {
    const std::vector<int32_t> want = cs["generated_ids"].get<std::vector<int32_t>>();
    Json req;
    req["model"] = "tinyllama";
    req["prompt"] = cs["prompt_ids"];  // with its BOS, as the golden file gives it
    req["max_tokens"] = want.size();
    req["temperature"] = 0;
    req["ignore_eos"] = true;
    req["logprobs"] = 0;
    req["return_tokens_as_token_ids"] = true;
    for (bool stream : {false, true}) {
      req["stream"] = stream;
      auto r = h.post("/v1/completions", req.dump());
      ASSERT_EQ(r.status, 200) << r.body;
      std::vector<int32_t> got;
      std::vector<Json> bodies;
      if (stream) {
        for (const auto& d : testing::sse_data(r.body))
          if (d != "[DONE]") bodies.push_back(testing::parse(d));
      } else {
        bodies.push_back(testing::parse(r.body));
      }
      for (const Json& b : bodies)
        for (const auto& t : b["choices"][0]["logprobs"]["tokens"]) {
          std::string s = t;
          ASSERT_EQ(s.rfind("token_id:", 0), 0u) << s;
          got.push_back(std::stoi(s.substr(9)));
        }
      EXPECT_EQ(got, want) << "prompt '" << cs["prompt"] << "' stream " << stream;
    }
  }
}

}  // namespace
}  // namespace strata::server
