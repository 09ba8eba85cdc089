#include "sampling/sampling_params.h"

#include <charconv>
#include <cmath>

namespace strata::sampling {
namespace {

// Shortest text that reads back as the same float ("0.1", "-1", "nan").
std::string num(float value) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, res.ptr);
}

}  // namespace

Status SamplingParams::validate(int64_t vocab_size, int max_logprobs,
                                std::string* bad_field) const {
  auto bad = [bad_field](const char* field, const std::string& message) {
    if (bad_field != nullptr) *bad_field = field;
    return invalid_argument(message);
  };
  if (n < 1) return bad("n", "n must be at least 1, got " + std::to_string(n) + ".");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return bad("presence_penalty",
               "presence_penalty must be in [-2, 2], got " + num(presence_penalty) + ".");
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return bad("frequency_penalty",
               "frequency_penalty must be in [-2, 2], got " + num(frequency_penalty) + ".");
  }
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty))) {
    return bad("repetition_penalty",
               "repetition_penalty must be a finite number greater than zero, got " +
                   num(repetition_penalty) + ".");
  }
  if (!(temperature >= 0.0f && std::isfinite(temperature))) {
    return bad("temperature",
               "temperature must be a finite non-negative number, got " + num(temperature) + ".");
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return bad("top_p", "top_p must be in (0, 1], got " + num(top_p) + ".");
  }
  if (top_k < -1) {
    return bad("top_k",
               "top_k must be 0 (disable), or at least 1, got " + std::to_string(top_k) + ".");
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return bad("min_p", "min_p must be in [0, 1], got " + num(min_p) + ".");
  }
  if (max_tokens && *max_tokens < 1) {
    return bad("max_tokens",
               "max_tokens must be at least 1, got " + std::to_string(*max_tokens) + ".");
  }
  if (min_tokens < 0) {
    return bad("min_tokens", "min_tokens must be greater than or equal to 0, got " +
                                 std::to_string(min_tokens) + ".");
  }
  if (max_tokens && min_tokens > *max_tokens) {
    return bad("min_tokens", "min_tokens must be less than or equal to max_tokens=" +
                                 std::to_string(*max_tokens) + ", got " +
                                 std::to_string(min_tokens) + ".");
  }
  if (logprobs && (*logprobs < 0 || *logprobs > max_logprobs)) {
    return bad("logprobs", "logprobs must be in [0, " + std::to_string(max_logprobs) + "], got " +
                               std::to_string(*logprobs) +
                               " (the number of top alternatives per token).");
  }
  if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > max_logprobs)) {
    return bad("prompt_logprobs", "prompt_logprobs must be in [0, " + std::to_string(max_logprobs) +
                                      "], got " + std::to_string(*prompt_logprobs) + ".");
  }
  for (const auto& s : stop) {
    if (s.empty()) return bad("stop", "stop cannot contain an empty string.");
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return bad("stop_token_ids", "stop_token_ids must be token ids in [0, " +
                                       std::to_string(vocab_size) + "), got " + std::to_string(id) +
                                       ".");
    }
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return bad("logit_bias", "logit_bias contains the out-of-vocabulary token id " +
                                   std::to_string(id) + "; token ids must be in [0, " +
                                   std::to_string(vocab_size) + ").");
    }
    if (!(bias >= -kMaxLogitBias && bias <= kMaxLogitBias)) {
      return bad("logit_bias", "logit_bias values must be in [-100, 100], got " + num(bias) +
                                   " for token " + std::to_string(id) + ".");
    }
  }
  return ok_status();
}

SamplingParams SamplingParams::child(int index) const {
  SamplingParams p = *this;
  p.n = 1;
  // Wraps around instead of overflowing for seeds near the int64 limits.
  if (seed)
    p.seed = static_cast<int64_t>(static_cast<uint64_t>(*seed) + static_cast<uint64_t>(index));
  return p;
}

}  // namespace strata::sampling
