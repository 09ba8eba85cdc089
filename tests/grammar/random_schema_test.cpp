// The random schema generator against the converter: all 200 schemas convert and parse; random
// valid instances (checked by the test's validator) are accepted by their grammar, compact and
// with whitespace; and random sentences of each grammar, walked byte by byte through the
// matcher, are valid JSON that the validator accepts (the grammar never allows an invalid value).
#include <gtest/gtest.h>

#include "grammar/json_schema.h"
#include "grammar/random_schema.h"

namespace strata::grammar::testing {
namespace {

constexpr int kSchemas = 200;

int nesting(const Json& v) {
  int d = 0;
  if (v.is_array() || v.is_object())
    for (const auto& x : v) d = std::max(d, nesting(x));
  return d + (v.is_array() || v.is_object());
}

std::shared_ptr<const Grammar> grammar_of(const Json& schema, JsonSchemaOptions o) {
  auto ebnf = json_schema_to_ebnf(schema, o);
  EXPECT_TRUE(ebnf.ok()) << ebnf.status().message() << "\n" << schema.dump(2);
  if (!ebnf.ok()) return nullptr;
  auto g = Grammar::parse_ebnf(*ebnf);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << *ebnf;
  return g.ok() ? *g : nullptr;
}

TEST(RandomSchemas, DeterministicAndVaried) {
  auto a = random_schemas(kSchemas), b = random_schemas(kSchemas);
  EXPECT_EQ(a, b);
  std::map<std::string, int> keywords;
  std::function<void(const Json&)> count = [&](const Json& s) {
    if (!s.is_object()) return;
    for (auto it = s.begin(); it != s.end(); ++it) {
      keywords[it.key()]++;
      if (it.value().is_object() || it.value().is_array()) {
        if (it.key() == "enum" || it.key() == "const") continue;
        for (const auto& x : it.value()) count(x);
        if (it.value().is_object()) count(it.value());
      }
    }
  };
  for (const auto& s : a) count(s);
  for (const char* k : {"type",
                        "properties",
                        "required",
                        "additionalProperties",
                        "enum",
                        "const",
                        "items",
                        "prefixItems",
                        "minItems",
                        "maxItems",
                        "anyOf",
                        "oneOf",
                        "allOf",
                        "$ref",
                        "$defs",
                        "nullable",
                        "minLength",
                        "maxLength",
                        "pattern",
                        "format",
                        "minimum",
                        "maximum",
                        "exclusiveMinimum",
                        "exclusiveMaximum"})
    EXPECT_GT(keywords[k], 3) << k;
}

TEST(RandomSchemas, ConvertAndAcceptValidInstances) {
  auto schemas = random_schemas(kSchemas);
  Rng rng(7);
  for (size_t i = 0; i < schemas.size(); ++i) {
    const Json& s = schemas[i];
    auto compact = grammar_of(s, {.any_whitespace = false});
    auto spaced = grammar_of(s, {});
    ASSERT_TRUE(compact && spaced) << "schema " << i;
    for (int k = 0; k < 10; ++k) {
      Json v = random_instance(s, rng);
      ASSERT_EQ(validate(s, v), "")
          << "schema " << i << ": the instance generator made an invalid value " << v.dump() << "\n"
          << s.dump(2);
      EXPECT_TRUE(compact->accepts(v.dump())) << "schema " << i << " rejects " << v.dump() << "\n"
                                              << s.dump(2) << "\n"
                                              << *json_schema_to_ebnf(s, {.any_whitespace = false});
      EXPECT_TRUE(spaced->accepts(v.dump())) << "schema " << i << " " << v.dump();
      if (nesting(v) <= 10) {
        EXPECT_TRUE(spaced->accepts(v.dump(2))) << "schema " << i << " " << v.dump(2);
      }
      if (v.is_object() && !v.empty()) {
        EXPECT_FALSE(compact->accepts(v.dump() + "}")) << i;
      }
    }
  }
}

TEST(RandomSchemas, GrammarSentencesAreValid) {
  auto schemas = random_schemas(kSchemas);
  Rng rng(11);
  int completed = 0, walks = 0;
  for (size_t i = 0; i < schemas.size(); ++i) {
    const Json& s = schemas[i];
    for (bool ws : {false, true}) {
      auto g = grammar_of(s, {.any_whitespace = ws});
      ASSERT_TRUE(g) << "schema " << i;
      for (int k = 0; k < 3; ++k) {
        ++walks;
        auto text = random_sentence(g, rng, 3000);
        if (!text) continue;
        ++completed;
        ASSERT_TRUE(Json::accept(*text)) << "schema " << i << " produced invalid JSON: " << *text;
        EXPECT_EQ(validate(s, Json::parse(*text)), "")
            << "schema " << i << " produced " << *text << "\n"
            << s.dump(2);
      }
    }
  }
  EXPECT_GT(completed, walks / 2) << "too few random walks completed";
}

}  // namespace
}  // namespace strata::grammar::testing
