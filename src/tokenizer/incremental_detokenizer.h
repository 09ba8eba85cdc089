// Streaming detokenization for one request: feed generated ids one at a time and get back the
// text they release. Text is released only once it forms complete UTF-8 (byte-level and
// byte-fallback tokens that split a character are held back), the SentencePiece leading space of
// a continuation is kept as the full decode has it, and special tokens are skipped or kept per
// request. The concatenation of everything add() and flush() return equals
// decode(prompt + generated) with decode(prompt) removed from its front.
//
// Method (as vLLM's): decode a small window of recent ids twice, with and without the newest
// ones, and release the difference; the window's first ids give the decoder its context.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace strata {

class IncrementalDetokenizer {
 public:
  // `prompt_ids` give the context for the first generated tokens (only the last few are kept).
  IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                         std::span<const int32_t> prompt_ids, bool skip_special_tokens);

  // Adds one generated id; returns the newly releasable text (often "", never a partial
  // character). Out-of-range ids release nothing.
  std::string add(int32_t id);
  // Releases whatever is held back (an incomplete character becomes U+FFFD). Call at the end.
  std::string flush();
  // All text released so far.
  const std::string& text() const { return text_; }

 private:
  std::string release(bool at_end);

  std::shared_ptr<const Tokenizer> tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // kept ids (specials dropped when skipping); front trimmed
  size_t prefix_offset_ = 0;  // window start: context for the decoder
  size_t read_offset_ = 0;    // ids before this are released
  std::string text_;
};

}  // namespace strata
