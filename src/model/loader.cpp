// load_model(): finds the format, reads the config, opens the weights and builds the architecture
// registered under the config's HF `architectures` name.
#include <functional>
#include <map>

#include "core/clock.h"
#include "core/file_util.h"
#include "core/json.h"
#include "core/logging.h"
#include "core/strings.h"
#include "io/gguf.h"
#include "model/deepseek.h"
#include "model/deepseek_v4.h"
#include "model/llama.h"
#include "model/memory_estimate.h"
#include "model/model.h"

namespace strata {
namespace {

// An architecture: how to build it, and what it would hold (memory_estimate.h).
struct Architecture {
  Result<std::unique_ptr<Model>> (*create)(const ModelConfig&, std::unique_ptr<WeightSource>,
                                           const ModelBuildOptions&);
  Result<ModelMemoryEstimate> (*estimate)(const ModelConfig&, WeightSource&,
                                          const ModelBuildOptions&, int threads);
};

// The architecture registry, keyed by Hugging Face `architectures` names.
const std::map<std::string, Architecture>& registry() {
  static const Architecture kLlama{create_llama_model, estimate_llama_model};
  static const Architecture kDeepseek{create_deepseek_model, estimate_deepseek_model};
  static const Architecture kDeepseekV4{create_deepseek_v4_model, estimate_deepseek_v4_model};
  static const std::map<std::string, Architecture> r = {
      {"LlamaForCausalLM", kLlama},
      {"MistralForCausalLM", kLlama},
      {"Qwen2ForCausalLM", kLlama},
      {"Qwen3ForCausalLM", kLlama},
      // Mixture of experts (model/moe.h) on the Llama-family attention.
      {"MixtralForCausalLM", kLlama},
      {"Qwen2MoeForCausalLM", kLlama},
      {"Qwen3MoeForCausalLM", kLlama},
      // Multi-head latent attention + DeepSeekMoE (model/deepseek.h).
      {"DeepseekV2ForCausalLM", kDeepseek},
      {"DeepseekV3ForCausalLM", kDeepseek},
      // + DeepSeek Sparse Attention's lightning indexer (model/deepseek_mla.h).
      {"DeepseekV32ForCausalLM", kDeepseek},
      // Compressed sparse attention, hyper-connections, MXFP4 experts (model/deepseek_v4.h).
      {"DeepseekV4ForCausalLM", kDeepseekV4},
  };
  return r;
}

bool is_gguf_path(const std::string& path) {
  return ends_with(to_lower(path), ".gguf");
}

int64_t int_or(const Json& c, const char* key, int64_t fallback) {
  return c.contains(key) && c[key].is_number_integer() ? c[key].get<int64_t>() : fallback;
}

// The checkpoint seen from its multi-token-prediction layer N (LoadOptions::mtp_module): the
// one-layer model's layer 0 is model.layers.N, its final norm and output head are the layer's
// shared_head, and its embedding the layer's own copy when the checkpoint has one (else the main
// model's, which it equals in DeepSeek-V3).
class MtpWeightSource final : public WeightSource {
 public:
  MtpWeightSource(std::unique_ptr<WeightSource> inner, int64_t layer)
      : inner_(std::move(inner)), prefix_("model.layers." + std::to_string(layer) + ".") {
    set_int_quant(inner_->int_quant() ? std::optional(*inner_->int_quant()) : std::nullopt);
  }
  TensorNaming naming() const override { return inner_->naming(); }
  std::string describe() const override {
    return inner_->describe() + " (its " + prefix_ + " multi-token-prediction layer)";
  }
  bool has(const std::string& name) const override { return inner_->has(rename(name)); }
  void release(const io::TensorRef& t) override { inner_->release(t); }
  Result<io::TensorRef> get(const std::string& name, const std::vector<int64_t>& shape,
                            DummyInit init) override {
    return inner_->get(rename(name), shape, init);
  }
  Result<io::TensorRef> get_rows(const std::string& name, const std::vector<int64_t>& shape,
                                 int64_t begin, int64_t end, DummyInit init) override {
    return inner_->get_rows(rename(name), shape, begin, end, init);
  }
  Result<io::TensorRef> peek(const std::string& name, const std::vector<int64_t>& shape) override {
    return inner_->peek(rename(name), shape);
  }
  void release_generated() override { inner_->release_generated(); }

