// DeepSeek-V2/V3/R1 (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM): multi-head latent attention
// (model/deepseek_mla.h) with a latent KV cache, DeepSeekMoE feed-forward layers after the first
// first_k_dense_replace dense ones (model/moe.h), BF16/F16/F32 or block-scaled FP8 weights.
// The multi-token-prediction layer of V3 checkpoints (model.layers.<num_hidden_layers>) loads as
// a one-layer model of its own with LoadOptions::mtp_module (speculative decoding,
// engine/mtp_proposer.h).
#pragma once

#include <memory>

#include "model/decoder.h"
#include "model/model.h"
#include "model/weight_source.h"

namespace strata {

Result<std::unique_ptr<Model>> create_deepseek_model(const ModelConfig& config,
                                                     std::unique_ptr<WeightSource> weights,
                                                     const ModelBuildOptions& options);
// What create_deepseek_model() would hold (memory_estimate.h), from the weights' metadata, for
// `threads` compute threads.
Result<ModelMemoryEstimate> estimate_deepseek_model(const ModelConfig& config,
                                                    WeightSource& weights,
                                                    const ModelBuildOptions& options, int threads);

}  // namespace strata
