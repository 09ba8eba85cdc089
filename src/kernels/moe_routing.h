// Mixture-of-experts routing: from a token's gate logits to its experts and their weights, for
// every convention Strata supports, and the grouping of a batch's tokens by expert.
//
//   scores   = softmax(logits) (Mixtral, Qwen-MoE, DeepSeek-V2) or sigmoid(logits) (DeepSeek-V3)
//   select   = scores + correction bias (V3's e_score_correction_bias; selection only)
//   groups   = when num_groups > 1 the experts form equal consecutive groups scored by their best
//              selection score (V2 group_limited_greedy) or the sum of their two best (V3
//              noaux_tc); only the topk_groups best groups stay eligible
//   experts  = the top_k eligible experts by selection score (ties: the lower id)
//   weights  = the unbiased scores of those experts, divided by their sum when `normalize`
//              (norm_topk_prob; Mixtral always), times `scaling` (routed_scaling_factor)
#pragma once

#include <cstdint>

#include "core/status.h"
#include "core/thread_pool.h"

namespace strata {

enum class MoeScoring { kSoftmax, kSigmoid };
enum class MoeGroupScore { kMax, kTopTwoSum };

struct MoeRoutingConfig {
  int num_experts = 0;
  int top_k = 0;
  MoeScoring scoring = MoeScoring::kSoftmax;
  bool normalize = false;
  float scaling = 1.0f;
  int num_groups = 1;
  int topk_groups = 1;
  MoeGroupScore group_score = MoeGroupScore::kMax;

  static constexpr int kMaxExperts = 1024;
  Status validate() const;
};

// Routes one token. logits: [num_experts]; bias: [num_experts] or null. Writes ids[top_k] in
// order of descending selection score and their weights[top_k].
void route_token(const MoeRoutingConfig& config, const float* logits, const float* bias,
                 int32_t* ids, float* weights);

// Routes rows [0, num_tokens) of logits ([num_tokens, num_experts], row stride ld) into
// ids/weights [num_tokens, top_k].
void route_tokens(const MoeRoutingConfig& config, const float* logits, int64_t ld,
                  int64_t num_tokens, const float* bias, int32_t* ids, float* weights,
                  ThreadPool& pool);

// Counting sort of the (token, slot) entries by expert: expert e owns
// entries[offsets[e] .. offsets[e + 1]), each token * top_k + slot, in token order.
// offsets: [num_experts + 1]; entries: [num_tokens * top_k].
void group_by_expert(const int32_t* ids, int64_t num_tokens, int top_k, int num_experts,
                     int32_t* offsets, int32_t* entries);

}  // namespace strata
