// Internal helpers of the constraint converters (json_schema.cpp, regex_to_ebnf.cpp): writing
// EBNF literals and character classes in the dialect of grammar.h, and sets of code points.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace strata::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A set of Unicode code points as sorted, disjoint, non-adjacent closed ranges.
class CodePointSet {
 public:
  CodePointSet() = default;
  static CodePointSet of(uint32_t c) { return range(c, c); }
  static CodePointSet range(uint32_t lo, uint32_t hi);
  void add(uint32_t lo, uint32_t hi);
  void add(const CodePointSet& other);
  // Every encodable code point (surrogates excluded) not in this set.
  CodePointSet complement() const;
  CodePointSet minus(const CodePointSet& other) const;
  CodePointSet intersect(const CodePointSet& other) const;
  bool contains(uint32_t c) const;
  bool empty() const { return ranges_.empty(); }
  // The single code point when the set holds exactly one, else -1.
  int64_t single() const;
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  void normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// Decodes UTF-8 leniently: an invalid byte decodes as itself (U+0080..U+00FF).
std::u32string decode_utf8(std::string_view s);
void append_utf8(std::string& out, uint32_t c);

// "..." matching exactly the code points of `s` (UTF-8); escapes quotes, backslashes, control
// and non-ASCII characters.
std::string ebnf_literal(std::string_view utf8);
std::string ebnf_literal(std::u32string_view s);
// An expression matching one code point of a non-empty set: a literal for one, else [...].
std::string ebnf_class(const CodePointSet& set);

// The characters a JSON string may hold unescaped: everything but '"', '\' and U+0000..U+001F.
const CodePointSet& json_plain_chars();
// `s` as it appears between the quotes of a JSON string (the shortest escapes).
std::string json_escape_string_body(std::u32string_view s);
// An expression matching one character of `set` as written inside a JSON string: plain
// characters as themselves, '"', '\' and control characters by their escapes.
std::string json_char_in_set(const CodePointSet& set);

// A regular expression (syntax of regex_to_ebnf) as one EBNF expression (no rules) matching its
// whole language. With `json_string_body` the expression matches the JSON-escaped form of each
// matching string, as it appears between the quotes of a JSON string (schema `pattern`).
Result<std::string> regex_to_ebnf_expression(std::string_view regex, bool json_string_body);

}  // namespace strata::grammar
