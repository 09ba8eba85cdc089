// Normalizers: text rewrites applied to each plain-text segment before pre-tokenization
// (Unicode normal forms, lower-casing, Prepend, Replace, Strip, StripAccents), run in order as a
// Sequence.
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
  };
  Kind kind = Kind::kNfc;
  std::string pattern;  // kPrepend: the prefix; kReplace: literal pattern (when regex is null)
  std::string content;  // kReplace: replacement
  std::shared_ptr<const Regex> regex;     // kReplace with a Regex pattern
  bool left = true, right = true;         // kStrip
  bool remove_extra_whitespaces = false;  // kSpmWhitespace
  bool add_dummy_prefix = true;           // kSpmWhitespace
  bool escape_whitespaces = true;         // kSpmWhitespace
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
