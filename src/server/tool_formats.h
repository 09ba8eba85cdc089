// Internal to the tool-call parsers (tool_parsers.cpp, tool_formats_json.cpp,
// tool_formats_xml.cpp): the per-format factories make_tool_parser chooses from, and the text
// helpers more than one of those files needs. Not for use outside them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "core/json.h"
#include "server/tool_parsers.h"

namespace strata::server::tool_formats {

// JSON formats (tool_formats_json.cpp): the model's arguments text is reported as written.
std::unique_ptr<ToolFormat> make_hermes_format();
// llama3_json and llama4_json.
std::unique_ptr<ToolFormat> make_llama_json_format();
std::unique_ptr<ToolFormat> make_mistral_format();
// deepseek_v3, or deepseek_v31 when `v31`.
std::unique_ptr<ToolFormat> make_deepseek_v3_format(bool v31);
// tool_choice "required": the JSON array that constrained decoding produces.
std::unique_ptr<ToolFormat> make_required_json_format();
// A named tool_choice: the whole output is the arguments object of function `name`.
std::unique_ptr<ToolFormat> make_named_json_format(std::string name);

// XML/DSML formats (tool_formats_xml.cpp): they build the arguments JSON, with parameter values
// coerced to the types of the tool's JSON schema. `tools` (may be null) is the request's tools
// array; the format keeps a copy.
// qwen3_xml and qwen3_coder.
std::unique_ptr<ToolFormat> make_qwen3_xml_format(const OrderedJson* tools);
// deepseek_v32 (wrapper "function_calls") and deepseek_v4 (wrapper "tool_calls").
std::unique_ptr<ToolFormat> make_dsml_format(const OrderedJson* tools, std::string wrapper);

// ---------------------------------------------------------------------------------------------
// Small text helpers.

std::string random_hex(int digits);

inline bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

inline size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

// Length of the longest proper prefix of `marker` that ends `s` (0 when none): the bytes to hold
// back because they may be the start of the marker.
inline size_t partial_marker(std::string_view s, std::string_view marker) {
  const size_t max = std::min(s.size(), marker.size() - 1);
  for (size_t k = max; k > 0; --k)
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

inline size_t partial_any(std::string_view s, std::initializer_list<std::string_view> markers) {
  size_t k = 0;
  for (auto m : markers) k = std::max(k, partial_marker(s, m));
  return k;
}

// True when s[i..] is a proper prefix of `marker` (the text ends inside the marker).
inline bool ends_inside(std::string_view s, size_t i, std::string_view marker) {
  std::string_view rest = s.substr(i);
  return rest.size() < marker.size() && marker.substr(0, rest.size()) == rest;
}

inline bool starts_at(std::string_view s, size_t i, std::string_view m) {
  return s.size() - std::min(i, s.size()) >= m.size() && s.substr(i, m.size()) == m;
}

// `s` escaped as the inside of a JSON string (no quotes); bytes >= 0x80 pass through, so any
// prefix of the input escapes to a prefix of the output.
std::string json_escape(std::string_view s);

std::string json_quoted(std::string_view s);

}  // namespace strata::server::tool_formats
