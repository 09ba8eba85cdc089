// Small string helpers.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata {

std::vector<std::string> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);
std::string to_lower(std::string_view s);
// The non-empty lines of `text` with their 1-based line numbers (empty lines counted), a
// trailing '\r' removed; the views point into `text`.
std::vector<std::pair<size_t, std::string_view>> text_lines(std::string_view text);
// Human-readable bytes: "1.50 GiB".
std::string format_bytes(double bytes);
// True when `s` is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace strata
