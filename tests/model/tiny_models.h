// Tiny configs for every supported architecture, written to temp directories and loaded with
// dummy weights.
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

#include "core/file_util.h"
#include "model/model.h"

namespace strata::testing {

struct TinyArch {
  const char* name;
  const char* config_json;
};

inline const std::vector<TinyArch>& tiny_archs() {
  static const std::vector<TinyArch> archs = {
      {"llama3_untied",
       R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":64,
           "intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,
           "num_key_value_heads":2,"vocab_size":300,"max_position_embeddings":256,
           "rms_norm_eps":1e-5,"rope_theta":500000.0,"tie_word_embeddings":false,
           "rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,
                           "high_freq_factor":4.0,"original_max_position_embeddings":64}})"},
      {"llama2_tied_linear",
       R"({"architectures":["LlamaForCausalLM"],"hidden_size":48,"intermediate_size":80,
           "num_hidden_layers":2,"num_attention_heads":3,"vocab_size":257,
           "max_position_embeddings":256,"tie_word_embeddings":true,
           "rope_scaling":{"type":"linear","factor":2.0}})"},
      {"mistral",
       R"({"architectures":["MistralForCausalLM"],"hidden_size":64,"intermediate_size":112,
           "num_hidden_layers":2,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":16,
           "vocab_size":320,"max_position_embeddings":256,"rope_theta":1000000.0,
           "sliding_window":null})"},
      {"qwen2_bias",
       R"({"architectures":["Qwen2ForCausalLM"],"hidden_size":64,"intermediate_size":128,
           "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":1,
           "vocab_size":300,"max_position_embeddings":256,"tie_word_embeddings":true,
           "rope_theta":1000000.0})"},
      {"qwen3_qknorm",
       R"({"architectures":["Qwen3ForCausalLM"],"hidden_size":64,"intermediate_size":96,
           "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,
           "vocab_size":300,"max_position_embeddings":256,"tie_word_embeddings":true,
           "rope_theta":1000000.0,"attention_bias":false})"},
      // Mixture of experts on Llama-family attention.
      {"mixtral",
       R"({"architectures":["MixtralForCausalLM"],"hidden_size":64,"intermediate_size":48,
           "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
           "num_local_experts":6,"num_experts_per_tok":2,"vocab_size":300,
           "max_position_embeddings":256,"rope_theta":1000000.0,"rms_norm_eps":1e-5})"},
      {"qwen2_moe_shared_gate",
       R"({"architectures":["Qwen2MoeForCausalLM"],"hidden_size":64,"intermediate_size":96,
           "moe_intermediate_size":24,"shared_expert_intermediate_size":48,
           "num_hidden_layers":3,"num_attention_heads":4,"num_key_value_heads":2,
           "num_experts":8,"num_experts_per_tok":2,"norm_topk_prob":false,
           "decoder_sparse_step":1,"mlp_only_layers":[1],"vocab_size":300,
           "max_position_embeddings":256,"rope_theta":1000000.0,"tie_word_embeddings":false})"},
      {"qwen3_moe",
       R"({"architectures":["Qwen3MoeForCausalLM"],"hidden_size":64,"intermediate_size":96,
           "moe_intermediate_size":32,"num_hidden_layers":2,"num_attention_heads":4,
           "num_key_value_heads":2,"head_dim":16,"num_experts":8,"num_experts_per_tok":3,
           "norm_topk_prob":true,"decoder_sparse_step":1,"vocab_size":300,
           "max_position_embeddings":256,"rope_theta":1000000.0,"tie_word_embeddings":false})"},
      // Multi-head latent attention + DeepSeekMoE. V3-style: q LoRA, sigmoid routing with the
      // selection bias and group-limited top-k (noaux_tc), YaRN, block-scaled FP8 weights.
      {"deepseek_v3_fp8",
       R"({"architectures":["DeepseekV3ForCausalLM"],"model_type":"deepseek_v3","hidden_size":64,
           "intermediate_size":96,"moe_intermediate_size":32,"num_hidden_layers":3,
           "first_k_dense_replace":1,"moe_layer_freq":1,"num_attention_heads":5,
           "num_key_value_heads":5,"n_routed_experts":16,"n_shared_experts":1,
           "num_experts_per_tok":4,"n_group":4,"topk_group":2,"topk_method":"noaux_tc",
           "scoring_func":"sigmoid","norm_topk_prob":true,"routed_scaling_factor":2.5,
           "q_lora_rank":48,"kv_lora_rank":32,"qk_nope_head_dim":16,"qk_rope_head_dim":8,
           "v_head_dim":16,"vocab_size":300,"max_position_embeddings":1024,"rms_norm_eps":1e-6,
           "rope_theta":10000,"tie_word_embeddings":false,
           "rope_scaling":{"type":"yarn","factor":40,"beta_fast":32,"beta_slow":1,"mscale":1.0,
                           "mscale_all_dim":1.0,"original_max_position_embeddings":64},
           "quantization_config":{"quant_method":"fp8","fmt":"e4m3",
                                  "activation_scheme":"dynamic","weight_block_size":[32,32]}})"},
      // V2-Lite-style: one q_proj, softmax greedy routing, two shared experts, YaRN mscale 0.707.
      {"deepseek_v2_lite",
       R"({"architectures":["DeepseekV2ForCausalLM"],"hidden_size":64,"intermediate_size":80,
           "moe_intermediate_size":24,"num_hidden_layers":2,"first_k_dense_replace":1,
           "num_attention_heads":3,"n_routed_experts":8,"n_shared_experts":2,
           "num_experts_per_tok":3,"topk_method":"greedy","scoring_func":"softmax",
           "norm_topk_prob":false,"routed_scaling_factor":1.0,"q_lora_rank":null,
           "kv_lora_rank":32,"qk_nope_head_dim":16,"qk_rope_head_dim":8,"v_head_dim":16,
           "vocab_size":256,"max_position_embeddings":512,
           "rope_scaling":{"type":"yarn","factor":40,"mscale":0.707,"mscale_all_dim":0.707,
                           "original_max_position_embeddings":64,"beta_fast":32,"beta_slow":1}})"},
      // V2-style: group-limited greedy routing (groups by their best expert), scaling 16.
      {"deepseek_v2_groups",
       R"({"architectures":["DeepseekV2ForCausalLM"],"hidden_size":48,"intermediate_size":64,
           "moe_intermediate_size":16,"num_hidden_layers":2,"first_k_dense_replace":1,
           "num_attention_heads":2,"n_routed_experts":8,"n_shared_experts":1,
           "num_experts_per_tok":2,"n_group":4,"topk_group":2,
           "topk_method":"group_limited_greedy","scoring_func":"softmax",
           "routed_scaling_factor":16.0,"q_lora_rank":24,"kv_lora_rank":16,
           "qk_nope_head_dim":8,"qk_rope_head_dim":8,"v_head_dim":8,"vocab_size":280,
           "max_position_embeddings":256})"},
      // DeepSeek-V3.2: V3 + the sparse-attention indexer; index_topk 8 is below the test
      // prompts' lengths, so the selection matters.
      {"deepseek_v32",
       R"({"architectures":["DeepseekV32ForCausalLM"],"model_type":"deepseek_v32",
           "hidden_size":64,"intermediate_size":96,"moe_intermediate_size":32,
           "num_hidden_layers":2,"first_k_dense_replace":1,"moe_layer_freq":1,
           "num_attention_heads":5,"num_key_value_heads":5,"n_routed_experts":8,
           "n_shared_experts":1,"num_experts_per_tok":2,"n_group":4,"topk_group":2,
           "topk_method":"noaux_tc","scoring_func":"sigmoid","norm_topk_prob":true,
           "routed_scaling_factor":2.5,"q_lora_rank":48,"kv_lora_rank":32,
           "qk_nope_head_dim":16,"qk_rope_head_dim":8,"v_head_dim":16,"index_n_heads":4,
           "index_head_dim":16,"index_topk":8,"vocab_size":300,
           "max_position_embeddings":1024,"rms_norm_eps":1e-6,"rope_theta":10000,
           "tie_word_embeddings":false,
           "rope_scaling":{"type":"yarn","factor":40,"beta_fast":32,"beta_slow":1,"mscale":1.0,
                           "mscale_all_dim":1.0,"original_max_position_embeddings":64}})"},
  };
  return archs;
}

inline std::string write_tiny_config(const std::string& json) {
  char tmpl[] = "/tmp/strata_tiny_XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  (void)write_file(dir + "/config.json", json);
  return dir;
}

inline LoadedModel load_tiny(const TinyArch& a, ThreadPool& pool, const std::string& dtype,
                             int64_t max_tokens = 256) {
  LoadOptions o;
  o.model = write_tiny_config(a.config_json);
  o.load_format = "dummy";
  o.dtype = dtype;
  o.seed = 42;
  o.pool = &pool;
  o.limits = {max_tokens, 256, 16};
  auto m = load_model(o);
  EXPECT_TRUE(m.ok()) << a.name << ": " << m.status().to_string();
  return std::move(m).value();
}

}  // namespace strata::testing
