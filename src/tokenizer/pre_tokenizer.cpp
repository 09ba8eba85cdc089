#include "tokenizer/pre_tokenizer.h"

#include <unicode/uchar.h>
#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/unicode.h"

namespace strata::tok {

namespace {

using Range = std::pair<uint32_t, uint32_t>;

struct Span {
  uint32_t b, e;
  bool match;
};

// Hugging Face's SplitDelimiterBehavior folds over (span, is_match) lists covering a piece.
void apply_behavior(const std::vector<Span>& spans, SplitBehavior behavior,
                    std::vector<Range>* out) {
  std::vector<Span> acc;
  acc.reserve(spans.size());
  bool prev = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& s : spans) {
        if (!s.match) acc.push_back(s);
      }
      break;
    case SplitBehavior::kIsolated:
      acc = spans;
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& s : spans) {
        if (s.match && !prev && !acc.empty()) {
          acc.back().e = s.e;
        } else {
          acc.push_back(s);
        }
        prev = s.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !prev && !acc.empty()) {
          acc.back().b = it->b;
        } else {
          acc.push_back(*it);
        }
        prev = it->match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
    case SplitBehavior::kContiguous:
      for (const auto& s : spans) {
        if (s.match == prev && !acc.empty()) {
          acc.back().e = s.e;
        } else {
          acc.push_back(s);
        }
        prev = s.match;
      }
      break;
  }
  for (const auto& s : acc) {
    if (s.e > s.b) out->emplace_back(s.b, s.e);
  }
}

// Spans of regex matches (true) and the gaps between them (false) over text[b, e).
Status regex_spans(const Regex& re, std::string_view text, uint32_t b, uint32_t e, bool invert,
                   std::vector<Span>* spans) {
  spans->clear();
  std::string_view piece = text.substr(b, e - b);
  size_t pos = 0, prev = 0, mb = 0, me = 0;
  while (pos <= piece.size()) {
    int rc = re.find(piece, pos, &mb, &me);
    if (rc < 0) {
      return invalid_argument("pre-tokenizer regex '" + re.pattern() +
                              "' failed: " + Regex::error_message(rc));
    }
    if (rc == 0) break;
    if (prev != mb) spans->push_back({b + uint32_t(prev), b + uint32_t(mb), invert});
    spans->push_back({b + uint32_t(mb), b + uint32_t(me), !invert});
    prev = me;
    if (me == mb) {  // empty match: step over one character
      if (me >= piece.size()) break;
      pos = me + std::min<size_t>(utf8_len(static_cast<uint8_t>(piece[me])), piece.size() - me);
    } else {
      pos = me;
    }
  }
  if (prev != piece.size()) spans->push_back({b + uint32_t(prev), e, invert});
  return ok_status();
}

// Each character satisfying `pred` is its own match.
template <typename Pred>
void char_spans(std::string_view text, uint32_t b, uint32_t e, Pred pred,
                std::vector<Span>* spans) {
  spans->clear();
  size_t pos = b, last = b;
  while (pos < e) {
    size_t start = pos;
    char32_t c = utf8_next(text, &pos);
    if (pred(c)) {
      if (last < start) spans->push_back({uint32_t(last), uint32_t(start), false});
      spans->push_back({uint32_t(start), uint32_t(pos), true});
      last = pos;
    }
  }
  if (last < e) spans->push_back({uint32_t(last), e, false});
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  int8_t t = u_charType(static_cast<UChar32>(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
           (c >= '{' && c <= '~');
  }
  return u_ispunct(static_cast<UChar32>(c));
}

}  // namespace

