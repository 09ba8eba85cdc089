#include "model/model_config.h"

#include <sstream>

#include "core/file_util.h"
#include "core/json.h"
#include "core/strings.h"
#include "io/gguf.h"

namespace strata {
namespace {

Status require(const Json& c, const char* key) {
  if (!c.contains(key) || c[key].is_null())
    return invalid_argument(std::string("config.json has no '") + key + "'");
  return ok_status();
}

template <typename T>
T get_or(const Json& c, const char* key, T fallback) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  return c[key].get<T>();
}

Result<RopeScaling> parse_rope_scaling(const Json& c) {
  RopeScaling rs;
  const char* key = c.contains("rope_scaling") ? "rope_scaling" : "rope_parameters";
  if (!c.contains(key) || c[key].is_null()) return rs;
  const Json& r = c[key];
  if (!r.is_object()) return invalid_argument("config.json: rope_scaling must be an object");
  std::string type = get_or<std::string>(r, "rope_type", get_or<std::string>(r, "type", "default"));
  if (type == "default" || type == "none")
    rs.type = RopeScalingType::kNone;
  else if (type == "linear")
    rs.type = RopeScalingType::kLinear;
  else if (type == "llama3")
    rs.type = RopeScalingType::kLlama3;
  else if (type == "yarn")
    rs.type = RopeScalingType::kYarn;
  else if (type == "dynamic")
    rs.type = RopeScalingType::kDynamic;
  else
    return unimplemented("rope_scaling type '" + type +
                         "' is not supported (supported: linear, llama3, yarn, dynamic)");
  rs.factor = get_or<double>(r, "factor", 1.0);
  rs.low_freq_factor = get_or<double>(r, "low_freq_factor", 1.0);
  rs.high_freq_factor = get_or<double>(r, "high_freq_factor", 4.0);
  rs.original_max_position_embeddings = get_or<int64_t>(r, "original_max_position_embeddings", 0);
  rs.beta_fast = get_or<double>(r, "beta_fast", 32.0);
  rs.beta_slow = get_or<double>(r, "beta_slow", 1.0);
  rs.mscale = get_or<double>(r, "mscale", 1.0);
  rs.mscale_all_dim = get_or<double>(r, "mscale_all_dim", 0.0);
  if (r.contains("attention_factor") && !r["attention_factor"].is_null())
    rs.attention_factor = r["attention_factor"].get<double>();
  if (rs.factor <= 0) return invalid_argument("config.json: rope_scaling.factor must be > 0");
  return rs;
}

// AWQ / GPTQ quantization_config (int_quant.h). vLLM's names: bits ("w_bit" in some AWQ
// exports), group_size ("q_group_size"), zero_point (AWQ), sym / desc_act / checkpoint_format
// (GPTQ).
Result<IntQuantization> parse_int_quantization(const Json& q, const std::string& method) {
  IntQuantization iq;
  iq.method = method;
  const auto int_field = [&](const char* a, const char* b, int64_t def) -> int64_t {
    if (q.contains(a) && q[a].is_number_integer()) return q[a].get<int64_t>();
    if (q.contains(b) && q[b].is_number_integer()) return q[b].get<int64_t>();
    return def;
  };
  iq.bits = static_cast<int>(int_field("bits", "w_bit", 4));
  iq.group_size = int_field("group_size", "q_group_size", 128);
  if (iq.group_size == 0 || iq.group_size < -1)
    return invalid_argument("config.json: quantization_config.group_size must be positive or -1");
  if (q.contains("modules_to_not_convert") && !q["modules_to_not_convert"].is_null()) {
    const Json& m = q["modules_to_not_convert"];
    if (!m.is_array())
      return invalid_argument(
          "config.json: quantization_config.modules_to_not_convert must be a list of names");
    for (const Json& e : m) {
      if (!e.is_string())
        return invalid_argument(
            "config.json: quantization_config.modules_to_not_convert must be a list of names");
      iq.modules_to_not_convert.push_back(e.get<std::string>());
    }
  }
  if (method == "awq") {
    if (iq.bits != 4)
      return unimplemented("AWQ with " + std::to_string(iq.bits) +
                           " bits is not supported (AWQ checkpoints are 4-bit)");
    if (!get_or<bool>(q, "zero_point", true))
      return unimplemented("AWQ without zero points (zero_point: false) is not supported");
    const std::string version = to_lower(get_or<std::string>(q, "version", "gemm"));
    if (version != "gemm")
      return unimplemented("AWQ version '" + version +
                           "' is not supported (only the GEMM packing, as vLLM)");
    return iq;
  }
  if (iq.bits != 4 && iq.bits != 8)
    return unimplemented("GPTQ with " + std::to_string(iq.bits) +
                         " bits is not supported (4 and 8 are)");
  iq.sym = get_or<bool>(q, "sym", true);
  iq.desc_act = get_or<bool>(q, "desc_act", false);
  const std::string fmt = get_or<std::string>(q, "checkpoint_format", "gptq");
  if (fmt != "gptq" && fmt != "gptq_v2")
    return unimplemented("GPTQ checkpoint_format '" + fmt + "' is not supported (gptq, gptq_v2)");
  iq.zeros_plus_one = fmt == "gptq";
  iq.lm_head = get_or<bool>(q, "lm_head", false);
  return iq;
}

// compressed-tensors quantization_config (int_quant.h), as llm-compressor writes it:
//   {"format": "pack-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
//    "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group",
//    "group_size": 128, "actorder": null, "dynamic": false}, "input_activations": null}},
//    "ignore": ["lm_head"], "kv_cache_scheme": null}
// Integer weights packed into int32 ("pack-quantized"), 4 or 8 bits, group or channel strategy,
// one scheme for all groups. Which layers are quantized follows the tensors in the file (a layer
// in `ignore` has a plain `.weight`). A scheme that also quantizes input activations (W4A8) runs
// weight-only: activations stay float (the loader says so). Everything else is refused clearly.
Result<IntQuantization> parse_compressed_tensors(const Json& q) {
  const std::string top_format = get_or<std::string>(q, "format", "");
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty())
    return invalid_argument(
        "config.json: compressed-tensors quantization_config has no config_groups");
  if (q.contains("kv_cache_scheme") && !q["kv_cache_scheme"].is_null())
    return unimplemented(
        "compressed-tensors kv_cache_scheme (a quantized KV cache with checkpoint scales) is "
        "not supported; Strata's KV cache dtype is chosen with --kv-cache-dtype");
  if (q.contains("sparsity_config") && q["sparsity_config"].is_object() &&
      !q["sparsity_config"].empty() &&
      get_or<std::string>(q["sparsity_config"], "format", "dense") != "dense")
    return unimplemented("compressed-tensors sparsity (sparsity_config format '" +
                         get_or<std::string>(q["sparsity_config"], "format", "") +
                         "') is not supported");
  std::optional<IntQuantization> out;
  for (auto it = q["config_groups"].begin(); it != q["config_groups"].end(); ++it) {
    const std::string where = "compressed-tensors config_groups." + it.key();
    const Json& g = *it;
    if (!g.is_object()) return invalid_argument("config.json: " + where + " must be an object");
    const std::string format = get_or<std::string>(g, "format", top_format);
    if (!g.contains("weights") || !g["weights"].is_object())
      return unimplemented(where + " does not quantize weights (activation-only schemes are " +
                           "not supported)");
    const Json& w = g["weights"];
    const std::string type = get_or<std::string>(w, "type", "int");
    const int64_t bits = get_or<int64_t>(w, "num_bits", 8);
    if (format == "float-quantized" || type == "float")
      return unimplemented(where +
                           ": FP8 weights (format float-quantized, type float) are not "
                           "supported yet; integer pack-quantized (W4A16, W8A16) is");
    if (format != "pack-quantized")
      return unimplemented(where + ": format '" + format +
                           "' is not supported (supported: pack-quantized integer weights, as "
                           "llm-compressor's W4A16 and W8A16 write them)");
    if (type != "int")
      return unimplemented(where + ": weights of type '" + type + "' are not supported (int)");
    if (bits != 4 && bits != 8)
      return unimplemented(where + ": " + std::to_string(bits) +
                           "-bit weights are not supported (4 and 8 are)");
    if (get_or<bool>(w, "dynamic", false))
      return unimplemented(where + ": dynamic weight quantization is not supported");
    if (g.contains("output_activations") && !g["output_activations"].is_null())
      return unimplemented(where + ": output activation quantization is not supported");
    IntQuantization iq;
    iq.method = "compressed-tensors";
    iq.bits = static_cast<int>(bits);
    iq.sym = get_or<bool>(w, "symmetric", true);
    const std::string strategy = get_or<std::string>(w, "strategy", "");
    if (strategy == "channel") {
      iq.group_size = -1;
    } else if (strategy == "group") {
      if (!w.contains("group_size") || !w["group_size"].is_number_integer() ||
          w["group_size"].get<int64_t>() <= 0)
        return invalid_argument("config.json: " + where +
                                ".weights.group_size must be a positive integer for strategy "
                                "group");
      iq.group_size = w["group_size"].get<int64_t>();
    } else {
      return unimplemented(where + ": weight strategy '" + strategy +
                           "' is not supported (group and channel are)");
    }
    if (w.contains("actorder") && w["actorder"].is_string())
      iq.desc_act = w["actorder"].get<std::string>() == "group";
    iq.activations_quantized = g.contains("input_activations") && !g["input_activations"].is_null();
    if (out && (out->bits != iq.bits || out->group_size != iq.group_size || out->sym != iq.sym))
      return unimplemented(
          "compressed-tensors checkpoints whose config_groups use different weight schemes are "
          "not supported (one bits / group size / symmetry for all layers)");
    out = iq;
  }
  return *out;
}

