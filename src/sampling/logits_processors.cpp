#include "sampling/logits_processors.h"

#include <algorithm>
#include <limits>

namespace strata::sampling {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void mask(std::span<float> logits, int32_t id) {
  if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] = kNegInf;
}
}  // namespace

void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias) {
  for (const auto& [id, b] : bias) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[id] += b;
  }
}

bool min_tokens_active(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                       int64_t num_output_tokens) {
  if (num_output_tokens >= params.min_tokens) return false;
  return !params.stop_token_ids.empty() || (!params.ignore_eos && !eos_token_ids.empty());
}

void apply_min_tokens(std::span<float> logits, const SamplingParams& params,
                      std::span<const int32_t> eos_token_ids, int64_t num_output_tokens) {
  if (num_output_tokens >= params.min_tokens) return;
  for (int32_t id : params.stop_token_ids) mask(logits, id);
  if (!params.ignore_eos) {
    for (int32_t id : eos_token_ids) mask(logits, id);
  }
}

void PenaltyScratch::prepare(int64_t vocab_size) {
  if (static_cast<int64_t>(stamp.size()) != vocab_size) {
    stamp.assign(vocab_size, 0);
    count.assign(vocab_size, 0);
    touched.reserve(vocab_size);  // at most every token once: no growth while generating
    epoch_ = 0;
  }
}

uint32_t PenaltyScratch::next_epoch() {
  if (++epoch_ == 0) {  // wrapped: old stamps could collide, clear them once
    std::fill(stamp.begin(), stamp.end(), 0);
    epoch_ = 1;
  }
  return epoch_;
}

void apply_penalties(std::span<float> logits, const SamplingParams& params,
                     std::span<const int32_t> prompt_token_ids,
                     std::span<const int32_t> output_token_ids, PenaltyScratch& scratch) {
  if (!params.uses_penalties()) return;
  const int64_t vocab = static_cast<int64_t>(logits.size());
  scratch.prepare(vocab);
  const uint32_t epoch = scratch.next_epoch();
  scratch.touched.clear();
  auto touch = [&](int32_t id) -> bool {
    if (id < 0 || id >= vocab) return false;
    if (scratch.stamp[id] != epoch) {
      scratch.stamp[id] = epoch;
      scratch.count[id] = 0;
      scratch.touched.push_back(id);
    }
    return true;
  };
  for (int32_t id : output_token_ids) {
    if (touch(id)) scratch.count[id]++;
  }
  const float rep = params.repetition_penalty;
  if (rep != 1.0f) {
    for (int32_t id : prompt_token_ids) touch(id);
  }
  const float freq = params.frequency_penalty;
  const float pres = params.presence_penalty;
  for (int32_t id : scratch.touched) {
    float v = logits[id];
    if (rep != 1.0f) v = v > 0.0f ? v / rep : v * rep;
    const int32_t c = scratch.count[id];
    v -= freq * static_cast<float>(c);
    if (c > 0) v -= pres;
    logits[id] = v;
  }
}

}  // namespace strata::sampling
