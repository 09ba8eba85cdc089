// Constraint sources turned into EBNF text for Grammar::parse_ebnf: JSON Schema (OpenAI's
// response_format json_schema, vLLM's structured_outputs.json, tool parameters), any JSON value
// (json_object), regular expressions (structured_outputs.regex, schema `pattern`) and choices.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace strata::grammar {

struct JsonSchemaOptions {
  // vLLM's disable_any_whitespace: no optional whitespace between JSON tokens.
  bool any_whitespace = true;
  // vLLM's disable_additional_properties: objects without `additionalProperties` are closed.
  bool disable_additional_properties = false;
  // OpenAI strict mode: every property required, additionalProperties false (as OpenAI does).
  bool strict = false;
  // Prepended to every rule name (the root rule is `<rule_prefix>root`), so that several
  // converted schemas can live in one grammar (tool calls). Letters, digits and '-' only.
  std::string rule_prefix;
};

// A JSON Schema as an EBNF grammar whose root matches JSON texts valid against it: every sentence
// is valid, and every valid value is a sentence up to these deliberate restrictions (which keep
// a sampling model from running on forever or off the end of a double):
//   - numbers: at most 16 integer and 16 fraction digits and a 2-digit exponent; integers at most
//     18 digits; numbers with bounds have no exponent and at most 6 fraction digits (none when a
//     bound is 2^31 or more), so that rounding to a double cannot cross a bound;
//   - between tokens at most 20 characters of whitespace (none without any_whitespace), no
//     whitespace before or after the root value;
//   - object properties appear in schema order, declared ones first; additional property names
//     use no escapes and never repeat a declared name;
//   - enum/const values in their compact serialisation; string formats in one canonical form
//     (e.g. date-time with 'T' and 'Z' or a +hh:mm offset);
//   - `pattern` is matched in full (JSON Schema searches; a full match is a subset);
//   - oneOf is treated as anyOf: exclusivity between overlapping branches is not enforced.
// Schemas without "type" take the types their keywords imply (e.g. "properties" -> object).
// Keywords that constrain but cannot be expressed exactly are InvalidArgument, whose message
// names the keyword and its JSON path, e.g. "unsupported JSON Schema keyword 'if' at
// $.properties.a". Annotations (title, description, default, examples, ...) and unknown
// keywords are ignored. Only local $ref ("#/$defs/x", any JSON pointer) are supported; recursion
// through objects or arrays becomes recursive rules.
Result<std::string> json_schema_to_ebnf(const nlohmann::ordered_json& schema,
                                        const JsonSchemaOptions& options = {});
// Any JSON object (response_format json_object): root is an object of any JSON values.
std::string json_object_ebnf(const JsonSchemaOptions& options = {});
// A regular expression (Python `re` syntax as vLLM's users write it, matched in full) as EBNF.
Result<std::string> regex_to_ebnf(std::string_view regex);
// One of the given strings exactly (a non-empty list; an empty one gives the empty output).
std::string choice_to_ebnf(const std::vector<std::string>& choices);

}  // namespace strata::grammar