// compressed-tensors "float-quantized": every config group quantizes weights to 8-bit floats.
bool is_float_quantized(const Json& q) {
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty())
    return false;
  const std::string top = get_or<std::string>(q, "format", "");
  for (auto it = q["config_groups"].begin(); it != q["config_groups"].end(); ++it) {
    if (!it->is_object() || !it->contains("weights") || !(*it)["weights"].is_object()) return false;
    const Json& w = (*it)["weights"];
    if (get_or<std::string>(*it, "format", top) != "float-quantized" &&
        get_or<std::string>(w, "type", "int") != "float")
      return false;
  }
  return true;
}

// The float-quantized schemes Strata runs: FP8 (8-bit float) weights, channel or tensor
// strategy, static; input activations, if quantized, stay float here (weight-only).
Status check_float_quantized(const Json& q) {
  if (q.contains("kv_cache_scheme") && !q["kv_cache_scheme"].is_null())
    return unimplemented(
        "compressed-tensors kv_cache_scheme (a quantized KV cache with checkpoint scales) is "
        "not supported; Strata's KV cache dtype is chosen with --kv-cache-dtype");
  for (auto it = q["config_groups"].begin(); it != q["config_groups"].end(); ++it) {
    const std::string where = "compressed-tensors config_groups." + it.key();
    const Json& w = (*it)["weights"];
    if (get_or<int64_t>(w, "num_bits", 8) != 8 ||
        get_or<std::string>(w, "type", "float") != "float")
      return unimplemented(where + ": float weights other than 8-bit (FP8) are not supported");
    const std::string strategy = get_or<std::string>(w, "strategy", "tensor");
    if (strategy != "channel" && strategy != "tensor")
      return unimplemented(where + ": FP8 weight strategy '" + strategy +
                           "' is not supported (channel and tensor are)");
    if (get_or<bool>(w, "dynamic", false))
      return unimplemented(where + ": dynamic weight quantization is not supported");
  }
  return ok_status();
}

