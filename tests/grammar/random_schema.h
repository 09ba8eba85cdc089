// Random JSON Schemas over the keywords json_schema_to_ebnf supports, random valid instances of
// them, random sentences of a grammar, and a small JSON Schema validator. Shared by the
// converter's tests and the constrained-generation tests (which drive a model at temperature 1
// with these schemas and validate what it writes).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "grammar/grammar.h"

namespace strata::grammar::testing {

using Json = nlohmann::ordered_json;

// `count` schemas, deterministic for a seed. Mostly objects at the root (as tools and
// response formats are), over: type (and type arrays), properties/required,
// additionalProperties (absent/true/false/schema), enum/const, items/prefixItems/min/maxItems,
// anyOf, oneOf (with disjoint branches, so that any instance matches exactly one), allOf of
// objects and of bounds, $ref/$defs (also recursive), nullable, min/maxLength, pattern, formats,
// integer and number bounds (exclusive too).
std::vector<Json> random_schemas(int count, uint64_t seed = 20261204);

// A random value valid against `schema` (one of random_schemas: the keywords it emits) in the
// form the converter's grammars accept: declared properties first in schema order, additional
// ones after; formats in their canonical form; numbers without exponent and with at most 3
// fraction digits.
Json random_instance(const Json& schema, Rng& rng);

// "" when `value` is valid against `schema` (JSON Schema 2020-12 meaning, with draft-4
// exclusiveMinimum/Maximum booleans and OpenAPI nullable; pattern is a search in ECMAScript
// syntax; formats checked as ajv-formats does for the common ones), else the first violation
// with its JSON path.
std::string validate(const Json& schema, const Json& value);

// A random sentence of `grammar`, walked byte by byte through a GrammarMatcher (so it exercises
// the matcher's masks too): at each step a random allowed byte, biased towards closing
// punctuation and towards stopping when the sentence is complete. nullopt when the walk has
// not completed within `max_bytes`.
std::optional<std::string> random_sentence(std::shared_ptr<const Grammar> grammar, Rng& rng,
                                           int max_bytes = 4000);

// Shared by the generators and the validator.
bool is_leap_year(int year);
bool json_has_type(const Json& v, const std::string& type);  // "integer": integral numbers too

}  // namespace strata::grammar::testing
