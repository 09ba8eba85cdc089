// Per-request sampling parameters with vLLM's names, defaults and validation rules.
//
// A request's parameters are validated once at submit (validate()); the sampler and the stop
// checker then trust them (token ids in range, finite values).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::sampling {

// Temperatures below this are greedy (vLLM's _SAMPLING_EPS).
inline constexpr float kSamplingEps = 1e-5f;
// vLLM's default --max-logprobs (and OpenAI's top_logprobs limit).
inline constexpr int kDefaultMaxLogprobs = 20;
// OpenAI's documented range for logit_bias values.
inline constexpr float kMaxLogitBias = 100.0f;

struct SamplingParams {
  int n = 1;                        // completions per prompt
  float temperature = 1.0f;         // < kSamplingEps: greedy
  float top_p = 1.0f;               // (0, 1]; 1 disables
  int top_k = 0;                    // 0 or -1 disables; otherwise keep the k most likely (and ties)
  float min_p = 0.0f;               // [0, 1]; keep tokens with p >= min_p * p_max; 0 disables
  float presence_penalty = 0.0f;    // [-2, 2], over output tokens
  float frequency_penalty = 0.0f;   // [-2, 2], over output tokens
  float repetition_penalty = 1.0f;  // > 0, over prompt and output tokens; 1 disables
  std::optional<int64_t> seed;      // per-request generator; none: the engine's generator
  std::vector<std::string> stop;    // stop strings (never empty strings)
  std::vector<int32_t> stop_token_ids;
  bool include_stop_str_in_output = false;
  bool ignore_eos = false;
  std::optional<int> max_tokens = 16;         // none: until max_model_len
  int min_tokens = 0;                         // EOS and stop ids are masked until this many outputs
  std::optional<int> logprobs;                // number of top alternatives per sampled token
  std::optional<int> prompt_logprobs;         // number of top alternatives per prompt token
  bool skip_special_tokens = true;            // detokenizer setting, carried for the engine
  bool spaces_between_special_tokens = true;  // detokenizer setting, carried for the engine
  std::map<int32_t, float> logit_bias;        // token id -> bias added to its logit

  friend bool operator==(const SamplingParams&, const SamplingParams&) = default;
  bool is_greedy() const { return temperature < kSamplingEps; }
  // True when top_k restricts a vocabulary of `vocab_size` tokens.
  bool uses_top_k(int64_t vocab_size) const { return top_k > 0 && top_k < vocab_size; }
  bool uses_penalties() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f;
  }

  // Checks every field against vLLM's rules for a model with `vocab_size` logits. The first bad
  // field gives an INVALID_ARGUMENT whose message names the field and states the allowed range
  // and the value received, e.g. "top_p must be in (0, 1], got 0."; its OpenAI name ("top_p")
  // goes to *bad_field when given.
  Status validate(int64_t vocab_size, int max_logprobs = kDefaultMaxLogprobs,
                  std::string* bad_field = nullptr) const;

  // The parameters of child `index` of an n > 1 request (vLLM's parallel sampling): n = 1 and,
  // when seeded, seed + index so the children differ yet stay reproducible.
  SamplingParams child(int index) const;
};

}  // namespace strata::sampling
