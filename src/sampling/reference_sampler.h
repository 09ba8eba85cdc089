// Plain reference versions of the sampler's steps: whole-vocabulary loops, full sorts, no
// scratch reuse. They define the expected results for the parity tests of the fast code
// (token_selector.h, logits_processors.h, logprobs.h, sampler.h); they are not for serving.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"
#include "sampling/token_selector.h"

namespace strata::sampling::reference {

// Logit bias, min_tokens and penalties on a copy of `logits`, written as vLLM states them over
// the whole vocabulary (bincounts and masks).
std::vector<float> process_logits(std::span<const float> logits, const SamplingParams& params,
                                  std::span<const int32_t> eos_token_ids,
                                  std::span<const int32_t> prompt_token_ids,
                                  std::span<const int32_t> output_token_ids);

// The probability of every token (0 for dropped ones) after temperature, min_p, top_k and top_p,
// using a full sort. Weights are exp_approx((x - max) / T), as in the fast code (the exp kernel
// has its own parity test against std::exp).
std::vector<double> probabilities(std::span<const float> logits, const FilterParams& f);

// The token a uniform u in [0, 1) picks from `probs`, walking ids in ascending order.
int32_t pick(std::span<const double> probs, double u);

// Greedy: the first index of the maximum.
int32_t argmax(std::span<const float> logits);

// Raw log-softmax logprobs of `token` and the num_top best (full sort).
TokenLogprobs logprobs(std::span<const float> logits, int32_t token, int num_top);

}  // namespace strata::sampling::reference
