#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace strata::tok {

namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // every table code point is < 0x144
  Tables() {
    to_byte.fill(-1);
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      to_char[b] = c;
      to_byte[c] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(uint8_t b) {
  return tables().to_char[b];
}

int char_to_byte(char32_t c) {
  return c < 512 ? tables().to_byte[c] : -1;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) utf8_append(&out, byte_to_char(static_cast<uint8_t>(b)));
  return out;
}

bool byte_level_to_bytes(std::string_view s, std::string* out) {
  out->clear();
  size_t pos = 0;
  while (pos < s.size()) {
    int b = char_to_byte(utf8_next(s, &pos));
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
  }
  return true;
}

}  // namespace strata::tok
