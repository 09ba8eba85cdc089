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
};

// A JSON Schema as an EBNF grammar whose root matches exactly the JSON texts valid against it.
// An unsupported or invalid keyword is an InvalidArgument whose message names the keyword and its
// JSON path, e.g. "unsupported JSON Schema keyword 'if' at $.properties.a".
Result<std::string> json_schema_to_ebnf(const nlohmann::ordered_json& schema,
                                        const JsonSchemaOptions& options = {});
// Any JSON object (response_format json_object): root is an object of any JSON values.
std::string json_object_ebnf(const JsonSchemaOptions& options = {});
// A regular expression (Python `re` syntax as vLLM's users write it, matched in full) as EBNF.
Result<std::string> regex_to_ebnf(std::string_view regex);
// One of the given strings exactly.
std::string choice_to_ebnf(const std::vector<std::string>& choices);

}  // namespace strata::grammar
