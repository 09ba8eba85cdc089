#include "grammar/ebnf_text.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/unicode.h"

namespace strata::grammar {

CodePointSet CodePointSet::range(uint32_t lo, uint32_t hi) {
  CodePointSet s;
  s.add(lo, hi);
  return s;
}

void CodePointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.emplace_back(lo, std::min(hi, kMaxCodePoint));
  normalize();
}

void CodePointSet::add(const CodePointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CodePointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& r : ranges_) {
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  ranges_ = std::move(out);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet all;
  all.ranges_ = {{0, 0xD7FF}, {0xE000, kMaxCodePoint}};
  return all.minus(*this);
}

CodePointSet CodePointSet::minus(const CodePointSet& other) const {
  CodePointSet out;
  for (auto [lo, hi] : ranges_) {
    uint32_t cur = lo;
    bool done = false;
    for (auto [olo, ohi] : other.ranges_) {
      if (ohi < cur || olo > hi) continue;
      if (olo > cur) out.ranges_.emplace_back(cur, olo - 1);
      if (ohi >= hi) {
        done = true;
        break;
      }
      cur = ohi + 1;
    }
    if (!done) out.ranges_.emplace_back(cur, hi);
  }
  out.normalize();
  return out;
}

CodePointSet CodePointSet::intersect(const CodePointSet& other) const {
  return minus(minus(other));
}

bool CodePointSet::contains(uint32_t c) const {
  for (auto [lo, hi] : ranges_)
    if (c >= lo && c <= hi) return true;
  return false;
}

int64_t CodePointSet::single() const {
  if (ranges_.size() == 1 && ranges_[0].first == ranges_[0].second) return ranges_[0].first;
  return -1;
}

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    uint32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      auto cb = static_cast<unsigned char>(s[i + k]);
      if ((cb & 0xC0) != 0x80) ok = false;
      c = (c << 6) | (cb & 0x3F);
    }
    if (!ok) {
      out.push_back(b);
      ++i;
    } else {
      out.push_back(c);
      i += len;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t c) {
  tok::utf8_append(&out, static_cast<char32_t>(c));
}

namespace {

// One code point inside "..." (in_class false) or [...] (in_class true).
void append_escaped(std::string& out, uint32_t c, bool in_class) {
  char buf[16];
  switch (c) {
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\\':
      out += "\\\\";
      return;
    default:
      break;
  }
  if (c < 0x20 || c == 0x7F) {
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
    out += buf;
  } else if (c < 0x80) {
    bool special = in_class ? (c == ']' || c == '[' || c == '^' || c == '-') : c == '"';
    if (special) out.push_back('\\');
    out.push_back(static_cast<char>(c));
  } else if (c <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "\\u%04X", c);
    out += buf;
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", c);
    out += buf;
  }
}

}  // namespace

std::string ebnf_literal(std::u32string_view s) {
  std::string out = "\"";
  for (char32_t c : s) append_escaped(out, c, false);
  out += '"';
  return out;
}

std::string ebnf_literal(std::string_view utf8) {
  return ebnf_literal(decode_utf8(utf8));
}

std::string ebnf_class(const CodePointSet& set) {
  if (int64_t c = set.single(); c >= 0) return ebnf_literal(std::u32string(1, char32_t(c)));
  // A negated class is shorter when the set covers most of the code space.
  CodePointSet comp = set.complement();
  bool negate = comp.ranges().size() < set.ranges().size() && !comp.empty();
  const CodePointSet& body = negate ? comp : set;
  std::string out = negate ? "[^" : "[";
  for (auto [lo, hi] : body.ranges()) {
    append_escaped(out, lo, true);
    if (hi == lo) continue;
    if (hi > lo + 1) out += '-';
    append_escaped(out, hi, true);
  }
  out += ']';
  return out;
}

const CodePointSet& json_plain_chars() {
  static const CodePointSet kPlain = [] {
    CodePointSet special = CodePointSet::range(0, 0x1F);
    special.add('"', '"');
    special.add('\\', '\\');
    return special.complement();
  }();
  return kPlain;
}

namespace {

std::string json_escape_char(uint32_t c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (c < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", c);
    return buf;
  }
  std::string out;
  append_utf8(out, c);
  return out;
}

}  // namespace

std::string json_escape_string_body(std::u32string_view s) {
  std::string out;
  for (char32_t c : s) out += json_escape_char(c);
  return out;
}

std::string json_char_in_set(const CodePointSet& set) {
  std::vector<std::string> alts;
  CodePointSet plain = set.intersect(json_plain_chars());
  if (!plain.empty()) alts.push_back(ebnf_class(plain));
  CodePointSet special = set.minus(json_plain_chars());
  for (auto [lo, hi] : special.ranges())
    for (uint32_t c = lo; c <= hi; ++c) alts.push_back(ebnf_literal(json_escape_char(c)));
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

}  // namespace strata::grammar
