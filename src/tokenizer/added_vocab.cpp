#include "tokenizer/added_vocab.h"

#include <unicode/uchar.h>
#include <algorithm>

#include "tokenizer/unicode.h"

namespace strata::tok {

namespace {

// Rust regex `\w`: Alphabetic, marks, decimal digits, connector punctuation, join controls.
bool is_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  if (c == 0x200C || c == 0x200D) return true;
  auto uc = static_cast<UChar32>(c);
  if (u_hasBinaryProperty(uc, UCHAR_ALPHABETIC)) return true;
  int8_t t = u_charType(uc);
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK ||
         t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION;
}

// Last code point of non-empty valid UTF-8 `s`.
char32_t last_char(std::string_view s) {
  size_t p = s.size() - 1;
  while (p > 0 && (static_cast<uint8_t>(s[p]) & 0xC0) == 0x80) --p;
  return utf8_next(s, &p);
}

char32_t first_char(std::string_view s) {
  size_t p = 0;
  return utf8_next(s, &p);
}

// Start of the run of whitespace that ends `s` (s.size() when none).
size_t whitespace_run_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t p = end - 1;
    while (p > 0 && (static_cast<uint8_t>(s[p]) & 0xC0) == 0x80) --p;
    size_t q = p;
    if (!is_whitespace(utf8_next(s, &q))) break;
    end = p;
  }
  return end;
}

// Length of the run of whitespace that starts `s`.
size_t whitespace_run_len(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    size_t q = pos;
    if (!is_whitespace(utf8_next(s, &q))) break;
    pos = q;
  }
  return pos;
}

}  // namespace

void AddedTokenMatcher::build(const std::vector<AddedToken>& tokens, bool normalized) {
  tokens_.clear();
  nodes_.assign(1, Node{});
  std::fill(std::begin(first_byte_), std::end(first_byte_), false);
  for (const auto& t : tokens) {
    if (t.normalized != normalized || t.content.empty()) continue;
    int32_t index = static_cast<int32_t>(tokens_.size());
    tokens_.push_back(t);
    int32_t node = 0;
    for (char ch : t.content) {
      auto b = static_cast<uint8_t>(ch);
      auto& next = nodes_[node].next;
      auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(b, INT32_MIN));
      if (it != next.end() && it->first == b) {
        node = it->second;
      } else {
        int32_t child = static_cast<int32_t>(nodes_.size());
        next.insert(it, {b, child});
        nodes_.push_back(Node{});
        node = child;
      }
    }
    // The first of two identical contents wins (as a map keyed by content would keep one).
    if (nodes_[node].token < 0) nodes_[node].token = index;
    first_byte_[static_cast<uint8_t>(t.content[0])] = true;
  }
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t* len) const {
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    auto b = static_cast<uint8_t>(text[i]);
    const auto& next = nodes_[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(b, INT32_MIN));
    if (it == next.end() || it->first != b) break;
    node = it->second;
    if (nodes_[node].token >= 0) {
      best = nodes_[node].token;
      *len = i + 1 - pos;
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextPiece>* out) const {
  size_t start_offset = 0;  // end of the last emitted piece
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t len = 0;
    int32_t index = longest_at(text, pos, &len);
    // Only accept matches that start on a character boundary.
    if (index < 0 || (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[index];
    size_t start = pos, stop = pos + len;
    if (tok.single_word) {
      bool start_ok = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      bool stop_ok = stop == text.size() || !is_word_char(first_char(text.substr(stop)));
      if (!start_ok || !stop_ok) {
        pos = stop;  // non-overlapping search continues after the discarded match
        continue;
      }
    }
    if (tok.lstrip) start = std::max(whitespace_run_start(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += whitespace_run_len(text.substr(stop));
    if (start_offset < start) out->push_back({-1, start_offset, start});
    out->push_back({tok.id, start, stop});
    start_offset = stop;
    pos = stop;
  }
  if (start_offset < text.size()) out->push_back({-1, start_offset, text.size()});
}

}  // namespace strata::tok
