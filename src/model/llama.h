// The Llama family: LlamaForCausalLM (Llama 2/3, rope scaling linear/llama3/yarn),
// MistralForCausalLM, Qwen2ForCausalLM (q/k/v biases) and Qwen3ForCausalLM (per-head q/k norm),
// and their mixture-of-experts variants (Mixtral, Qwen2-MoE, Qwen3-MoE), on the skeleton of
// model/decoder.h.
#pragma once

#include <memory>

#include "model/decoder.h"
#include "model/model.h"
#include "model/weight_source.h"

namespace strata {

Result<std::unique_ptr<Model>> create_llama_model(const ModelConfig& config,
                                                  std::unique_ptr<WeightSource> weights,
                                                  const ModelBuildOptions& options);
// What create_llama_model() would hold (memory_estimate.h), from the weights' metadata, for
// `threads` compute threads.
Result<ModelMemoryEstimate> estimate_llama_model(const ModelConfig& config, WeightSource& weights,
                                                 const ModelBuildOptions& options, int threads);

}  // namespace strata