// quantization_config: AWQ, GPTQ, compressed-tensors and block-scaled FP8; anything else is a clear
// error.
Status parse_quantization(const Json& c, ModelConfig* m) {
  if (!c.contains("quantization_config") || c["quantization_config"].is_null()) return ok_status();
  const Json& q = c["quantization_config"];
  if (!q.is_object()) return invalid_argument("config.json: quantization_config must be an object");
  const std::string method = get_or<std::string>(q, "quant_method", "");
  if (method == "awq" || method == "gptq") {
    STRATA_ASSIGN_OR_RETURN(IntQuantization iq, parse_int_quantization(q, method));
    m->int_quant = iq;
    return ok_status();
  }
  if (method == "compressed-tensors" && is_float_quantized(q)) {
    // FP8 weights with a per-channel ([n, 1]) or per-tensor `weight_scale`: the per-tensor FP8
    // path (activations stay float).
    STRATA_RETURN_IF_ERROR(check_float_quantized(q));
    Fp8Quantization& f = m->fp8.emplace();
    f.per_tensor = true;
    f.block_n = 1;
    f.block_k = Fp8Quantization::kWholeRow;
    f.method = "compressed-tensors";
    return ok_status();
  }
  if (method == "compressed-tensors") {
    STRATA_ASSIGN_OR_RETURN(IntQuantization iq, parse_compressed_tensors(q));
    m->int_quant = iq;
    return ok_status();
  }
  if (method != "fp8")
    return unimplemented(
        "quantization method '" + method +
        "' is not supported (supported: awq, gptq, compressed-tensors pack-quantized, and fp8 "
        "with block scales as "
        "DeepSeek-V3 ships); use an unquantised checkpoint");
  const std::string fmt = get_or<std::string>(q, "fmt", "e4m3");
  if (fmt != "e4m3") return unimplemented("FP8 format '" + fmt + "' is not supported (only e4m3)");
  if (!q.contains("weight_block_size") || q["weight_block_size"].is_null()) {
    // Per-tensor (or per-channel) weight scales; activations stay float here (vLLM quantizes
    // them to FP8 on a GPU; a CPU has no FP8 arithmetic to gain from).
    Fp8Quantization& f = m->fp8.emplace();
    f.per_tensor = true;
    f.block_n = 1;
    f.block_k = Fp8Quantization::kWholeRow;
    return ok_status();
  }
  if (!q["weight_block_size"].is_array() || q["weight_block_size"].size() != 2)
    return invalid_argument(
        "config.json: quantization_config.weight_block_size must be [block_n, block_k]");
  Fp8Quantization& f = m->fp8.emplace();
  f.block_n = q["weight_block_size"][0].get<int64_t>();
  f.block_k = q["weight_block_size"][1].get<int64_t>();
  if (f.block_n <= 0 || f.block_k <= 0 || f.block_k % 16 != 0)
    return unimplemented("FP8 weight_block_size [" + std::to_string(f.block_n) + ", " +
                         std::to_string(f.block_k) +
                         "] is not supported (block columns must be a multiple of 16)");
  return ok_status();
}