Status PreTokenizer::run(std::string_view segment, bool at_input_start, PreTokens* out) const {
  out->text.assign(segment);
  out->ranges.clear();
  if (segment.empty()) return ok_status();
  out->ranges.emplace_back(0, static_cast<uint32_t>(segment.size()));
  bool first_at_start = at_input_start;  // ranges[0] begins at offset 0 of the input

  std::vector<Range> next;
  std::vector<Span> spans;
  std::string rebuilt;
  // Rebuilds the buffer with each piece passed through `fn`.
  auto remap = [&](auto fn) {
    rebuilt.clear();
    std::string one;
    for (size_t i = 0; i < out->ranges.size(); ++i) {
      auto begin = static_cast<uint32_t>(rebuilt.size());
      fn(out->piece(i), &one);
      rebuilt += one;
      out->ranges[i] = {begin, static_cast<uint32_t>(rebuilt.size())};
    }
    out->text.swap(rebuilt);
  };
  // Pieces are kept as raw bytes; only when steps follow a ByteLevel step do they see the
  // byte-level characters, as in the reference, and the pieces are mapped back at the end.
  bool mapped = false;
  for (size_t si = 0; si < steps_.size(); ++si) {
    const PreTokenizerStep& step = steps_[si];
    next.clear();
    uint32_t old_first = out->ranges.empty() ? 0 : out->ranges[0].first;
    // Steps that rewrite each piece first (prefix space, metaspace) rebuild the buffer.
    bool rewrites = (step.kind == PreTokenizerStep::Kind::kByteLevel && step.add_prefix_space) ||
                    step.kind == PreTokenizerStep::Kind::kMetaspace;
    if (rewrites) {
      rebuilt.clear();
      std::vector<Range> ranges;
      for (size_t i = 0; i < out->ranges.size(); ++i) {
        std::string_view piece = out->piece(i);
        auto begin = static_cast<uint32_t>(rebuilt.size());
        if (step.kind == PreTokenizerStep::Kind::kByteLevel) {
          if (piece.empty() || piece[0] != ' ') rebuilt.push_back(' ');
          rebuilt.append(piece);
        } else {
          std::string replaced;
          replace_all(piece, " ", step.replacement, &replaced);
          bool starts = replaced.compare(0, step.replacement.size(), step.replacement) == 0;
          bool prepend =
              step.prepend == PreTokenizerStep::Prepend::kAlways ||
              (step.prepend == PreTokenizerStep::Prepend::kFirst && i == 0 && first_at_start);
          if (prepend && !starts) rebuilt.append(step.replacement);
          rebuilt.append(replaced);
        }
        ranges.emplace_back(begin, static_cast<uint32_t>(rebuilt.size()));
      }
      out->text.swap(rebuilt);
      out->ranges.swap(ranges);
      old_first = 0;
    }
    for (const auto& [b, e] : out->ranges) {
      switch (step.kind) {
        case PreTokenizerStep::Kind::kSplit:
          STRATA_RETURN_IF_ERROR(regex_spans(*step.regex, out->text, b, e, step.invert, &spans));
          apply_behavior(spans, step.behavior, &next);
          break;
        case PreTokenizerStep::Kind::kByteLevel:
          if (step.regex) {
            STRATA_RETURN_IF_ERROR(regex_spans(*step.regex, out->text, b, e, false, &spans));
            apply_behavior(spans, SplitBehavior::kIsolated, &next);
          } else {
            next.emplace_back(b, e);
          }
          break;
        case PreTokenizerStep::Kind::kMetaspace:
          if (step.split) {
            char32_t rep = 0;
            size_t p = 0;
            if (!step.replacement.empty()) rep = utf8_next(step.replacement, &p);
            char_spans(
                out->text, b, e, [rep](char32_t c) { return c == rep; }, &spans);
            apply_behavior(spans, SplitBehavior::kMergedWithNext, &next);
          } else {
            next.emplace_back(b, e);
          }
          break;
        case PreTokenizerStep::Kind::kDigits:
          char_spans(out->text, b, e, is_numeric, &spans);
          apply_behavior(
              spans, step.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
              &next);
          break;
        case PreTokenizerStep::Kind::kWhitespace:
          // Keeps the matches of \w+|[^\w\s]+ (HF: inverted pattern, delimiter removed).
          STRATA_RETURN_IF_ERROR(regex_spans(*step.regex, out->text, b, e, true, &spans));
          apply_behavior(spans, SplitBehavior::kRemoved, &next);
          break;
        case PreTokenizerStep::Kind::kWhitespaceSplit:
          char_spans(out->text, b, e, is_whitespace, &spans);
          apply_behavior(spans, SplitBehavior::kRemoved, &next);
          break;
        case PreTokenizerStep::Kind::kPunctuation:
          char_spans(out->text, b, e, is_punctuation, &spans);
          apply_behavior(spans, step.behavior, &next);
          break;
      }
    }
    first_at_start = first_at_start && !next.empty() && next[0].first == old_first;
    out->ranges.swap(next);
    if (step.kind == PreTokenizerStep::Kind::kByteLevel && !mapped && si + 1 < steps_.size()) {
      remap([](std::string_view piece, std::string* o) { *o = bytes_to_byte_level(piece); });
      mapped = true;
    }
  }
  if (mapped) {
    remap([](std::string_view piece, std::string* o) {
      if (!byte_level_to_bytes(piece, o)) o->assign(piece);
    });
  }
  return ok_status();
}

}  // namespace strata::tok
