#include "tokenizer/unicode.h"

#include <unicode/bytestream.h>
#include <unicode/casemap.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uchar.h>

namespace strata::tok {

char32_t utf8_next(std::string_view s, size_t* pos) {
  size_t i = *pos;
  auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  uint8_t c = b(0);
  if (c < 0x80) {
    *pos = i + 1;
    return c;
  }
  int len = utf8_len(c);
  if (i + len > s.size()) len = 1;
  char32_t cp;
  switch (len) {
    case 2:
      cp = ((c & 0x1Fu) << 6) | (b(1) & 0x3Fu);
      break;
    case 3:
      cp = ((c & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
      break;
    case 4:
      cp = ((c & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
      break;
    default:
      cp = kReplacementChar;
      len = 1;
  }
  *pos = i + len;
  return cp;
}

void utf8_append(std::string* out, char32_t cp) {
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

std::string utf8_encode(char32_t cp) {
  std::string s;
  utf8_append(&s, cp);
  return s;
}

namespace {

bool is_cont(uint8_t b) {
  return (b & 0xC0) == 0x80;
}

// Valid range of the second byte for a lead byte (RFC 3629 table).
bool second_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return is_cont(b);
  }
}

int lead_width(uint8_t c) {
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

}  // namespace

void utf8_lossy_append(std::string_view s, std::string* out) {
  size_t i = 0, n = s.size();
  out->reserve(out->size() + n);
  while (i < n) {
    uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    int w = lead_width(c);
    if (w == 0) {
      out->append(kReplacementUtf8);
      ++i;
      continue;
    }
    // Number of bytes of a valid prefix of the sequence.
    size_t k = 1;
    if (i + 1 < n && second_ok(c, static_cast<uint8_t>(s[i + 1]))) {
      k = 2;
      while (k < static_cast<size_t>(w) && i + k < n && is_cont(static_cast<uint8_t>(s[i + k])))
        ++k;
    }
    if (k == static_cast<size_t>(w)) {
      out->append(s.substr(i, k));
    } else {
      out->append(kReplacementUtf8);
    }
    i += k;
  }
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  utf8_lossy_append(bytes, &out);
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  size_t n = s.size();
  // Look back at most 3 bytes for the start of a multi-byte sequence.
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    uint8_t c = static_cast<uint8_t>(s[n - back]);
    if (is_cont(c)) continue;
    int w = lead_width(c);
    if (w == 0 || static_cast<size_t>(w) <= back) return n;  // complete or not a lead byte
    // Incomplete: check that what we have so far could still become valid.
    if (back >= 2 && !second_ok(c, static_cast<uint8_t>(s[n - back + 1]))) return n;
    return n - back;
  }
  return n;
}

size_t utf8_invalid_offset(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int w = lead_width(c);
    if (w == 0 || i + w > n || !second_ok(c, static_cast<uint8_t>(s[i + 1]))) return i;
    for (int k = 2; k < w; ++k) {
      if (!is_cont(static_cast<uint8_t>(s[i + k]))) return i;
    }
    i += w;
  }
  return std::string_view::npos;
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  }
  return true;
}

bool is_whitespace(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_alphanumeric(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  auto uc = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(uc, UCHAR_ALPHABETIC)) return true;
  int8_t t = u_charType(uc);
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_nonspacing_mark(char32_t c) {
  return c >= 0x300 && u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK;
}

namespace {

const icu::Normalizer2* normalizer_for(NormalForm form, UErrorCode* status) {
  switch (form) {
    case NormalForm::kNFC:
      return icu::Normalizer2::getNFCInstance(*status);
    case NormalForm::kNFD:
      return icu::Normalizer2::getNFDInstance(*status);
    case NormalForm::kNFKC:
      return icu::Normalizer2::getNFKCInstance(*status);
    case NormalForm::kNFKD:
      return icu::Normalizer2::getNFKDInstance(*status);
  }
  return nullptr;
}

}  // namespace

Status normalize_utf8(NormalForm form, std::string_view in, std::string* out) {
  out->clear();
  if (is_ascii(in)) {  // ASCII is invariant under all four forms
    out->assign(in);
    return ok_status();
  }
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* norm = normalizer_for(form, &status);
  if (U_FAILURE(status) || norm == nullptr) {
    return internal_error(std::string("ICU normaliser unavailable: ") + u_errorName(status));
  }
  icu::StringPiece piece(in.data(), static_cast<int32_t>(in.size()));
  if (norm->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) {
    out->assign(in);
    return ok_status();
  }
  status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(out, static_cast<int32_t>(in.size()));
  norm->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) {
    return invalid_argument(std::string("Unicode normalisation failed: ") + u_errorName(status));
  }
  return ok_status();
}

Status lowercase_utf8(std::string_view in, std::string* out) {
  out->clear();
  if (is_ascii(in)) {
    out->assign(in);
    for (auto& c : *out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return ok_status();
  }
  UErrorCode status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(out, static_cast<int32_t>(in.size()));
  icu::CaseMap::utf8ToLower("", 0, icu::StringPiece(in.data(), static_cast<int32_t>(in.size())),
                            sink, nullptr, status);
  if (U_FAILURE(status)) {
    return invalid_argument(std::string("Unicode lower-casing failed: ") + u_errorName(status));
  }
  return ok_status();
}

}  // namespace strata::tok
