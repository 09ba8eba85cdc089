// Prints, one JSON object a line, each random schema (random_schema.h) with JSON texts that the
// converter's grammars produce or accept: random valid instances (compact and indented) and
// random sentences of the grammars (compact and with whitespace). ajv_check.mjs validates every
// text against its schema with ajv, the validator the end-to-end tests and most clients use.
#include <iostream>

#include "grammar/json_schema.h"
#include "grammar/random_schema.h"

namespace {

// Schemas aimed at the grammars most likely to be wrong in detail, walked many times each.
const char* const kFocused[] = {
    R"({"type":"string","format":"date"})",
    R"({"type":"string","format":"time"})",
    R"({"type":"string","format":"date-time"})",
    R"({"type":"string","format":"email"})",
    R"({"type":"string","format":"uuid"})",
    R"({"type":"string","format":"uri"})",
    R"({"type":"string","format":"ipv4"})",
    R"({"type":"string","format":"ipv6"})",
    R"({"type":"string","format":"hostname"})",
    R"({"type":"string","format":"byte"})",
    R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})",
    R"({"type":"number","minimum":-1,"maximum":1})",
    R"({"type":"number","exclusiveMaximum":-3})",
    R"({"type":"number","minimum":0.1,"maximum":0.3})",
    R"({"type":"number","exclusiveMinimum":0.1,"exclusiveMaximum":0.2})",
    R"({"type":"number","exclusiveMinimum":-1.75,"maximum":-0.125})",
    R"({"type":"number","minimum":2147483646.5,"exclusiveMaximum":2147483647.25})",
    R"({"type":"integer","minimum":-5,"maximum":5})",
    R"({"type":"integer","exclusiveMinimum":-1000,"maximum":99999})",
    R"({"type":"string","minLength":1,"maxLength":3})",
    R"({"type":"string","pattern":"^[^a-z]{2}\"\\\\.$"})",
    R"({"enum":["q\"","\\\\","\n",{"a":[1,"\u00e9"]}]})",
    R"({"type":"object","properties":{"a":{"type":"integer"},"ab":{"type":"string"}},"additionalProperties":{"type":"boolean"}})",
};

}  // namespace

int main() {
  using namespace strata::grammar;
  auto schemas = testing::random_schemas(200);
  std::vector<int> walks(schemas.size(), 4);
  for (const char* f : kFocused) {
    schemas.push_back(testing::Json::parse(f));
    walks.push_back(40);
  }
  strata::Rng rng(20261204);
  for (size_t i = 0; i < schemas.size(); ++i) {
    const testing::Json& s = schemas[i];
    testing::Json values = testing::Json::array();
    for (int k = 0; k < 4; ++k) {
      testing::Json v = testing::random_instance(s, rng);
      values.push_back(v.dump());
      values.push_back(v.dump(2));
    }
    for (bool ws : {false, true}) {
      auto ebnf = json_schema_to_ebnf(s, {.any_whitespace = ws});
      if (!ebnf.ok()) {
        std::cerr << "schema " << i << ": " << ebnf.status().message() << "\n";
        return 1;
      }
      auto g = Grammar::parse_ebnf(*ebnf);
      if (!g.ok()) {
        std::cerr << "schema " << i << ": " << g.status().message() << "\n";
        return 1;
      }
      for (int k = 0; k < walks[i]; ++k)
        if (auto text = testing::random_sentence(*g, rng, 3000)) values.push_back(*text);
    }
    std::cout << testing::Json{{"index", i}, {"schema", s}, {"values", values}}.dump() << "\n";
  }
  return 0;
}
