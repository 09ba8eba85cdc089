// UTF-8 helpers and the Unicode services the tokenizers need: normalisation forms (ICU),
// lower-casing, White_Space and alphanumeric tests, and lossy UTF-8 decoding with the same
// replacement policy as Rust's String::from_utf8_lossy (which Hugging Face tokenizers use).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace strata::tok {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";
// SentencePiece's visible space "▁" (U+2581).
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

// Bytes in the UTF-8 sequence that starts with `lead` (1 for ASCII and for invalid lead bytes).
inline int utf8_len(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF8) return 4;
  return 1;
}

// Decodes the code point at s[*pos] and advances *pos. Precondition: `s` is valid UTF-8.
char32_t utf8_next(std::string_view s, size_t* pos);
void utf8_append(std::string* out, char32_t cp);
std::string utf8_encode(char32_t cp);

// Decodes bytes as UTF-8, replacing each maximal invalid subsequence with U+FFFD.
std::string utf8_lossy(std::string_view bytes);
// Appends utf8_lossy(bytes) to *out.
void utf8_lossy_append(std::string_view bytes, std::string* out);
// Length of the longest prefix of `s` that does not end inside an incomplete (but so far valid)
// UTF-8 sequence. Used by streaming to hold back bytes that may still be completed.
size_t utf8_complete_prefix(std::string_view s);

// Byte offset of the first byte that is not part of valid UTF-8, or npos when `s` is valid.
size_t utf8_invalid_offset(std::string_view s);
bool is_ascii(std::string_view s);
// Unicode White_Space (what Rust's char::is_whitespace tests).
bool is_whitespace(char32_t c);
// Alphabetic or numeric (Nd, Nl, No), as Rust's char::is_alphanumeric.
bool is_alphanumeric(char32_t c);
// General category Mn (non-spacing mark).
bool is_nonspacing_mark(char32_t c);

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
// Normalises valid UTF-8 `in` into *out (which may not alias `in`).
Status normalize_utf8(NormalForm form, std::string_view in, std::string* out);
// Full Unicode lower-casing (root locale).
Status lowercase_utf8(std::string_view in, std::string* out);

}  // namespace strata::tok
