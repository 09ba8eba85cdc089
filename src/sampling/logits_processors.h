// The logits processors that run before temperature, in vLLM's order: logit bias, min_tokens,
// then penalties (repetition, frequency, presence). Each edits one row of logits in place and
// touches only the tokens it concerns, so a 152k vocabulary costs no full pass.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampling_params.h"

namespace strata::sampling {

// logits[id] += bias for every (id, bias) in `bias`. Ids outside the row are ignored
// (validate() rejects them at submit).
void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias);

// True when min_tokens masks something at this step: fewer than min_tokens outputs so far and
// there are stop ids or (unless ignore_eos) EOS ids.
bool min_tokens_active(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                       int64_t num_output_tokens);

// While num_output_tokens < min_tokens: sets the logits of params.stop_token_ids and (unless
// ignore_eos) of eos_token_ids to -inf, so the request cannot stop early.
void apply_min_tokens(std::span<float> logits, const SamplingParams& params,
                      std::span<const int32_t> eos_token_ids, int64_t num_output_tokens);

// Reusable vocabulary-sized scratch for apply_penalties (one per thread). Stamped entries make
// each call O(prompt + output tokens) with no clearing.
class PenaltyScratch {
 public:
  void prepare(int64_t vocab_size);  // sizes the arrays; call before each use
  uint32_t next_epoch();             // a fresh stamp; every entry reads as unset
  std::vector<uint32_t> stamp;       // [vocab] epoch that last touched the entry
  std::vector<int32_t> count;        // [vocab] output occurrences (valid when stamped)
  std::vector<int32_t> touched;      // unique token ids touched this call

 private:
  uint32_t epoch_ = 0;
};

// vLLM's penalties on one row:
//   repetition (tokens in prompt or output): logit > 0 ? logit / r : logit * r
//   frequency  (output tokens):              logit -= frequency_penalty * count
//   presence   (output tokens):              logit -= presence_penalty
// Token ids outside [0, logits.size()) are ignored.
void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     std::span<const int32_t> prompt_token_ids,
                     std::span<const int32_t> output_token_ids, PenaltyScratch& scratch);

}  // namespace strata::sampling
