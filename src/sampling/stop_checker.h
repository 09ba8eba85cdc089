// When a request stops, and what text it may release.
//
// Token level (check_stop): after each generated token, in vLLM's order:
//   1. length: num_output_tokens >= max_tokens, or prompt + output >= max_model_len -> "length"
//   2. nothing else before min_tokens outputs
//   3. an EOS id (unless ignore_eos) -> "stop"
//   4. a stop_token_ids entry -> "stop", with that id as the stop reason
// As in vLLM, the text of a token that stopped the request (EOS or a stop id) is not part of the
// output text unless include_stop_str_in_output.
//
// Text level (StopStringMatcher): the engine feeds each newly detokenized piece of text and
// releases what the matcher returns. Stop strings never leak: text that could still grow into a
// stop string is held back, including a stop string split across pieces; when one matches the
// output ends just before it (or just after it with include_stop_str_in_output). When several
// could match, the one that completes first in the text wins (the longest if several end at the
// same byte), so the result does not depend on how the text was split into pieces. Matching is
// byte-wise on UTF-8 and released text never ends inside a multi-byte character.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/sampling_params.h"

namespace strata::sampling {

enum class FinishReason { kNone, kStop, kLength, kAbort };

// "stop", "length", "abort"; "" for kNone (OpenAI's finish_reason strings).
const char* finish_reason_name(FinishReason reason);

struct StopDecision {
  FinishReason reason = FinishReason::kNone;
  bool finished() const { return reason != FinishReason::kNone; }
  // The stop_token_ids entry that stopped the request (vLLM's stop_reason); none for EOS.
  std::optional<int32_t> stop_token_id;
  // True when the last token (EOS or a stop id) ended the request: its text is dropped from the
  // output unless include_stop_str_in_output.
  bool stopped_by_token = false;
};

// Checks the request after `last_token` was appended as output number num_output_tokens.
// max_model_len <= 0 means no model-length limit.
StopDecision check_stop(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                        int32_t last_token, int64_t num_output_tokens, int64_t num_prompt_tokens,
                        int64_t max_model_len);

// Whether stop strings may end the request yet: vLLM only looks for them once the request has
// more than min_tokens outputs.
inline bool stop_strings_active(const SamplingParams& params, int64_t num_output_tokens) {
  return num_output_tokens > params.min_tokens;
}

// Per-request streaming stop-string matcher (see the file comment). Not thread-safe.
class StopStringMatcher {
 public:
  StopStringMatcher(std::vector<std::string> stop, bool include_stop_str_in_output);
  explicit StopStringMatcher(const SamplingParams& params)
      : StopStringMatcher(params.stop, params.include_stop_str_in_output) {}

  struct Update {
    std::string_view text;  // newly released text; valid until the next call
    bool stopped = false;   // a stop string matched: finish with reason "stop"
    int stop_index = -1;    // which entry of `stop` matched (vLLM's stop_reason)
  };

  // Appends newly detokenized text. With can_stop false (before min_tokens) nothing matches, but
  // a stop string that starts there and completes later still does. After a match every call
  // returns nothing.
  Update feed(std::string_view text, bool can_stop = true);

  // At the end of a request that finished for another reason: releases the held-back text.
  std::string_view flush();

  bool stopped() const { return stopped_; }
  // Bytes held back right now (waiting to see whether a stop string completes).
  size_t held_bytes() const { return buf_.size() - released_; }

 private:
  void trim();

  std::vector<std::string> stop_;
  bool include_;
  size_t max_len_ = 0;
  std::string buf_;      // recent text: a released tail kept as context, then held text
  size_t released_ = 0;  // buf_[0, released_) has been released
  std::string out_;      // the text returned by the last call
  bool stopped_ = false;
};

}  // namespace strata::sampling
