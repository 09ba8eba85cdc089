// Shared by the schema-driven generation tests: the 200 random JSON Schemas of
// tests/grammar/random_schema.h at temperature 1, every output validated against its schema.
#pragma once

#include <gtest/gtest.h>

#include "core/json.h"
#include "engine_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/random_schema.h"
#include "grammar/vocabulary.h"

namespace strata {
namespace testing_schemas {

// Submits one request per schema (all at once), at temperature 1 with a seed each, and checks
// every output against its schema (all 200 must validate).
inline void generate_and_validate(engine::EngineClient& client, const std::vector<int32_t>& prompt,
                                  int max_tokens) {
  const auto& info = client.info();
  auto vocab = grammar::make_token_vocabulary(*info.tokenizer, info.vocab_size, info.eos_token_ids);
  const auto schemas = grammar::testing::random_schemas(200);
  std::vector<engine::EngineRequest> requests;
  for (size_t i = 0; i < schemas.size(); ++i) {
    auto ebnf = grammar::json_schema_to_ebnf(schemas[i]);
    ASSERT_TRUE(ebnf.ok()) << i << ": " << ebnf.status().message();
    auto g = grammar::Grammar::parse_ebnf(*ebnf);
    ASSERT_TRUE(g.ok()) << i << ": " << g.status().message();
    engine::EngineRequest r;
    r.request_id = "schema" + std::to_string(i);
    r.prompt_token_ids = prompt;
    r.params.temperature = 1.0f;
    r.params.seed = static_cast<int64_t>(i);
    r.params.max_tokens = max_tokens;
    r.constraint = grammar::CompiledGrammar::compile(*g, vocab);
    requests.push_back(std::move(r));
  }
  auto streams = testing::submit_together(client, std::move(requests));
  ASSERT_EQ(streams.size(), schemas.size());
  int valid = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    auto out = testing::collect(*streams[i]);
    auto value = parse_ordered_json(out[0].text, "output");
    if (!value.ok()) {
      ADD_FAILURE() << "schema " << i << " " << schemas[i].dump() << "\noutput is not JSON ("
                    << out[0].finish_reason << "): " << out[0].text;
      continue;
    }
    const std::string why = grammar::testing::validate(schemas[i], *value);
    EXPECT_EQ(why, "") << "schema " << i << " " << schemas[i].dump() << "\noutput " << out[0].text;
    valid += why.empty() ? 1 : 0;
  }
  EXPECT_EQ(valid, 200);
}

}  // namespace testing_schemas
}  // namespace strata
