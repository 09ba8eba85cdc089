// Normalizers: text rewrites applied to each plain-text segment before pre-tokenization
// (Unicode normal forms, lower-casing, Prepend, Replace, Strip, StripAccents, BERT's text
// cleaning), run in order as a Sequence.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace strata::tok {

struct NormalizerStep {
  enum class Kind {
    kNfc,
    kNfd,
    kNfkc,
    kNfkd,
    kLowercase,
    kPrepend,       // text = prepend + text (non-empty text only)
    kReplace,       // every match of `regex` (or literal `pattern`) -> `content`
    kStrip,         // trims whitespace on the left and/or right
    kStripAccents,  // removes non-spacing marks (Mn)
    kSpmWhitespace,  // SentencePiece: remove_extra_whitespaces, add_dummy_prefix, escape (' '->'▁')
    // The first half of BertNormalizer (its strip_accents and lowercase are kNfd + kStripAccents
    // and kLowercase): clean_text drops NUL, U+FFFD and other-category characters (Cc, Cf, Cn,
    // Co, Cs) except tab, CR and LF, and turns every whitespace character into ' ';
    // handle_chinese_chars puts a space on each side of every CJK ideograph.
    kBertClean,
  };
  Kind kind = Kind::kNfc;
  std::string pattern;  // kPrepend: the prefix; kReplace: literal pattern (when regex is null)
  std::string content;  // kReplace: replacement
  std::shared_ptr<const Regex> regex;     // kReplace with a Regex pattern
  bool left = true, right = true;         // kStrip
  bool remove_extra_whitespaces = false;  // kSpmWhitespace
  bool add_dummy_prefix = true;           // kSpmWhitespace
  bool escape_whitespaces = true;         // kSpmWhitespace
  bool clean_text = true;                 // kBertClean
  bool handle_chinese_chars = true;       // kBertClean
};

class Normalizer {
 public:
  void add(NormalizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  // Normalises valid UTF-8 `in` into *out.
  Status apply(std::string_view in, std::string* out) const;

 private:
  std::vector<NormalizerStep> steps_;
};

// Replaces every occurrence of `from` in `in` by `to`, appending to *out.
void replace_all(std::string_view in, std::string_view from, std::string_view to, std::string* out);

}  // namespace strata::tok
