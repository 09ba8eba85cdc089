#include "tokenizer/jinja/unicode.h"

namespace strata::jinja::unicode {

namespace {

// Invalid bytes decode to U+DC80..U+DCFF (Python's "surrogateescape") and encode back to the
// same byte, so no input byte is ever lost or changed.
constexpr uint32_t kEscapeBase = 0xDC00;

bool is_cont(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

}  // namespace

uint32_t decode(std::string_view s, size_t* pos) {
  size_t i = *pos;
  auto c0 = static_cast<unsigned char>(s[i]);
  if (c0 < 0x80) {
    *pos = i + 1;
    return c0;
  }
  size_t n = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    n = 1, cp = c0 & 0x1F, min = 0x80;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    n = 2, cp = c0 & 0x0F, min = 0x800;
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    n = 3, cp = c0 & 0x07, min = 0x10000;
  }
  if (n == 0 || i + n >= s.size()) {
    *pos = i + 1;
    return kEscapeBase | c0;
  }
  for (size_t k = 1; k <= n; ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if (!is_cont(c)) {
      *pos = i + 1;
      return kEscapeBase | c0;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *pos = i + 1;
    return kEscapeBase | c0;
  }
  *pos = i + n + 1;
  return cp;
}

void append_utf8(std::string* out, uint32_t cp) {
  if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out->push_back(static_cast<char>(cp & 0xFF));
    return;
  }
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

size_t length(std::string_view s) {
  if (is_ascii(s)) return s.size();
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) decode(s, &pos);
  return n;
}

std::vector<size_t> boundaries(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size();) {
    out.push_back(pos);
    decode(s, &pos);
  }
  out.push_back(s.size());
  return out;
}

bool is_space(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint32_t to_lower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 0x20;
  if (cp >= 0x100 && cp <= 0x17F) {
    if (cp == 0x130 || cp == 0x131 || cp == 0x138 || cp == 0x149 || cp == 0x17F) return cp;
    if (cp == 0x178) return 0xFF;
    bool odd_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
    if (odd_upper) return (cp % 2 == 1) ? cp + 1 : cp;
    return (cp % 2 == 0) ? cp + 1 : cp;
  }
  if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2) return cp + 0x20;
  if (cp == 0x386) return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A) return cp + 0x25;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 0x3F;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
  if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF)) {
    return (cp % 2 == 0) ? cp + 1 : cp;
  }
  if (cp >= 0xFF21 && cp <= 0xFF3A) return cp + 0x20;
  return cp;
}

uint32_t to_upper(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 0x20;
  if (cp == 0xFF) return 0x178;
  if (cp == 0xB5) return 0x39C;
  if (cp >= 0x100 && cp <= 0x17F) {
    if (cp == 0x130 || cp == 0x138 || cp == 0x149 || cp == 0x178) return cp;
    if (cp == 0x131) return 'I';
    if (cp == 0x17F) return 'S';
    bool odd_upper = (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E);
    if (odd_upper) return (cp % 2 == 0) ? cp - 1 : cp;
    return (cp % 2 == 1) ? cp - 1 : cp;
  }
  if (cp >= 0x3B1 && cp <= 0x3C9 && cp != 0x3C2) return cp - 0x20;
  if (cp == 0x3C2) return 0x3A3;
  if (cp == 0x3AC) return 0x386;
  if (cp >= 0x3AD && cp <= 0x3AF) return cp - 0x25;
  if (cp == 0x3CC) return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE) return cp - 0x3F;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 0x20;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 0x50;
  if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF)) {
    return (cp % 2 == 1) ? cp - 1 : cp;
  }
  if (cp >= 0xFF41 && cp <= 0xFF5A) return cp - 0x20;
  return cp;
}

bool is_upper(uint32_t cp) {
  return to_lower(cp) != cp;
}
bool is_lower(uint32_t cp) {
  return to_upper(cp) != cp || cp == 0xDF;
}

bool is_digit(uint32_t cp) {
  return (cp >= '0' && cp <= '9') || (cp >= 0x660 && cp <= 0x669) || (cp >= 0xFF10 && cp <= 0xFF19);
}

bool is_alpha(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (cp == 0xAA || cp == 0xB5 || cp == 0xBA) return true;
  if (cp >= 0xC0 && cp <= 0x24F) return cp != 0xD7 && cp != 0xF7;
  if (cp >= 0x370 && cp <= 0x3FF) return cp != 0x375 && cp != 0x37E && cp != 0x384 && cp != 0x385;
  if (cp >= 0x400 && cp <= 0x481) return true;
  if (cp >= 0x48A && cp <= 0x52F) return true;
  if (cp >= 0x5D0 && cp <= 0x5EA) return true;                            // Hebrew letters
  if (cp >= 0x620 && cp <= 0x64A) return true;                            // Arabic letters
  if (cp >= 0x3041 && cp <= 0x30FF) return cp != 0x30A0 && cp != 0x30FB;  // kana
  if (cp >= 0x3400 && cp <= 0x4DBF) return true;                          // CJK extension A
  if (cp >= 0x4E00 && cp <= 0x9FFF) return true;                          // CJK unified ideographs
  if (cp >= 0xAC00 && cp <= 0xD7A3) return true;                          // Hangul syllables
  if (cp >= 0xFF21 && cp <= 0xFF3A) return true;
  if (cp >= 0xFF41 && cp <= 0xFF5A) return true;
  return false;
}

namespace {

std::string map_case(std::string_view s, uint32_t (*fn)(uint32_t)) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) append_utf8(&out, fn(decode(s, &pos)));
  return out;
}

bool in_chars(uint32_t cp, const std::string& chars) {
  for (size_t pos = 0; pos < chars.size();) {
    if (decode(chars, &pos) == cp) return true;
  }
  return false;
}

}  // namespace

std::string lower(std::string_view s) {
  return map_case(s, to_lower);
}
std::string upper(std::string_view s) {
  return map_case(s, to_upper);
}

std::string_view strip(std::string_view s, bool left, bool right, const std::string* chars) {
  auto matches = [&](uint32_t cp) {
    return chars == nullptr ? is_space(cp) : in_chars(cp, *chars);
  };
  size_t begin = 0;
  size_t end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!matches(decode(s, &next))) break;
      begin = next;
    }
  }
  if (right) {
    size_t keep_end = begin;
    for (size_t pos = begin; pos < end;) {
      if (!matches(decode(s, &pos))) keep_end = pos;
    }
    end = keep_end;
  }
  return s.substr(begin, end - begin);
}

bool is_printable(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
  if (cp < 0x370) return true;
  if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F) return false;
  if (cp == 0x1680 || cp == 0x180E) return false;
  if ((cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F)) return false;
  if ((cp >= 0x205F && cp <= 0x206F) || cp == 0x3000) return false;
  if (cp >= 0xD800 && cp <= 0xF8FF) return false;  // surrogates and private use
  if (cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) || cp == 0xFFFE || cp == 0xFFFF) return false;
  if (cp >= 0xE0000 && cp <= 0xE0FFF) return false;
  if (cp >= 0xF0000) return false;
  return true;
}

}  // namespace strata::jinja::unicode
