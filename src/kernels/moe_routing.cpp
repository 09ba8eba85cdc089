#include "kernels/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace strata {

Status MoeRoutingConfig::validate() const {
  auto bad = [](const std::string& m) { return invalid_argument("MoE routing: " + m); };
  if (num_experts <= 0 || num_experts > kMaxExperts)
    return bad("the number of experts (" + std::to_string(num_experts) + ") must be 1.." +
               std::to_string(kMaxExperts));
  if (top_k <= 0 || top_k > num_experts)
    return bad("experts per token (" + std::to_string(top_k) + ") must be 1.." +
               std::to_string(num_experts));
  if (num_groups <= 0 || num_experts % num_groups != 0)
    return bad("n_group (" + std::to_string(num_groups) + ") must divide the " +
               std::to_string(num_experts) + " experts");
  if (topk_groups <= 0 || topk_groups > num_groups)
    return bad("topk_group (" + std::to_string(topk_groups) + ") must be 1..n_group (" +
               std::to_string(num_groups) + ")");
  if (num_groups > 1 && topk_groups * (num_experts / num_groups) < top_k)
    return bad("topk_group groups of " + std::to_string(num_experts / num_groups) +
               " experts cannot hold " + std::to_string(top_k) + " experts per token");
  if (group_score == MoeGroupScore::kTopTwoSum && num_groups > 1 && num_experts / num_groups < 2)
    return bad("scoring groups by their two best experts needs groups of at least 2");
  if (!(scaling > 0)) return bad("routed_scaling_factor must be > 0");
  return ok_status();
}

void route_token(const MoeRoutingConfig& c, const float* logits, const float* bias, int32_t* ids,
                 float* weights) {
  const int E = c.num_experts;
  float scores[MoeRoutingConfig::kMaxExperts];
  float select[MoeRoutingConfig::kMaxExperts];
  if (c.scoring == MoeScoring::kSoftmax) {
    float mx = -INFINITY;
    for (int e = 0; e < E; ++e) mx = std::max(mx, logits[e]);
    double sum = 0;
    for (int e = 0; e < E; ++e) {
      scores[e] = std::exp(logits[e] - mx);
      sum += scores[e];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int e = 0; e < E; ++e) scores[e] *= inv;
  } else {
    for (int e = 0; e < E; ++e) scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  }
  for (int e = 0; e < E; ++e) select[e] = bias != nullptr ? scores[e] + bias[e] : scores[e];
  if (c.num_groups > 1) {
    const int per = E / c.num_groups;
    float group[MoeRoutingConfig::kMaxExperts];
    bool keep[MoeRoutingConfig::kMaxExperts] = {};
    for (int g = 0; g < c.num_groups; ++g) {
      const float* s = select + g * per;
      float best = -INFINITY, second = -INFINITY;
      for (int i = 0; i < per; ++i) {
        if (s[i] > best) {
          second = best;
          best = s[i];
        } else if (s[i] > second) {
          second = s[i];
        }
      }
      group[g] = c.group_score == MoeGroupScore::kMax ? best : best + second;
    }
    for (int n = 0; n < c.topk_groups; ++n) {
      int pick = -1;
      for (int g = 0; g < c.num_groups; ++g)
        if (!keep[g] && (pick < 0 || group[g] > group[pick])) pick = g;
      keep[pick] = true;
    }
    for (int e = 0; e < E; ++e)
      if (!keep[e / per]) select[e] = -INFINITY;
  }
  // Top-k by selection score, ties to the lower id; excluded experts are never picked.
  bool taken[MoeRoutingConfig::kMaxExperts] = {};
  double total = 0;
  for (int k = 0; k < c.top_k; ++k) {
    int pick = -1;
    for (int e = 0; e < E; ++e)
      if (!taken[e] && select[e] != -INFINITY && (pick < 0 || select[e] > select[pick])) pick = e;
    taken[pick] = true;
    ids[k] = pick;
    weights[k] = scores[pick];
    total += scores[pick];
  }
  const float norm = c.normalize ? static_cast<float>(1.0 / (total + 1e-20)) : 1.0f;
  for (int k = 0; k < c.top_k; ++k) weights[k] = weights[k] * norm * c.scaling;
}

void route_tokens(const MoeRoutingConfig& c, const float* logits, int64_t ld, int64_t num_tokens,
                  const float* bias, int32_t* ids, float* weights, ThreadPool& pool) {
  pool.parallel_for(num_tokens, 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      route_token(c, logits + t * ld, bias, ids + t * c.top_k, weights + t * c.top_k);
  });
}

void group_by_expert(const int32_t* ids, int64_t num_tokens, int top_k, int num_experts,
                     int32_t* offsets, int32_t* entries) {
  std::fill(offsets, offsets + num_experts + 1, 0);
  const int64_t n = num_tokens * top_k;
  for (int64_t i = 0; i < n; ++i) offsets[ids[i] + 1]++;
  for (int e = 0; e < num_experts; ++e) offsets[e + 1] += offsets[e];
  // Fill in token order; offsets[e] advances as entries land, then is restored.
  for (int64_t i = 0; i < n; ++i) entries[offsets[ids[i]]++] = static_cast<int32_t>(i);
  for (int e = num_experts; e > 0; --e) offsets[e] = offsets[e - 1];
  offsets[0] = 0;
}

}  // namespace strata