void merge_patch(Json& target, const Json& patch) {
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (it->is_object() && target.contains(it.key()) && target[it.key()].is_object())
      merge_patch(target[it.key()], *it);
    else
      target[it.key()] = *it;
  }
}

}  // namespace

Status ModelConfig::validate() const {
  auto positive = [](int64_t v, const char* name) -> Status {
    if (v <= 0) return invalid_argument(std::string("model config: ") + name + " must be > 0");
    return ok_status();
  };
  STRATA_RETURN_IF_ERROR(positive(vocab_size, "vocab_size"));
  STRATA_RETURN_IF_ERROR(positive(hidden_size, "hidden_size"));
  STRATA_RETURN_IF_ERROR(positive(intermediate_size, "intermediate_size"));
  STRATA_RETURN_IF_ERROR(positive(num_hidden_layers, "num_hidden_layers"));
  STRATA_RETURN_IF_ERROR(positive(num_attention_heads, "num_attention_heads"));
  STRATA_RETURN_IF_ERROR(positive(num_key_value_heads, "num_key_value_heads"));
  STRATA_RETURN_IF_ERROR(positive(head_dim, "head_dim"));
  STRATA_RETURN_IF_ERROR(positive(max_position_embeddings, "max_position_embeddings"));
  if (num_attention_heads % num_key_value_heads != 0)
    return invalid_argument("model config: num_attention_heads (" +
                            std::to_string(num_attention_heads) +
                            ") must be a multiple of num_key_value_heads (" +
                            std::to_string(num_key_value_heads) + ")");
  if (rotary_dim <= 0 || rotary_dim > head_dim || rotary_dim % 2 != 0)
    return invalid_argument("model config: rotary dims (" + std::to_string(rotary_dim) +
                            ") must be even and at most head_dim (" + std::to_string(head_dim) +
                            ")");
  if (head_dim > 1024) return unimplemented("head_dim above 1024 is not supported");
  if (hidden_act != "silu" && hidden_act != "swish")
    return unimplemented("hidden_act '" + hidden_act + "' is not supported (only silu)");
  return ok_status();
}

