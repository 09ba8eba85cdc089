// Internals of json_schema_to_ebnf shared by its translation units: JSON paths, keyword
// classes, allOf/$ref merging (json_schema_merge.cpp) and the grammars of numbers, integer
// ranges and string formats (json_schema_primitives.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace strata::grammar::schema {

using Json = nlohmann::ordered_json;

// "$.properties.a", "$.anyOf[2]", "$.properties['odd key']".
std::string child_path(const std::string& path, std::string_view keyword);
std::string child_path(const std::string& path, std::string_view keyword, std::string_view key);
std::string child_path(const std::string& path, std::string_view keyword, size_t index);

// Keywords that only annotate (ignored).
bool is_annotation_keyword(std::string_view k);
// Keywords that constrain and that the converter does not support (an error).
bool is_unsupported_keyword(std::string_view k);

// Resolves local references ("#", "#/$defs/a", any JSON pointer) against the root document.
class RefResolver {
 public:
  explicit RefResolver(const Json& root) : root_(root) {}
  // The target of `ref`; the error names `path`.
  Result<const Json*> resolve(const std::string& ref, const std::string& path) const;
  // `ref` normalised to the JSON pointer it names ("" for the root).
  Result<std::string> pointer(const std::string& ref, const std::string& path) const;

 private:
  const Json& root_;
};

// `s` without a top-level $ref or allOf: the referenced and listed schemas merged into it (as
// allOf means). A boolean `s` is returned as is.
Result<Json> flatten_schema(const Json& s, const RefResolver& refs, const std::string& path,
                            int depth = 0);
// The schema valid for exactly the values valid against both (booleans included); an error
// when a keyword appears in both with values that cannot be combined exactly.
Result<Json> merge_schemas(const Json& a, const Json& b, const RefResolver& refs,
                           const std::string& path, int depth = 0);

// --- Primitive grammars (expressions, no rule names) ---

// Integers in [lo, hi] in JSON form (no leading zeros, no "-0"); an unbounded side is capped at
// kMaxIntegerDigits digits. Empty string when the range is empty.
inline constexpr int kMaxIntegerDigits = 18;
std::string integer_range_expr(std::optional<int64_t> lo, std::optional<int64_t> hi);

struct NumberBound {
  bool set = false;
  int64_t value = 0;  // an integer, |value| <= 2^53
  bool exclusive = false;
};
// JSON numbers (without exponent) between integer-valued bounds; fractions (up to 6 digits)
// only when `fractions`. Empty string when the range is empty.
std::string number_range_expr(NumberBound lo, NumberBound hi, bool fractions);
// Any JSON number, mantissa and exponent lengths bounded so that every output is a finite double.
std::string number_expr();

// The grammar of a JSON string (quotes included) holding a value of `format`; nullopt when the
// format is not supported.
std::optional<std::string> string_format_expr(std::string_view format);

}  // namespace strata::grammar::schema
