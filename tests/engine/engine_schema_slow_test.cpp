// The 200 random JSON Schemas at temperature 1 on a dummy model with Qwen2.5's 151k byte-level
// vocabulary (slow: the per-state token tables of 200 grammars over 151k tokens).
#include "engine_schema_util.h"

namespace strata {
namespace {

using testing_schemas::generate_and_validate;

TEST(EngineSchemasSlow, TwoHundredSchemasOnA151kByteLevelVocabulary) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  // A small Qwen2-shaped model with random weights and the real 151,936-entry vocabulary.
  const std::string dir = testing::write_config_dir(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true,
    "torch_dtype": "float32", "eos_token_id": 151643})");
  auto cfg = testing::engine_config(dir, "dummy", 64 << 20);
  cfg.tokenizer = testing::shared_data_path("tokenizers/qwen2.5");
  auto client = engine::EngineClient::create(cfg);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto prompt = (*client)->info().tokenizer->encode("Write the answer as JSON:");
  ASSERT_TRUE(prompt.ok());
  generate_and_validate(**client, *prompt, 600);
}

}  // namespace
}  // namespace strata
