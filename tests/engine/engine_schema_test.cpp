// The 200 random JSON Schemas (tests/grammar/random_schema.h) driving real generation at
// temperature 1 on stories260K (real weights, a 512-token SentencePiece vocabulary): every output
// parses and validates against its schema.
#include "engine_schema_util.h"

namespace strata {
namespace {

using testing_schemas::generate_and_validate;

TEST(EngineSchemas, TwoHundredSchemasAtTemperatureOneOnStories260K) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  auto cfg =
      testing::engine_config(testing::shared_data_path("models/stories260K-hf"), "auto", 64 << 20);
  auto client = engine::EngineClient::create(cfg);
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto prompt = (*client)->info().tokenizer->encode("Once upon a time");
  ASSERT_TRUE(prompt.ok());
  generate_and_validate(**client, *prompt, 400);
}

}  // namespace
}  // namespace strata
