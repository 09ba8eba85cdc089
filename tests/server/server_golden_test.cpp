// Greedy output of stories260K over the OpenAI API equals the golden file (token ids through
// return_tokens_as_token_ids, and the text), for completions and streams.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstdlib>

#include "core/file_util.h"
#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerHarness;

// A greedy completion of `prompt` (text or token ids), streamed or not: its token ids (through
// return_tokens_as_token_ids) and its text.
struct Served {
  std::vector<int32_t> ids;
  std::string text;
};
Served greedy_completion(ServerHarness& h, const std::string& model, const Json& prompt,
                         size_t max_tokens, bool stream) {
  Json req;
  req["model"] = model;
  req["prompt"] = prompt;
  req["max_tokens"] = max_tokens;
  req["temperature"] = 0;
  req["ignore_eos"] = true;
  req["logprobs"] = 0;
  req["return_tokens_as_token_ids"] = true;
  req["stream"] = stream;
  Served out;
  auto r = h.post("/v1/completions", req.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return out;
  for (const Json& b : testing::response_bodies(r.body, stream)) {
    const Json& ch = b["choices"][0];
    out.text += ch["text"].get<std::string>();
    for (const auto& t : ch["logprobs"]["tokens"]) {
      const std::string s = t;
      EXPECT_EQ(s.rfind("token_id:", 0), 0u) << s;
      out.ids.push_back(std::stoi(s.substr(9)));
    }
  }
  return out;
}

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
    for (bool stream : {false, true}) {
      const Served got = greedy_completion(h, "stories", cs["prompt"], want.size(), stream);
      EXPECT_EQ(got.ids, want) << "prompt '" << cs["prompt"] << "' stream " << stream;
      // The text as a detokenizer (HF, vLLM) gives it: for an empty prompt the continuation is
      // the whole text, whose first SentencePiece space is dropped ("text"); otherwise the
      // continuation keeps its leading space ("completion_text").
      const std::string want_text = cs["prompt"] == "" ? cs["text"].get<std::string>()
                                                       : cs["completion_text"].get<std::string>();
      EXPECT_EQ(got.text, want_text) << "prompt '" << cs["prompt"] << "'";
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
    // With its BOS, as the golden file gives it.
    for (bool stream : {false, true})
      EXPECT_EQ(greedy_completion(h, "tinyllama", cs["prompt_ids"], want.size(), stream).ids, want)
          << "prompt '" << cs["prompt"] << "' stream " << stream;
  }
}

// AWQ, GPTQ and compressed-tensors checkpoints (written by tests/model/int_quant_checkpoints.py)
// serve over the API: the served greedy ids, streamed and not, equal the engine's own for the
// same request. Skips, saying so, without /usr/bin/python3 (or $STRATA_PYTHON) with numpy.
TEST(ServerQuantized, AwqGptqAndCompressedTensorsCheckpointsServe) {
  const char* env = std::getenv("STRATA_PYTHON");
  const std::string py = env != nullptr && *env ? env : "/usr/bin/python3";
  if (std::system(("'" + py + "' -c 'import numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "'" << py << "' with numpy is needed to write the checkpoints";
  char tmpl[] = "/tmp/strata_server_quant_XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  ASSERT_EQ(std::system(("'" + py + "' '" +
                         strata::testing::repo_path("tests/model/int_quant_checkpoints.py") +
                         "' '" + dir + "' >/dev/null")
                            .c_str()),
            0);
  const std::vector<int32_t> prompt = {1, 17, 99, 3, 42};
  for (const char* name : {"awq_g32", "gptq_4bit_sym_g128", "ct_w8_sym_channel"}) {
    engine::EngineConfig e;
    e.model.model = dir + "/" + name;
    e.cache.kv_cache_memory_bytes = 8 << 20;
    e.threads = 2;
    std::vector<int32_t> want;
    {
      auto client = engine::EngineClient::create(e);
      ASSERT_TRUE(client.ok()) << name << ": " << client.status().to_string();
      engine::EngineRequest r;
      r.request_id = "direct";
      r.prompt_token_ids = prompt;
      r.params.temperature = 0;
      r.params.max_tokens = 8;
      r.params.ignore_eos = true;
      auto st = (*client)->submit(r);
      ASSERT_TRUE(st.ok()) << st.status().to_string();
      while (auto c = (*st)->next())
        want.insert(want.end(), c->token_ids.begin(), c->token_ids.end());
    }
    ASSERT_EQ(want.size(), 8u) << name;
    ServerConfig c = testing::local_server_config();
    c.served_model_names = {"q"};
    ServerHarness h(e, c);
    ASSERT_TRUE(h.ok()) << name;
    for (bool stream : {false, true})
      EXPECT_EQ(greedy_completion(h, "q", prompt, 8, stream).ids, want)
          << name << " stream " << stream;
  }
}

}  // namespace
}  // namespace strata::server
