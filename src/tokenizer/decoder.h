// Decoders: turn a list of token pieces back into text (Hugging Face decoder semantics):
// ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, WordPiece, run in order as a Sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace strata::tok {

struct DecoderStep {
  enum class Kind { kByteLevel, kByteFallback, kFuse, kStrip, kReplace, kMetaspace, kWordPiece };
  Kind kind = Kind::kByteLevel;
  std::string pattern;                 // kReplace: literal pattern (when regex is null)
  std::shared_ptr<const Regex> regex;  // kReplace with a Regex pattern
  std::string content;                 // kReplace: replacement; kStrip: the character to strip
  int start = 0, stop = 0;             // kStrip: how many to strip at each end
  std::string replacement = "\xE2\x96\x81";  // kMetaspace
  bool strip_first = true;                   // kMetaspace: prepend_scheme != never
  // kWordPiece: a token after the first loses `prefix` when it starts with it and gets a space
  // before it otherwise; with `cleanup` each token then goes through clean_up_tokenization.
  std::string prefix = "##";
  bool cleanup = true;
};

// "<0x41>" -> 0x41 (a SentencePiece byte-fallback piece), or -1.
int byte_token_value(const std::string& piece);

class Decoder {
 public:
  void add(DecoderStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  // True when the chain is exactly one ByteLevel step (the fast path for byte-level BPE).
  bool is_byte_level_only() const {
    return steps_.size() == 1 && steps_[0].kind == DecoderStep::Kind::kByteLevel;
  }
  bool has_step(DecoderStep::Kind kind) const;
  // Decodes `tokens` (consumed) into text. Without steps the pieces are joined with spaces.
  std::string decode(std::vector<std::string> tokens) const;

 private:
  std::vector<DecoderStep> steps_;
};

}  // namespace strata::tok
