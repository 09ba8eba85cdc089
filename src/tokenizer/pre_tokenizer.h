// Pre-tokenizers: split a normalised text segment into the words the model encodes one by one
// (regex Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation), run in
// order as a Sequence, each one refining the pieces the previous one produced.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace strata::tok {

// What a split does with the delimiter matches (Hugging Face SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// The GPT-2 pre-tokenizer regex (ByteLevel with use_regex).
inline constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct PreTokenizerStep {
  enum class Kind {
    kSplit,
    kByteLevel,
    kMetaspace,
    kDigits,
    kWhitespace,
    kWhitespaceSplit,
    kPunctuation
  };
  enum class Prepend { kAlways, kFirst, kNever };
  Kind kind = Kind::kSplit;
  std::shared_ptr<const Regex> regex;  // kSplit; kByteLevel when use_regex; kWhitespace
  SplitBehavior behavior = SplitBehavior::kIsolated;  // kSplit, kPunctuation
  bool invert = false;                                // kSplit
  bool add_prefix_space = false;                      // kByteLevel
  std::string replacement = "\xE2\x96\x81";           // kMetaspace ("▁")
  Prepend prepend = Prepend::kAlways;                 // kMetaspace
  bool split = true;                                  // kMetaspace
  bool individual_digits = false;                     // kDigits
};

// Pre-tokens: byte ranges of `text` (which a step may rewrite), in order.
struct PreTokens {
  std::string text;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  std::string_view piece(size_t i) const {
    return std::string_view(text).substr(ranges[i].first, ranges[i].second - ranges[i].first);
  }
};

class PreTokenizer {
 public:
  void add(PreTokenizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  const std::vector<PreTokenizerStep>& steps() const { return steps_; }
  // Splits `segment` (valid UTF-8) into *out. `at_input_start` says the segment starts at offset 0
  // of the whole input (Metaspace's "first" prepend scheme).
  Status run(std::string_view segment, bool at_input_start, PreTokens* out) const;

 private:
  std::vector<PreTokenizerStep> steps_;
};

}  // namespace strata::tok
