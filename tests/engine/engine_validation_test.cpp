// Validation errors carry the request field at fault explicitly (EngineClient::submit's
// bad_field), whatever the wording of their message.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "engine/engine_config.h"
#include "engine_test_util.h"

namespace strata {
namespace {

TEST(EngineValidation, SubmitNamesTheFieldAtFault) {
  auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy", 8 << 20);
  c.scheduler.max_model_len = 64;
  auto created = engine::EngineClient::create(c);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  engine::EngineClient& client = **created;
  struct Case {
    const char* what;
    std::function<void(engine::EngineRequest&)> edit;
    const char* field;
  };
  const Case cases[] = {
      {"empty prompt", [](engine::EngineRequest& r) { r.prompt_token_ids.clear(); }, "prompt"},
      {"token id", [](engine::EngineRequest& r) { r.prompt_token_ids.push_back(9999); }, "prompt"},
      {"too long", [](engine::EngineRequest& r) { r.prompt_token_ids.assign(64, 5); }, "prompt"},
      {"top_p", [](engine::EngineRequest& r) { r.params.top_p = 0; }, "top_p"},
      {"logit_bias", [](engine::EngineRequest& r) { r.params.logit_bias[5000] = 1; }, "logit_bias"},
      {"stop", [](engine::EngineRequest& r) { r.params.stop = {""}; }, "stop"},
      {"min_tokens",
       [](engine::EngineRequest& r) {
         r.params.max_tokens = 2;
         r.params.min_tokens = 3;
       },
       "min_tokens"},
  };
  for (const auto& k : cases) {
    engine::EngineRequest r = testing::greedy_request("r", {256, 72}, 4);
    k.edit(r);
    std::string field = "unset";
    auto s = client.submit(r, &field);
    ASSERT_FALSE(s.ok()) << k.what;
    EXPECT_EQ(field, k.field) << k.what << ": " << s.status().message();
  }
  std::string field = "unset";
  auto ok = client.submit(testing::greedy_request("ok", {256, 72}, 2), &field);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(field, "");
  EXPECT_EQ(testing::collect(**ok)[0].tokens.size(), 2u);
}

// --generation-config: auto (the model's file), a folder holding generation_config.json, or
// vllm (vLLM's defaults), as vLLM takes it.
TEST(EngineGenerationConfig, AutoFolderOrVllm) {
  const std::string dir = testing::write_config_dir("{}");
  ASSERT_TRUE(write_file(dir + "/generation_config.json",
                         R"({"temperature": 0.25, "top_k": 7, "eos_token_id": [3, 4]})")
                  .ok());
  auto defaults = [](const std::string& how) {
    auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy", 4 << 20);
    c.scheduler.max_model_len = 64;
    c.generation_config = how;
    auto e = engine::Engine::create(c);
    EXPECT_TRUE(e.ok()) << how << ": " << e.status().message();
    return e.ok() ? std::make_pair((*e)->default_sampling_params(), (*e)->eos_token_ids())
                  : std::make_pair(sampling::SamplingParams{}, std::vector<int32_t>{});
  };
  auto [folder, folder_eos] = defaults(dir);
  EXPECT_FLOAT_EQ(folder.temperature, 0.25f);
  EXPECT_EQ(folder.top_k, 7);
  EXPECT_NE(std::find(folder_eos.begin(), folder_eos.end(), 3), folder_eos.end());
  auto [vllm, vllm_eos] = defaults("vllm");
  EXPECT_EQ(vllm, sampling::SamplingParams{});
  EXPECT_EQ(std::find(vllm_eos.begin(), vllm_eos.end(), 3), vllm_eos.end());

  OptionSet o;
  engine::add_engine_options(o);
  auto args = o.parse({"m", "--generation-config", dir});
  ASSERT_TRUE(args.ok());
  auto cfg = engine::engine_config_from_args(*args);
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  EXPECT_EQ(cfg->generation_config, dir);
  args = o.parse({"m", "--generation-config", dir + "/missing"});
  ASSERT_TRUE(args.ok());
  cfg = engine::engine_config_from_args(*args);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("a folder holding generation_config.json"),
            std::string::npos)
      << cfg.status().message();
}

}  // namespace
}  // namespace strata
