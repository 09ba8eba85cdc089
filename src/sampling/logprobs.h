// Log-probabilities for the OpenAI `logprobs` / `top_logprobs` and vLLM `prompt_logprobs`
// fields, computed as vLLM does by default (logprobs_mode "raw_logprobs"): the log-softmax of the
// model's raw logits, before logit bias, penalties, temperature and top-k/top-p/min-p.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace strata::sampling {

struct Logprob {
  int32_t token_id = -1;
  float logprob = 0.0f;
  // 1-based vocabulary rank. For the chosen token: the number of tokens whose logit is >= its
  // own (vLLM's rule, so ties share the worse rank). For top entries: their position, 1..k.
  int32_t rank = 0;
  friend bool operator==(const Logprob&, const Logprob&) = default;
};

struct TokenLogprobs {
  Logprob chosen;            // the sampled token (or, for prompt logprobs, the prompt token)
  std::vector<Logprob> top;  // the most likely tokens, best first (ties: lower id first)
  friend bool operator==(const TokenLogprobs&, const TokenLogprobs&) = default;
};

// Holds reusable scratch; one per thread.
class LogprobsComputer {
 public:
  // x: [n] raw logits; token in [0, n); num_top >= 0. Overwrites *out (its vector keeps its
  // capacity, so reusing one TokenLogprobs per request allocates nothing after warm-up).
  void compute(const float* x, int64_t n, int32_t token, int num_top, TokenLogprobs* out);
  // Grows the scratch for rows of n logits and num_top alternatives ahead of use.
  void reserve(int64_t n, int num_top);

 private:
  std::vector<std::pair<float, int32_t>> heap_;
  std::vector<float> chunk_max_;
};

}  // namespace strata::sampling
