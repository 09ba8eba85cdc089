// The GPT-2 byte <-> visible character table used by byte-level BPE: every byte value maps to one
// printable code point (printable Latin-1 bytes map to themselves, the rest to U+0100 onwards),
// so that any byte string becomes a string of vocabulary characters ("Ġ" is the space byte).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace strata::tok {

// Code point that byte `b` is shown as.
char32_t byte_to_char(uint8_t b);
// Byte shown as code point `c`, or -1 when `c` is not in the table.
int char_to_byte(char32_t c);
// Maps raw bytes to their byte-level string ("hello world" -> "helloĠworld").
std::string bytes_to_byte_level(std::string_view bytes);
// Maps a byte-level string back to raw bytes. Returns false (and leaves *out unspecified) when a
// character is not in the table; `s` must be valid UTF-8.
bool byte_level_to_bytes(std::string_view s, std::string* out);

}  // namespace strata::tok
