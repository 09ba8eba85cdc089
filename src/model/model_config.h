// Model hyperparameters from a Hugging Face config.json (plus --hf-overrides) or GGUF metadata.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace strata::io {
class GgufFile;
}

#include "model/int_quant.h"

namespace strata {

enum class RopeScalingType { kNone, kLinear, kLlama3, kYarn, kDynamic };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // yarn (DeepSeek, Qwen)
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
  std::optional<double> attention_factor;
};

// quantization_config of FP8 checkpoints (quant_method "fp8" with weight_block_size, as
// DeepSeek-V3/R1 and Qwen3 FP8 ship): e4m3 weights with one f32 `weight_scale_inv` per
// block_n x block_k block. Kept FP8 in memory (kernels/fp8.h).
struct Fp8Quantization {
  int64_t block_n = 128;
  int64_t block_k = 128;
  // FP8 checkpoints without weight_block_size (AutoFP8 / llm-compressor "fp8", vLLM's default
  // FP8 format): one f32 `weight_scale` per tensor (or per output channel, [n, 1]), value =
  // e4m3 * scale. Loaded as blocks of one row by the whole row (block_n 1, block_k kWholeRow).
  bool per_tensor = false;
  // The checkpoint's quant_method: "fp8", or "compressed-tensors" (float-quantized FP8).
  std::string method = "fp8";
  static constexpr int64_t kWholeRow = int64_t{1} << 30;
};

struct ModelConfig {
  std::string architecture;  // HF name: "LlamaForCausalLM", "Qwen2ForCausalLM", ...
  std::string model_type;    // "llama", "qwen2", ...
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // dims of each head that rotate (partial_rotary_factor)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool rope_neox = true;  // pairs (i, i + d/2) as in HF; GGUF llama uses adjacent pairs
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projection biases (Qwen2)
  bool qk_norm = false;         // per-head RMSNorm of q and k (Qwen3)
  std::string hidden_act = "silu";
  std::optional<int64_t> sliding_window;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;
  DType torch_dtype = DType::kBF16;          // the checkpoint's declared dtype
  std::optional<Fp8Quantization> fp8;        // block-scaled FP8 weights (quantization_config)
  std::optional<IntQuantization> int_quant;  // AWQ / GPTQ checkpoints (model/int_quant.h)
  double initializer_range = 0.02;
  // The whole config.json (after overrides), for architecture-specific fields.
  std::shared_ptr<const nlohmann::json> raw;

  // Checks sizes and relations (heads divide hidden size, GQA groups, ...).
  Status validate() const;
  std::string summary() const;  // one line for logs
};

// Parses a config.json object. `overrides` (may be null) is merged on top first (vLLM's
// --hf-overrides).
Result<ModelConfig> parse_hf_config(const nlohmann::json& config, const nlohmann::json* overrides);
Result<ModelConfig> read_hf_config(const std::string& model_dir, const std::string& overrides_json);
// Maps GGUF metadata (general.architecture and its keys) to a config.
Result<ModelConfig> config_from_gguf(const io::GgufFile& gguf, const std::string& overrides_json);

}  // namespace strata
