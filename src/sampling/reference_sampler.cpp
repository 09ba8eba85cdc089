#include "sampling/reference_sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sampling/vector_math.h"

namespace strata::sampling::reference {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

std::vector<float> process_logits(std::span<const float> logits, const SamplingParams& params,
                                  std::span<const int32_t> eos_token_ids,
                                  std::span<const int32_t> prompt_token_ids,
                                  std::span<const int32_t> output_token_ids) {
  const size_t vocab = logits.size();
  std::vector<float> x(logits.begin(), logits.end());
  for (const auto& [id, bias] : params.logit_bias) x[id] += bias;

  if (static_cast<int64_t>(output_token_ids.size()) < params.min_tokens) {
    std::vector<bool> stop_mask(vocab, false);
    for (int32_t id : params.stop_token_ids) stop_mask[id] = true;
    if (!params.ignore_eos) {
      for (int32_t id : eos_token_ids) stop_mask[id] = true;
    }
    for (size_t i = 0; i < vocab; ++i) {
      if (stop_mask[i]) x[i] = kNegInf;
    }
  }

  std::vector<int> output_counts(vocab, 0);
  std::vector<bool> prompt_mask(vocab, false);
  for (int32_t id : output_token_ids) output_counts[id]++;
  for (int32_t id : prompt_token_ids) prompt_mask[id] = true;
  for (size_t i = 0; i < vocab; ++i) {
    const bool seen = prompt_mask[i] || output_counts[i] > 0;
    const float r = seen ? params.repetition_penalty : 1.0f;
    if (r != 1.0f) x[i] = x[i] > 0.0f ? x[i] / r : x[i] * r;
  }
  for (size_t i = 0; i < vocab; ++i) {
    x[i] -= params.frequency_penalty * static_cast<float>(output_counts[i]);
  }
  for (size_t i = 0; i < vocab; ++i) {
    if (output_counts[i] > 0) x[i] -= params.presence_penalty;
  }
  return x;
}

std::vector<double> probabilities(std::span<const float> logits, const FilterParams& f) {
  const int64_t n = static_cast<int64_t>(logits.size());
  std::vector<double> probs(n, 0.0);
  float m = kNegInf;
  for (float v : logits) {
    if (v > m) m = v;
  }
  if (!(m > kNegInf)) {
    probs[0] = 1.0;
    return probs;
  }
  std::vector<bool> keep(n);
  for (int64_t i = 0; i < n; ++i) keep[i] = logits[i] > kNegInf;  // NaN and -inf never kept

  // min_p: p >= min_p * p_max.
  if (f.min_p > 0.0f) {
    const float threshold = static_cast<float>(
        static_cast<double>(m) + static_cast<double>(f.temperature) * std::log(f.min_p));
    for (int64_t i = 0; i < n; ++i) keep[i] = keep[i] && logits[i] >= threshold;
  }
  // Full sort, best first, ties to the lower id.
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t i) { return keep[i] ? logits[i] : kNegInf; };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return key(a) > key(b); });
  // top_k: keep logits >= the k-th largest (ties included).
  if (f.top_k > 0 && f.top_k < n) {
    const float kth = key(order[f.top_k - 1]);
    for (int64_t i = 0; i < n; ++i) keep[i] = keep[i] && logits[i] >= kth;
  }
  const float inv_t = 1.0f / f.temperature;
  std::vector<float> w(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    if (keep[i]) w[i] = exp_approx((logits[i] - m) * inv_t);
  }
  // top_p: the shortest best-first prefix whose mass reaches top_p.
  if (f.top_p < 1.0f) {
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) total += w[i];
    const double target = static_cast<double>(f.top_p) * total;
    double mass = 0.0;
    bool reached = false;
    for (int32_t id : order) {
      if (w[id] <= 0.0f) continue;
      if (reached) {
        w[id] = 0.0f;
        continue;
      }
      mass += w[id];
      reached = mass >= target;
    }
  }
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += w[i];
  for (int64_t i = 0; i < n; ++i) probs[i] = w[i] / total;
  return probs;
}

int32_t pick(std::span<const double> probs, double u) {
  double cum = 0.0;
  int32_t last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0) continue;
    cum += probs[i];
    last = static_cast<int32_t>(i);
    if (cum > u) return last;
  }
  return last;
}

int32_t argmax(std::span<const float> logits) {
  int64_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == kNegInf) continue;
    if (best < 0 || logits[i] > logits[best]) best = static_cast<int64_t>(i);
  }
  return best < 0 ? 0 : static_cast<int32_t>(best);
}

TokenLogprobs logprobs(std::span<const float> logits, int32_t token, int num_top) {
  const size_t n = logits.size();
  double m = -std::numeric_limits<double>::infinity();
  for (float v : logits) m = std::max<double>(m, v);
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - m);
  const double lse = m + std::log(sum);
  TokenLogprobs out;
  int32_t rank = 0;
  for (float v : logits) rank += v >= logits[token];
  out.chosen = {token, static_cast<float>(logits[token] - lse), rank};
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (int j = 0; j < num_top && j < static_cast<int>(n); ++j) {
    out.top.push_back({order[j], static_cast<float>(logits[order[j]] - lse), j + 1});
  }
  return out;
}

}  // namespace strata::sampling::reference