 private:
  std::string rename(const std::string& name) const {
    static const std::string kLayer0 = "model.layers.0.";
    if (name.rfind(kLayer0, 0) == 0) return prefix_ + name.substr(kLayer0.size());
    if (name.rfind("model.norm.", 0) == 0)
      return prefix_ + "shared_head.norm." + name.substr(std::string("model.norm.").size());
    if (name.rfind("lm_head.", 0) == 0) {
      const std::string own = prefix_ + "shared_head.head." + name.substr(8);
      return inner_->has(own) ? own : name;
    }
    if (name.rfind("model.embed_tokens.", 0) == 0) {
      const std::string own = prefix_ + name.substr(6);
      return inner_->has(own) ? own : name;
    }
    return name;
  }
  std::unique_ptr<WeightSource> inner_;
  std::string prefix_;
};

// The config of a checkpoint's MTP layer as a one-layer model (dense or MoE as that layer is).
Result<ModelConfig> mtp_config(const ModelConfig& c, const std::string& model) {
  const Json* raw = c.raw.get();
  const int64_t n = raw != nullptr ? int_or(*raw, "num_nextn_predict_layers", 0) : 0;
  if (n < 1)
    return invalid_argument(model + " has no multi-token-prediction layer (config.json " +
                            "num_nextn_predict_layers is " + std::to_string(n) +
                            "): use \"method\": \"draft_model\" or \"ngram\"");
  Json j = *raw;
  const int64_t layer = c.num_hidden_layers;
  const int64_t first_dense = int_or(j, "first_k_dense_replace", 0);
  const int64_t freq = std::max<int64_t>(1, int_or(j, "moe_layer_freq", 1));
  const bool moe = j.contains("n_routed_experts") && !j["n_routed_experts"].is_null() &&
                   layer >= first_dense && layer % freq == 0;
  j["num_hidden_layers"] = 1;
  j["first_k_dense_replace"] = moe ? 0 : 1;
  j["moe_layer_freq"] = 1;
  j["num_nextn_predict_layers"] = 0;
  return parse_hf_config(j, nullptr);
}

// Dummy weights of an AWQ or GPTQ config are those of its checkpoint (make_int_quant_dummy_source);
// a compressed-tensors config's dummy weights stay float.
bool dummy_int_quant(const ModelConfig& c) {
  return c.int_quant && (c.int_quant->method == "awq" || c.int_quant->method == "gptq");
}

Result<std::string> resolve_format(const LoadOptions& o) {
  const std::string& f = o.load_format;
  if (f != "auto" && f != "safetensors" && f != "gguf" && f != "dummy")
    return invalid_argument("--load-format must be auto, safetensors, gguf or dummy, not '" + f +
                            "'");
  bool exists = file_exists(o.model) || is_directory(o.model);
  if (!exists)
    return not_found("model '" + o.model +
                     "' does not exist (give a Hugging Face model directory or a .gguf file)");
  if (f == "dummy") return std::string("dummy");
  if (f == "gguf" || (f == "auto" && is_gguf_path(o.model) && file_exists(o.model))) {
    if (!file_exists(o.model)) return invalid_argument("--load-format gguf needs a .gguf file");
    return std::string("gguf");
  }
  if (!is_directory(o.model))
    return invalid_argument("'" + o.model + "' is a file but not a .gguf file");
  if (!io::has_safetensors(o.model))
    return not_found("'" + o.model +
                     "' has no .safetensors weights (use --load-format dummy to run "
                     "its config.json with random weights)");
  return std::string("safetensors");
}

Result<std::optional<DType>> resolve_dtype(const std::string& dtype, const ModelConfig& c,
                                           const std::string& format) {
  if (dtype == "auto") {
    if (format == "gguf") return std::optional<DType>();  // keep each tensor's stored type
    DType d = c.torch_dtype;
    if (d != DType::kF32 && d != DType::kF16 && d != DType::kBF16) d = DType::kBF16;
    return std::optional<DType>(d);
  }
  DType d;
  if (!parse_dtype(dtype, &d) ||
      (d != DType::kF32 && d != DType::kF16 && d != DType::kBF16 && d != DType::kQ8_0))
    return invalid_argument("--dtype must be auto, float32, bfloat16 or float16, not '" + dtype +
                            "'");
  return std::optional<DType>(d);
}

// --quantization against the checkpoint, as vLLM checks it: the checkpoint's own method is
// inferred (gguf, fp8, awq, gptq, compressed-tensors; vLLM's awq_marlin / gptq_marlin name the
// same checkpoints) and
// a different one is refused; on an unquantized checkpoint, fp8 and q8_0
// quantize the decoder layers at load. Returns the layers' storage for online quantization.
Result<std::optional<DType>> resolve_quantization(const std::string& q, const ModelConfig& c,
                                                  const std::string& format) {
  const std::string own = format == "gguf" ? "gguf"
                          : c.fp8          ? c.fp8->method
                          : c.int_quant && (format != "dummy" || dummy_int_quant(c))
                              ? c.int_quant->method
                              : "";
  if (q.empty() || q == own) return std::optional<DType>();
  if ((q == "awq_marlin" && own == "awq") || (q == "gptq_marlin" && own == "gptq"))
    return std::optional<DType>();
  static const char* kKnown[] = {"awq",        "gptq",        "compressed-tensors",
                                 "awq_marlin", "gptq_marlin", "bitsandbytes",
                                 "gguf",       "fp8",         "q8_0"};
  bool known = false;
  for (const char* k : kKnown) known = known || q == k;
  if (!known)
    return invalid_argument("--quantization " + q +
                            " is not a method Strata knows (checkpoint methods: gguf, fp8, awq, "
                            "gptq, compressed-tensors; online "
                            "on an unquantized checkpoint: fp8, q8_0)");
  if (!own.empty())
    return invalid_argument("--quantization " + q + " does not match the checkpoint, which is " +
                            (own == "gguf" ? std::string("a GGUF file (its tensors keep their "
                                                         "own types: use --quantization gguf or "
                                                         "leave it out)")
                                           : "quantized with " + own + " (use --quantization " +
                                                 own + " or leave it out)"));
  if (q == "fp8") return std::optional<DType>(DType::kF8E4M3);
  if (q == "q8_0") return std::optional<DType>(DType::kQ8_0);
  return unimplemented("--quantization " + q + " needs a checkpoint quantized with " + q +
                       " (quantization_config.quant_method in config.json); this one is not "
                       "quantized. Online quantization at load: --quantization fp8 or q8_0" +
                       (q == "bitsandbytes"
                            ? std::string(" (bitsandbytes checkpoints are not supported yet)")
                            : std::string()));
}

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> out;
  for (const auto& [name, f] : registry()) out.push_back(name);
  return out;
}

Result<ModelConfig> load_model_config(const LoadOptions& o) {
  STRATA_ASSIGN_OR_RETURN(std::string format, resolve_format(o));
  if (format == "gguf" || (format == "dummy" && is_gguf_path(o.model) && file_exists(o.model))) {
    STRATA_ASSIGN_OR_RETURN(auto g, io::GgufFile::open(o.model));
    return config_from_gguf(*g, o.hf_overrides);
  }
  std::string dir = is_directory(o.model) ? o.model : o.model.substr(0, o.model.rfind('/') + 1);
  return read_hf_config(dir, o.hf_overrides);
}

namespace {

// Everything load_model() decides before building the architecture, shared with the memory
// estimates: the format, the config (an MTP module's own), the weight source and the build
// options. `log`: log the checkpoint's quantization (loading does, estimating does not).
struct PreparedLoad {
  std::string format;
  ModelConfig config;
  std::unique_ptr<WeightSource> weights;
  ModelBuildOptions build;
  const Architecture* arch = nullptr;
};

Result<PreparedLoad> prepare_load(const LoadOptions& o, bool log) {
  PreparedLoad p;
  STRATA_ASSIGN_OR_RETURN(p.format, resolve_format(o));
  const std::string& format = p.format;
  ModelConfig& config = p.config;
  std::unique_ptr<WeightSource>& weights = p.weights;
  std::shared_ptr<io::GgufFile> gguf;
  if (format == "gguf" || (format == "dummy" && is_gguf_path(o.model) && file_exists(o.model))) {
    STRATA_ASSIGN_OR_RETURN(auto g, io::GgufFile::open(o.model));
    gguf = std::move(g);
    STRATA_ASSIGN_OR_RETURN(config, config_from_gguf(*gguf, o.hf_overrides));
  } else {
    STRATA_ASSIGN_OR_RETURN(config, load_model_config(o));
  }
  auto it = registry().find(config.architecture);
  if (it == registry().end())
    return unimplemented("architecture '" + config.architecture +
                         "' is not supported (supported: " + join(supported_architectures(), ", ") +
                         ")");
  p.arch = &it->second;
  STRATA_ASSIGN_OR_RETURN(std::optional<DType> storage, resolve_dtype(o.dtype, config, format));
  STRATA_ASSIGN_OR_RETURN(std::optional<DType> layer_storage,
                          resolve_quantization(o.quantization, config, format));
  if (format == "dummy") {
    weights = make_dummy_source(o.seed, storage.value_or(DType::kBF16), config.initializer_range);
    if (dummy_int_quant(config))
      weights = make_int_quant_dummy_source(std::move(weights), *config.int_quant, o.seed,
                                            config.initializer_range);
  } else if (format == "gguf") {
    weights = make_gguf_source(gguf);
  } else {
    STRATA_ASSIGN_OR_RETURN(weights, open_safetensors_source(o.model));
    if (config.int_quant) {
      weights->set_int_quant(config.int_quant);
      if (log) {
        STRATA_LOG(INFO) << config.int_quant->method << " checkpoint: " << config.int_quant->bits
                         << "-bit weights in groups of "
                         << (config.int_quant->group_size < 0
                                 ? std::string("a whole row")
                                 : std::to_string(config.int_quant->group_size))
                         << (config.int_quant->desc_act ? " (act-order)" : "")
                         << ", run on the integer kernels";
        if (config.int_quant->activations_quantized)
          STRATA_LOG(INFO) << "compressed-tensors scheme also quantizes input activations: "
                              "Strata runs it weight-only, activations stay float";
      }
    }
  }
  ModelBuildOptions& build = p.build;
  if (o.mtp_module) {
    if (format == "gguf")
      return unimplemented(
          "multi-token-prediction layers of GGUF files are not supported: give "
          "the safetensors checkpoint");
    const int64_t layer = config.num_hidden_layers;
    STRATA_ASSIGN_OR_RETURN(config, mtp_config(config, o.model));
    weights = std::make_unique<MtpWeightSource>(std::move(weights), layer);
    build.mtp_module = true;
  }
  build.storage = storage;
  build.layer_storage = layer_storage;
  build.keep_in_place = format != "dummy";
  build.limits = o.limits;
  build.pool = o.pool;
  build.allocator = o.allocator;
  build.parallel = o.parallel;
  build.seed = o.seed;
  return p;
}

}  // namespace

Result<LoadedModel> load_model(const LoadOptions& o) {
  if (o.pool == nullptr) return invalid_argument("load_model needs a thread pool");
  Stopwatch sw;
  STRATA_ASSIGN_OR_RETURN(PreparedLoad p, prepare_load(o, /*log=*/true));
  auto model = p.arch->create(p.config, std::move(p.weights), p.build);
  if (!model.ok()) return model.status();
  LoadedModel out;
  out.model = std::move(model).value();
  out.format = p.format;
  out.load_seconds = sw.elapsed();
  return out;
}

Result<ModelMemoryEstimate> estimate_model_memory(const LoadOptions& o, int threads) {
  if (threads < 1) return invalid_argument("a memory estimate needs at least one compute thread");
  STRATA_ASSIGN_OR_RETURN(PreparedLoad p, prepare_load(o, /*log=*/false));
  return p.arch->estimate(p.config, *p.weights, p.build, threads);
}

Result<WeightBytesByClass> estimate_weight_bytes(const LoadOptions& o) {
  STRATA_ASSIGN_OR_RETURN(ModelMemoryEstimate e, estimate_model_memory(o, 1));
  return std::move(e.weights);
}

Result<int64_t> estimate_workspace_bytes(const LoadOptions& o, int threads) {
  STRATA_ASSIGN_OR_RETURN(ModelMemoryEstimate e, estimate_model_memory(o, threads));
  return e.workspace_bytes;
}

}  // namespace strata
