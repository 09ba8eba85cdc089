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
