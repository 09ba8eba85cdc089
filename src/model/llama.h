// The Llama family: LlamaForCausalLM (Llama 2/3, rope scaling linear/llama3/yarn),
// MistralForCausalLM, Qwen2ForCausalLM (q/k/v biases) and Qwen3ForCausalLM (per-head q/k norm).
#pragma once

#include <memory>

#include "model/model.h"
#include "model/weight_source.h"

namespace strata {

struct ModelBuildOptions {
  std::optional<DType> storage;  // matmul weight dtype; nullopt keeps each tensor's own
  bool keep_in_place = true;     // use checkpoint tensors from the mapping when possible
  WorkspaceLimits limits;
  ThreadPool* pool = nullptr;
};

Result<std::unique_ptr<Model>> create_llama_model(const ModelConfig& config,
                                                  std::unique_ptr<WeightSource> weights,
                                                  const ModelBuildOptions& options);

}  // namespace strata