std::string ModelConfig::summary() const {
  std::ostringstream os;
  os << architecture << ": layers=" << num_hidden_layers << " hidden=" << hidden_size
     << " heads=" << num_attention_heads << " kv_heads=" << num_key_value_heads
     << " head_dim=" << head_dim << " ffn=" << intermediate_size << " vocab=" << vocab_size
     << " max_pos=" << max_position_embeddings;
  return os.str();
}

Result<ModelConfig> parse_hf_config(const Json& config_in, const Json* overrides) {
  if (!config_in.is_object()) return invalid_argument("config.json is not a JSON object");
  auto c = std::make_shared<Json>(config_in);
  if (overrides != nullptr) {
    if (!overrides->is_object()) return invalid_argument("--hf-overrides must be a JSON object");
    merge_patch(*c, *overrides);
  }
  ModelConfig m;
  try {
    if (c->contains("architectures") && (*c)["architectures"].is_array() &&
        !(*c)["architectures"].empty())
      m.architecture = (*c)["architectures"][0].get<std::string>();
    m.model_type = get_or<std::string>(*c, "model_type", "");
    if (m.architecture.empty())
      return invalid_argument("config.json has no 'architectures' list naming the model class");
    for (const char* k : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads"})
      STRATA_RETURN_IF_ERROR(require(*c, k));
    m.vocab_size = (*c)["vocab_size"].get<int64_t>();
    m.hidden_size = (*c)["hidden_size"].get<int64_t>();
    m.intermediate_size = get_or<int64_t>(*c, "intermediate_size", 4 * m.hidden_size);
    m.num_hidden_layers = (*c)["num_hidden_layers"].get<int64_t>();
    m.num_attention_heads = (*c)["num_attention_heads"].get<int64_t>();
    m.num_key_value_heads = get_or<int64_t>(*c, "num_key_value_heads", m.num_attention_heads);
    int64_t default_hd = m.num_attention_heads > 0 ? m.hidden_size / m.num_attention_heads : 0;
    m.head_dim = get_or<int64_t>(*c, "head_dim", default_hd);
    double partial = get_or<double>(*c, "partial_rotary_factor", 1.0);
    m.rotary_dim = static_cast<int64_t>(m.head_dim * partial);
    m.max_position_embeddings = get_or<int64_t>(*c, "max_position_embeddings", 2048);
    m.rms_norm_eps = get_or<double>(*c, "rms_norm_eps", 1e-6);
    m.rope_theta = get_or<double>(*c, "rope_theta", 10000.0);
    STRATA_ASSIGN_OR_RETURN(m.rope_scaling, parse_rope_scaling(*c));
    m.tie_word_embeddings = get_or<bool>(*c, "tie_word_embeddings", false);
    m.attention_bias = get_or<bool>(*c, "attention_bias", false);
    m.hidden_act = get_or<std::string>(*c, "hidden_act", "silu");
    m.initializer_range = get_or<double>(*c, "initializer_range", 0.02);
    if (c->contains("sliding_window") && (*c)["sliding_window"].is_number_integer() &&
        get_or<bool>(*c, "use_sliding_window", true))
      m.sliding_window = (*c)["sliding_window"].get<int64_t>();
    if (c->contains("bos_token_id") && (*c)["bos_token_id"].is_number_integer())
      m.bos_token_id = (*c)["bos_token_id"].get<int32_t>();
    if (c->contains("eos_token_id")) {
      const Json& e = (*c)["eos_token_id"];
      if (e.is_number_integer())
        m.eos_token_ids.push_back(e.get<int32_t>());
      else if (e.is_array())
        for (const auto& x : e)
          if (x.is_number_integer()) m.eos_token_ids.push_back(x.get<int32_t>());
    }
    std::string dt =
        get_or<std::string>(*c, "torch_dtype", get_or<std::string>(*c, "dtype", "bfloat16"));
    if (!parse_dtype(dt, &m.torch_dtype)) m.torch_dtype = DType::kBF16;
    STRATA_RETURN_IF_ERROR(parse_quantization(*c, &m));
  } catch (const Json::exception& e) {
    return invalid_argument(std::string("config.json has a field of the wrong type: ") + e.what());
  }
  // Architecture-specific defaults.
  if (m.architecture == "Qwen2ForCausalLM" || m.architecture == "Qwen2MoeForCausalLM")
    m.attention_bias = get_or<bool>(*c, "qkv_bias", true);
  if (m.architecture == "Qwen3ForCausalLM" || m.architecture == "Qwen3MoeForCausalLM")
    m.qk_norm = true;
  // DeepSeek MLA: a head's query/key has qk_nope + qk_rope dims, the rope part rotating.
  if ((m.architecture == "DeepseekV2ForCausalLM" || m.architecture == "DeepseekV3ForCausalLM" ||
       m.architecture == "DeepseekV32ForCausalLM") &&
      c->contains("qk_rope_head_dim") && (*c)["qk_rope_head_dim"].is_number_integer() &&
      c->contains("qk_nope_head_dim") && (*c)["qk_nope_head_dim"].is_number_integer()) {
    m.rotary_dim = (*c)["qk_rope_head_dim"].get<int64_t>();
    m.head_dim = m.rotary_dim + (*c)["qk_nope_head_dim"].get<int64_t>();
    // MLA caches one shared latent per token, not K/V heads: num_key_value_heads (128 in V3's
    // config) means nothing here and must not constrain num_attention_heads (vLLM ignores it
    // too). Every query head reads the latent, as if each had its own KV head.
    if (c->contains("kv_lora_rank") && (*c)["kv_lora_rank"].is_number_integer())
      m.num_key_value_heads = m.num_attention_heads;
  }
  m.raw = c;
  STRATA_RETURN_IF_ERROR(m.validate());
  return m;
}

Result<ModelConfig> read_hf_config(const std::string& model_dir,
                                   const std::string& overrides_json) {
  std::string path = path_join(model_dir, "config.json");
  if (!file_exists(path))
    return not_found("'" + model_dir +
                     "' has no config.json (expected a Hugging Face model "
                     "directory or a .gguf file)");
  STRATA_ASSIGN_OR_RETURN(Json c, read_json_file(path));
  Json overrides;
  if (!overrides_json.empty()) {
    STRATA_ASSIGN_OR_RETURN(overrides, parse_json(overrides_json, "--hf-overrides"));
  }
  auto r = parse_hf_config(c, overrides_json.empty() ? nullptr : &overrides);
  if (!r.ok()) return r.status().with_context(path);
  return r;
}

Result<ModelConfig> config_from_gguf(const io::GgufFile& g, const std::string& overrides_json) {
  std::string arch = g.architecture();
  if (arch.empty())
    return invalid_argument("GGUF file '" + g.path() + "' has no general.architecture");
  Json c = Json::object();
  if (arch == "llama" || arch == "mistral") {
    c["architectures"] = {"LlamaForCausalLM"};
    c["model_type"] = "llama";
  } else if (arch == "qwen2") {
    c["architectures"] = {"Qwen2ForCausalLM"};
    c["model_type"] = "qwen2";
  } else if (arch == "qwen3") {
    c["architectures"] = {"Qwen3ForCausalLM"};
    c["model_type"] = "qwen3";
  } else {
    return unimplemented("GGUF architecture '" + arch + "' in '" + g.path() +
                         "' is not supported (supported: llama, qwen2, qwen3)");
  }
  auto key = [&](const std::string& k) { return arch + "." + k; };
  auto put_int = [&](const char* json_key, const std::string& gguf_key) -> Status {
    STRATA_ASSIGN_OR_RETURN(auto v, g.get_int(gguf_key));
    if (v) c[json_key] = *v;
    return ok_status();
  };
  auto put_float = [&](const char* json_key, const std::string& gguf_key) -> Status {
    STRATA_ASSIGN_OR_RETURN(auto v, g.get_float(gguf_key));
    if (v) c[json_key] = *v;
    return ok_status();
  };
  STRATA_RETURN_IF_ERROR(put_int("hidden_size", key("embedding_length")));
  STRATA_RETURN_IF_ERROR(put_int("intermediate_size", key("feed_forward_length")));
  STRATA_RETURN_IF_ERROR(put_int("num_hidden_layers", key("block_count")));
  STRATA_RETURN_IF_ERROR(put_int("num_attention_heads", key("attention.head_count")));
  STRATA_RETURN_IF_ERROR(put_int("num_key_value_heads", key("attention.head_count_kv")));
  STRATA_RETURN_IF_ERROR(put_int("head_dim", key("attention.key_length")));
  STRATA_RETURN_IF_ERROR(put_int("max_position_embeddings", key("context_length")));
  STRATA_RETURN_IF_ERROR(put_int("vocab_size", key("vocab_size")));
  STRATA_RETURN_IF_ERROR(put_float("rms_norm_eps", key("attention.layer_norm_rms_epsilon")));
  STRATA_RETURN_IF_ERROR(put_float("rope_theta", key("rope.freq_base")));
  if (!c.contains("vocab_size")) {
    STRATA_ASSIGN_OR_RETURN(auto toks, g.get_string_array("tokenizer.ggml.tokens"));
    if (!toks.empty())
      c["vocab_size"] = toks.size();
    else if (g.has_tensor("token_embd.weight")) {
      STRATA_ASSIGN_OR_RETURN(auto t, g.tensor("token_embd.weight"));
      c["vocab_size"] = t.shape[0];
    }
  }
  STRATA_ASSIGN_OR_RETURN(auto rot, g.get_int(key("rope.dimension_count")));
  STRATA_ASSIGN_OR_RETURN(auto scaling, g.get_string(key("rope.scaling.type")));
  if (scaling && *scaling != "none") {
    Json rs = {{"rope_type", *scaling}};
    STRATA_ASSIGN_OR_RETURN(auto f, g.get_float(key("rope.scaling.factor")));
    if (f) rs["factor"] = *f;
    STRATA_ASSIGN_OR_RETURN(auto o, g.get_int(key("rope.scaling.original_context_length")));
    if (o) rs["original_max_position_embeddings"] = *o;
    c["rope_scaling"] = rs;
  }
  c["tie_word_embeddings"] = !g.has_tensor("output.weight");
  STRATA_ASSIGN_OR_RETURN(auto bos, g.get_int("tokenizer.ggml.bos_token_id"));
  if (bos) c["bos_token_id"] = *bos;
  STRATA_ASSIGN_OR_RETURN(auto eos, g.get_int("tokenizer.ggml.eos_token_id"));
  if (eos) c["eos_token_id"] = *eos;
  c["torch_dtype"] = "float32";
  Json overrides;
  if (!overrides_json.empty()) {
    STRATA_ASSIGN_OR_RETURN(overrides, parse_json(overrides_json, "--hf-overrides"));
  }
  auto r = parse_hf_config(c, overrides_json.empty() ? nullptr : &overrides);
  if (!r.ok()) return r.status().with_context("GGUF '" + g.path() + "'");
  ModelConfig m = std::move(r).value();
  if (rot && *rot > 0) m.rotary_dim = *rot;
  // llama.cpp stores llama-family q/k rows permuted for adjacent-pair RoPE.
  m.rope_neox = arch != "llama" && arch != "mistral";
  STRATA_RETURN_IF_ERROR(m.validate());
  return m;
}

}  // namespace strata
