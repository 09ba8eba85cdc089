// UTF-8 helpers for the Jinja interpreter: Python's str works on code points, our strings are
// UTF-8 bytes. Invalid bytes are treated as one-byte units (never dropped, never a crash), so
// slicing and iterating always reproduce the input bytes exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::jinja::unicode {

// Decodes the code point starting at s[*pos] and advances *pos past it. An invalid or truncated
// sequence decodes as the single byte value (0x80..0xFF) and advances by one byte.
uint32_t decode(std::string_view s, size_t* pos);
void append_utf8(std::string* out, uint32_t cp);
bool is_ascii(std::string_view s);
// Number of code points.
size_t length(std::string_view s);
// Byte offset of every code point start, plus s.size() at the end (size = length + 1).
std::vector<size_t> boundaries(std::string_view s);

// Python's str.isspace() for one code point.
bool is_space(uint32_t cp);
bool is_alpha(uint32_t cp);
bool is_digit(uint32_t cp);
bool is_upper(uint32_t cp);
bool is_lower(uint32_t cp);
// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (other scripts
// are left unchanged).
uint32_t to_lower(uint32_t cp);
uint32_t to_upper(uint32_t cp);
std::string lower(std::string_view s);
std::string upper(std::string_view s);

// Python's str.strip()/lstrip()/rstrip(): whitespace when `chars` is null, else any code point
// found in *chars.
std::string_view strip(std::string_view s, bool left, bool right, const std::string* chars);

// Python's str.isprintable() for one code point (approximate outside the BMP's common blocks).
bool is_printable(uint32_t cp);

}  // namespace strata::jinja::unicode
