#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/json.h"
#include "model/layers.h"

namespace strata {
namespace {

template <typename T>
T get_or(const Json& c, const char* key, T fallback) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  return c[key].get<T>();
}

Status require_int(const Json& c, const char* key, int64_t* out) {
  if (!c.contains(key) || !c[key].is_number_integer())
    return invalid_argument(std::string("config.json has no integer '") + key +
                            "' (needed for the MoE layers)");
  *out = c[key].get<int64_t>();
  if (*out <= 0) return invalid_argument(std::string("config.json: '") + key + "' must be > 0");
  return ok_status();
}

Status parse_deepseek(const Json& j, const ModelConfig& c, MoeSpec* s) {
  s->family = MoeFamily::kDeepseek;
  int64_t experts, top_k;
  STRATA_RETURN_IF_ERROR(require_int(j, "n_routed_experts", &experts));
  STRATA_RETURN_IF_ERROR(require_int(j, "num_experts_per_tok", &top_k));
  STRATA_RETURN_IF_ERROR(require_int(j, "moe_intermediate_size", &s->expert_ffn));
  const int64_t shared = get_or<int64_t>(j, "n_shared_experts", 0);
  const int64_t first_dense = get_or<int64_t>(j, "first_k_dense_replace", 0);
  const int64_t freq = get_or<int64_t>(j, "moe_layer_freq", 1);
  if (shared < 0 || first_dense < 0 || freq <= 0)
    return invalid_argument(
        "config.json: n_shared_experts and first_k_dense_replace must be >= 0 and "
        "moe_layer_freq > 0");
  s->shared_ffn = shared * s->expert_ffn;
  MoeRoutingConfig& r = s->routing;
  r.num_experts = static_cast<int>(experts);
  r.top_k = static_cast<int>(top_k);
  const std::string scoring = get_or<std::string>(j, "scoring_func", "softmax");
  if (scoring == "softmax")
    r.scoring = MoeScoring::kSoftmax;
  else if (scoring == "sigmoid")
    r.scoring = MoeScoring::kSigmoid;
  else
    return unimplemented("MoE scoring_func '" + scoring + "' is not supported (softmax, sigmoid)");
  const std::string method = get_or<std::string>(j, "topk_method", "greedy");
  r.num_groups = static_cast<int>(get_or<int64_t>(j, "n_group", 1));
  r.topk_groups = static_cast<int>(get_or<int64_t>(j, "topk_group", 1));
  if (method == "greedy") {
    r.num_groups = r.topk_groups = 1;
  } else if (method == "group_limited_greedy") {
    r.group_score = MoeGroupScore::kMax;
  } else if (method == "noaux_tc") {
    r.group_score = MoeGroupScore::kTopTwoSum;
    s->correction_bias = true;
  } else {
    return unimplemented("MoE topk_method '" + method +
                         "' is not supported (greedy, group_limited_greedy, noaux_tc)");
  }
  r.normalize = get_or<bool>(j, "norm_topk_prob", false) && top_k > 1;
  r.scaling = static_cast<float>(get_or<double>(j, "routed_scaling_factor", 1.0));
  s->sparse_layer.assign(c.num_hidden_layers, false);
  for (int64_t l = first_dense; l < c.num_hidden_layers; ++l) s->sparse_layer[l] = l % freq == 0;
  return ok_status();
}

Status parse_mixtral(const Json& j, const ModelConfig& c, MoeSpec* s) {
  s->family = MoeFamily::kMixtral;
  int64_t experts, top_k;
  STRATA_RETURN_IF_ERROR(require_int(j, "num_local_experts", &experts));
  STRATA_RETURN_IF_ERROR(require_int(j, "num_experts_per_tok", &top_k));
  s->expert_ffn = c.intermediate_size;
  s->routing.num_experts = static_cast<int>(experts);
  s->routing.top_k = static_cast<int>(top_k);
  s->routing.normalize = true;  // softmax over the chosen experts' logits
  s->sparse_layer.assign(c.num_hidden_layers, true);
  return ok_status();
}

Status parse_qwen_moe(const Json& j, const ModelConfig& c, MoeSpec* s, bool qwen2) {
  s->family = qwen2 ? MoeFamily::kQwen2Moe : MoeFamily::kQwen3Moe;
  int64_t experts, top_k;
  STRATA_RETURN_IF_ERROR(require_int(j, "num_experts", &experts));
  STRATA_RETURN_IF_ERROR(require_int(j, "num_experts_per_tok", &top_k));
  STRATA_RETURN_IF_ERROR(require_int(j, "moe_intermediate_size", &s->expert_ffn));
  s->routing.num_experts = static_cast<int>(experts);
  s->routing.top_k = static_cast<int>(top_k);
  s->routing.normalize = get_or<bool>(j, "norm_topk_prob", false);
  if (qwen2) {
    s->shared_ffn = get_or<int64_t>(j, "shared_expert_intermediate_size", 0);
    if (s->shared_ffn < 0)
      return invalid_argument("config.json: shared_expert_intermediate_size must be >= 0");
    s->shared_gate = s->shared_ffn > 0;
  }
  const int64_t step = get_or<int64_t>(j, "decoder_sparse_step", 1);
  if (step <= 0) return invalid_argument("config.json: decoder_sparse_step must be > 0");
  s->sparse_layer.assign(c.num_hidden_layers, false);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) s->sparse_layer[l] = (l + 1) % step == 0;
  if (j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array())
    for (const auto& v : j["mlp_only_layers"])
      if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < c.num_hidden_layers)
        s->sparse_layer[v.get<int64_t>()] = false;
  return ok_status();
}

// y[0, n) += w * e[0, n): the combine of one expert's output into a token's row. One function for
// one process and for the ranks of a tensor-parallel group, so both round alike.
[[gnu::noinline]] void add_weighted_row(float* y, float w, const float* e, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += w * e[j];
}

Result<PackedWeight> load_one(WeightSource& src, const std::string& name, int64_t rows, int64_t k,
                              int64_t layer, std::optional<DType> storage,
                              const Fp8Quantization& fp8) {
  return load_packed(src, {{TensorName{name.c_str(), ""}, rows}}, k, layer, storage, fp8);
}

}  // namespace

Result<std::optional<MoeSpec>> parse_moe_spec(const ModelConfig& c) {
  STRATA_CHECK(c.raw != nullptr) << "model config without its config.json";
  const Json& j = *c.raw;
  const std::string& a = c.architecture;
  MoeSpec s;
  try {
    if (a == "DeepseekV2ForCausalLM" || a == "DeepseekV3ForCausalLM" ||
        a == "DeepseekV32ForCausalLM") {
      if (!j.contains("n_routed_experts") || j["n_routed_experts"].is_null())
        return std::optional<MoeSpec>();
      STRATA_RETURN_IF_ERROR(parse_deepseek(j, c, &s));
    } else if (a == "MixtralForCausalLM") {
      STRATA_RETURN_IF_ERROR(parse_mixtral(j, c, &s));
    } else if (a == "Qwen2MoeForCausalLM" || a == "Qwen3MoeForCausalLM") {
      STRATA_RETURN_IF_ERROR(parse_qwen_moe(j, c, &s, a == "Qwen2MoeForCausalLM"));
    } else {
      return std::optional<MoeSpec>();
    }
  } catch (const Json::exception& e) {
    return invalid_argument(std::string("config.json has an MoE field of the wrong type: ") +
                            e.what());
  }
  if (s.expert_ffn <= 0) return invalid_argument("config.json: the expert FFN size must be > 0");
  STRATA_RETURN_IF_ERROR(s.routing.validate().with_context("config.json"));
  return std::optional<MoeSpec>(std::move(s));
}

std::optional<DType> linear_storage(const ModelConfig& c, std::optional<DType> storage) {
  return c.fp8 ? std::optional<DType>(DType::kF8E4M3) : storage;
}

std::array<int64_t, 11> MoeWorkspace::slot_sizes(const std::optional<MoeSpec>& spec, int64_t hidden,
                                                 int64_t dense_ffn, int64_t max_tokens) {
  const int64_t T = max_tokens, H = hidden;
  int64_t ffn = dense_ffn, E = 1, K = 1;
  if (spec) {
    ffn = std::max({ffn, spec->expert_ffn, spec->shared_ffn});
    E = spec->routing.num_experts;
    K = spec->routing.top_k;
  }
  auto round = [](int64_t n) { return (n + 15) / 16 * 16; };
  // A dense model needs only gu and act.
  const int64_t moe = spec ? 1 : 0;
  return {round(moe * T * E), round(moe * T * K), round(moe * T * K), round(moe * (E + 1)),
          round(moe * T * K), round(moe * T * H), round(T * 2 * ffn), round(T * ffn),
          round(moe * T * H), round(moe * T * H), round(moe * T)};
}

int64_t MoeWorkspace::bytes_for(const std::optional<MoeSpec>& spec, int64_t hidden,
                                int64_t dense_ffn, int64_t max_tokens) {
  int64_t total = 0;
  for (int64_t s : slot_sizes(spec, hidden, dense_ffn, max_tokens)) total += s;
  return total * 4;
}

void MoeWorkspace::allocate(const std::optional<MoeSpec>& spec, int64_t hidden, int64_t dense_ffn,
                            int64_t max_tokens) {
  max_tokens_ = max_tokens;
  const std::array<int64_t, 11> sizes = slot_sizes(spec, hidden, dense_ffn, max_tokens);
  buf_.resize(static_cast<size_t>(bytes_for(spec, hidden, dense_ffn, max_tokens)));
  char* p = reinterpret_cast<char*>(buf_.data());
  void** slots[] = {reinterpret_cast<void**>(&logits),  reinterpret_cast<void**>(&ids),
                    reinterpret_cast<void**>(&weights), reinterpret_cast<void**>(&offsets),
                    reinterpret_cast<void**>(&entries), reinterpret_cast<void**>(&xe),
                    reinterpret_cast<void**>(&gu),      reinterpret_cast<void**>(&act),
                    reinterpret_cast<void**>(&eo),      reinterpret_cast<void**>(&shared),
                    reinterpret_cast<void**>(&gate1)};
  for (int i = 0; i < 11; ++i) {
    *slots[i] = p;
    p += sizes[i] * 4;
  }
}

float* MoeWorkspace::reserve_parallel(int64_t floats) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(floats, 0)) * sizeof(float);
  if (tp_buf_.size() < bytes) tp_buf_.resize(bytes);
  return tp_buf_.as<float>();
}

Result<DenseMlp> DenseMlp::load(WeightSource& src, const std::string& prefix, int64_t hidden,
                                int64_t ffn, int64_t layer, std::optional<DType> storage,
                                const Fp8Quantization& fp8, bool mixtral) {
  const std::string g = prefix + (mixtral ? "w1.weight" : "gate_proj.weight");
  const std::string u = prefix + (mixtral ? "w3.weight" : "up_proj.weight");
  const std::string d = prefix + (mixtral ? "w2.weight" : "down_proj.weight");
  DenseMlp m;
  m.ffn = ffn;
  STRATA_ASSIGN_OR_RETURN(
      m.gate_up,
      load_packed(src, {{TensorName{g.c_str(), ""}, ffn}, {TensorName{u.c_str(), ""}, ffn}}, hidden,
                  layer, storage, fp8));
  STRATA_ASSIGN_OR_RETURN(m.down, load_one(src, d, hidden, ffn, layer, storage, fp8));
  return m;
}

Result<DenseMlp> DenseMlp::load(WeightSource& src, const TensorName& gate, const TensorName& up,
                                const TensorName& down, int64_t hidden, int64_t ffn, int64_t layer,
                                std::optional<DType> storage, const Fp8Quantization& fp8) {
  DenseMlp m;
  m.ffn = ffn;
  STRATA_ASSIGN_OR_RETURN(m.gate_up,
                          load_packed(src, {{gate, ffn}, {up, ffn}}, hidden, layer, storage, fp8));
  STRATA_ASSIGN_OR_RETURN(m.down, load_packed(src, {{down, hidden}}, ffn, layer, storage, fp8));
  return m;
}

Result<std::array<WeightPlan, 2>> DenseMlp::plan(WeightSource& src, const std::string& prefix,
                                                 int64_t hidden, int64_t ffn, int64_t layer,
                                                 std::optional<DType> storage,
                                                 const Fp8Quantization& fp8, bool mixtral) {
  const std::string g = prefix + (mixtral ? "w1.weight" : "gate_proj.weight");
  const std::string u = prefix + (mixtral ? "w3.weight" : "up_proj.weight");
  const std::string d = prefix + (mixtral ? "w2.weight" : "down_proj.weight");
  std::array<WeightPlan, 2> out;
  STRATA_ASSIGN_OR_RETURN(
      out[0], plan_packed(src, {{TensorName{g.c_str(), ""}, ffn}, {TensorName{u.c_str(), ""}, ffn}},
                          hidden, layer, storage, fp8));
  STRATA_ASSIGN_OR_RETURN(
      out[1], plan_packed(src, {{TensorName{d.c_str(), ""}, hidden}}, ffn, layer, storage, fp8));
  return out;
}

Result<std::array<WeightPlan, 2>> DenseMlp::plan(WeightSource& src, const TensorName& gate,
                                                 const TensorName& up, const TensorName& down,
                                                 int64_t hidden, int64_t ffn, int64_t layer,
                                                 std::optional<DType> storage,
                                                 const Fp8Quantization& fp8) {
  std::array<WeightPlan, 2> out;
  STRATA_ASSIGN_OR_RETURN(out[0],
                          plan_packed(src, {{gate, ffn}, {up, ffn}}, hidden, layer, storage, fp8));
  STRATA_ASSIGN_OR_RETURN(out[1], plan_packed(src, {{down, hidden}}, ffn, layer, storage, fp8));
  return out;
}

void DenseMlp::describe(const std::string& prefix, Sharding gate_up_sharding,
                        Sharding down_sharding, std::vector<LinearInfo>* out) const {
  out->push_back({prefix + "gate_up", gate_up.n(), gate_up.k(), gate_up.dtype(), gate_up_sharding,
                  gate_up.bytes()});
  out->push_back({prefix + "down", down.n(), down.k(), down.dtype(), down_sharding, down.bytes()});
}

void MoeBlock::describe(const std::string& prefix, std::vector<LinearInfo>* out) const {
  out->push_back({prefix + "router", gate_.n(), gate_.k(), gate_.dtype(), Sharding::kReplicated,
                  gate_.bytes()});
  for (size_t e = 0; e < experts_.size(); ++e)
    experts_[e].describe(prefix + "experts." + std::to_string(expert_begin_ + e) + ".",
                         Sharding::kExpert, Sharding::kExpert, out);
  if (!shared_gate_.empty())
    out->push_back({prefix + "shared_gate", shared_gate_.n(), shared_gate_.k(),
                    shared_gate_.dtype(), Sharding::kReplicated, shared_gate_.bytes()});
  if (shared_) shared_->describe(prefix + "shared.", Sharding::kColumn, Sharding::kRow, out);
  if (shared_split_) shared_split_->describe(prefix + "shared.", out);
}

void DenseMlp::forward(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                       const KernelOps& ops, ThreadPool& pool, MoeWorkspace& ws) const {
  ops.matmul(x, T, ldx, gate_up, ws.gu, 2 * ffn, pool);
  ops.silu_mul(ws.gu, 2 * ffn, T, ffn, ws.act, ffn, pool);
  ops.matmul(ws.act, T, ffn, down, y, ldy, pool);
}

Result<MoeBlock> MoeBlock::load(WeightSource& src, const MoeSpec& spec, const ModelConfig& c,
                                int64_t layer, std::optional<DType> storage,
                                const ModelParallel& par) {
  if (par.tp_size > 1 && par.tp == nullptr)
    return invalid_argument("MoE: tensor parallel size " + std::to_string(par.tp_size) +
                            " without its group of ranks");
  MoeBlock b;
  b.routing_ = spec.routing;
  b.hidden_ = c.hidden_size;
  const int64_t H = c.hidden_size, E = spec.routing.num_experts;
  const Fp8Quantization fp8 = c.fp8.value_or(Fp8Quantization{});
  const std::optional<DType> lin = linear_storage(c, storage);
  const bool mixtral = spec.family == MoeFamily::kMixtral;
  const std::string base = mixtral ? "model.layers.{L}.block_sparse_moe." : "model.layers.{L}.mlp.";
  STRATA_ASSIGN_OR_RETURN(b.gate_,
                          load_one(src, base + "gate.weight", E, H, layer, DType::kF32, fp8));
  if (spec.correction_bias) {
    const std::string name = base + "gate.e_score_correction_bias";
    STRATA_ASSIGN_OR_RETURN(
        b.bias_, load_vector(src, TensorName{name.c_str(), ""}, E, layer, DummyInit::kNormal));
  }
  // This rank's experts only (all of them for one process).
  const ShardRange mine =
      par.tp_size > 1 ? shard_range(E, par.tp_size, par.tp_rank) : ShardRange{0, E};
  b.comm_ = par.tp_size > 1 ? par.tp : nullptr;
  b.parallel_rows_ = parallel_rows_for(spec, H, par.tp_size);
  b.expert_begin_ = mine.begin;
  b.experts_.reserve(mine.size());
  for (int64_t e = mine.begin; e < mine.end; ++e) {
    const std::string prefix = base + "experts." + std::to_string(e) + ".";
    STRATA_ASSIGN_OR_RETURN(
        DenseMlp m, DenseMlp::load(src, prefix, H, spec.expert_ffn, layer, lin, fp8, mixtral));
    b.experts_.push_back(std::move(m));
    src.release_generated();
  }
  if (spec.shared_ffn > 0) {
    const std::string prefix =
        base + (spec.family == MoeFamily::kQwen2Moe ? "shared_expert." : "shared_experts.");
    if (b.comm_ != nullptr) {
      STRATA_ASSIGN_OR_RETURN(
          SplitSwiGlu m, SplitSwiGlu::load(src, c, prefix, spec.shared_ffn, layer, lin, fp8, par));
      b.shared_split_ = std::move(m);
    } else {
      STRATA_ASSIGN_OR_RETURN(DenseMlp m,
                              DenseMlp::load(src, prefix, H, spec.shared_ffn, layer, lin, fp8));
      b.shared_ = std::move(m);
    }
  }
  if (spec.shared_gate) {
    STRATA_ASSIGN_OR_RETURN(b.shared_gate_, load_one(src, base + "shared_expert_gate.weight", 1, H,
                                                     layer, DType::kF32, fp8));
  }
  return b;
}

Status MoeBlock::plan(WeightSource& src, const MoeSpec& spec, const ModelConfig& c, int64_t layer,
                      std::optional<DType> storage, WeightBytesByClass* out,
                      const ModelParallel& par) {
  // Mirrors load() above, weight for weight.
  const int64_t H = c.hidden_size, E = spec.routing.num_experts;
  const Fp8Quantization fp8 = c.fp8.value_or(Fp8Quantization{});
  const std::optional<DType> lin = linear_storage(c, storage);
  const bool mixtral = spec.family == MoeFamily::kMixtral;
  const std::string base = mixtral ? "model.layers.{L}.block_sparse_moe." : "model.layers.{L}.mlp.";
  auto add = [&](int64_t WeightBytesByClass::*cls, const WeightPlan& p) {
    out->add_matmul(cls, p.dtype, p.bytes);
  };
  const std::string gate = base + "gate.weight";
  STRATA_ASSIGN_OR_RETURN(WeightPlan g, plan_packed(src, {{TensorName{gate.c_str(), ""}, E}}, H,
                                                    layer, DType::kF32, fp8));
  add(&WeightBytesByClass::router, g);
  if (spec.correction_bias) {
    const std::string name = base + "gate.e_score_correction_bias";
    STRATA_ASSIGN_OR_RETURN(int64_t b, plan_vector(src, TensorName{name.c_str(), ""}, E, layer));
    out->other += b;
  }
  const ShardRange mine =
      par.tp_size > 1 ? shard_range(E, par.tp_size, par.tp_rank) : ShardRange{0, E};
  for (int64_t e = mine.begin; e < mine.end; ++e) {
    const std::string prefix = base + "experts." + std::to_string(e) + ".";
    STRATA_ASSIGN_OR_RETURN(
        auto m, DenseMlp::plan(src, prefix, H, spec.expert_ffn, layer, lin, fp8, mixtral));
    for (const WeightPlan& p : m) add(&WeightBytesByClass::routed_experts, p);
  }
  if (spec.shared_ffn > 0) {
    const std::string prefix =
        base + (spec.family == MoeFamily::kQwen2Moe ? "shared_expert." : "shared_experts.");
    if (par.tp_size > 1) {
      STRATA_ASSIGN_OR_RETURN(
          auto m, SplitSwiGlu::plan(src, c, prefix, spec.shared_ffn, layer, lin, fp8, par));
      for (const WeightPlan& p : m) add(&WeightBytesByClass::shared_experts, p);
    } else {
      STRATA_ASSIGN_OR_RETURN(auto m,
                              DenseMlp::plan(src, prefix, H, spec.shared_ffn, layer, lin, fp8));
      for (const WeightPlan& p : m) add(&WeightBytesByClass::shared_experts, p);
    }
  }
  if (spec.shared_gate) {
    const std::string name = base + "shared_expert_gate.weight";
    STRATA_ASSIGN_OR_RETURN(WeightPlan p, plan_packed(src, {{TensorName{name.c_str(), ""}, 1}}, H,
                                                      layer, DType::kF32, fp8));
    add(&WeightBytesByClass::shared_experts, p);
  }
  return ok_status();
}

int64_t MoeBlock::bytes_total() const {
  int64_t n = gate_.bytes() + shared_gate_.bytes() + (shared_ ? shared_->bytes() : 0) +
              (shared_split_ ? shared_split_->bytes() : 0) +
              static_cast<int64_t>(bias_.size() * sizeof(float));
  for (const auto& e : experts_) n += e.bytes();
  return n;
}

int64_t MoeBlock::bytes_active() const {
  const int64_t expert = experts_.empty() ? 0 : experts_[0].bytes();
  // Of a token's top_k experts, this rank holds local / num_experts on average (all for one
  // process).
  return gate_.bytes() + shared_gate_.bytes() + (shared_ ? shared_->bytes() : 0) +
         (shared_split_ ? shared_split_->bytes() : 0) +
         routing_.top_k * expert * local_experts() / routing_.num_experts;
}

int64_t MoeBlock::parameters() const {
  int64_t n = gate_.n() * gate_.k() + static_cast<int64_t>(bias_.size()) +
              shared_gate_.n() * shared_gate_.k() + (shared_ ? shared_->parameters() : 0) +
              (shared_split_ ? shared_split_->parameters() : 0);
  for (const auto& e : experts_) n += e.parameters();
  return n;
}

void MoeBlock::run_expert(const DenseMlp& mlp, const float* x, int64_t ldx, int64_t n, float* y,
                          int64_t ldy, const KernelOps& ops, ThreadPool& pool,
                          MoeWorkspace& ws) const {
  mlp.forward(x, ldx, n, y, ldy, ops, pool, ws);
}

Status MoeBlock::add_shared(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                            const KernelOps& ops, ThreadPool& pool, MoeWorkspace& ws) const {
  if (!shared_ && !shared_split_) return ok_status();
  const int64_t H = hidden_;
  if (shared_split_) {
    float* scratch = ws.reserve_parallel(parallel_scratch_floats(ws.max_tokens()));
    STRATA_RETURN_IF_ERROR(
        shared_split_->forward(x, ldx, T, ws.shared, H, ops, pool, ws.gu, ws.act, scratch));
  } else {
    shared_->forward(x, ldx, T, ws.shared, H, ops, pool, ws);
  }
  if (!shared_gate_.empty()) ops.matmul(x, T, ldx, shared_gate_, ws.gate1, 1, pool);
  pool.parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float g = shared_gate_.empty() ? 1.0f : 1.0f / (1.0f + std::exp(-ws.gate1[t]));
      float* yr = y + t * ldy;
      const float* sr = ws.shared + t * H;
      for (int64_t i = 0; i < H; ++i) yr[i] += g * sr[i];
    }
  });
  return ok_status();
}

void MoeBlock::append_weights_in_order(std::vector<PackedWeight*>* out) {
  out->push_back(&gate_);
  for (DenseMlp& e : experts_) e.append_weights_in_order(out);
  if (shared_ || shared_split_) out->push_back(&shared_gate_);
  if (shared_) shared_->append_weights_in_order(out);
  if (shared_split_) shared_split_->append_weights_in_order(out);
}

Status MoeBlock::forward(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                         const KernelOps& ops, ThreadPool& pool, MoeWorkspace& ws) const {
  STRATA_CHECK(T <= ws.max_tokens())
      << "MoE block of " << T << " tokens, workspace for " << ws.max_tokens();
  if (comm_ != nullptr) return forward_parallel(x, ldx, T, y, ldy, ops, pool, ws);
  const int E = routing_.num_experts, K = routing_.top_k;
  const int64_t H = hidden_;
  ops.matmul(x, T, ldx, gate_, ws.logits, E, pool);
  route_tokens(routing_, ws.logits, E, T, bias_.empty() ? nullptr : bias_.data(), ws.ids,
               ws.weights, pool);
  group_by_expert(ws.ids, T, K, E, ws.offsets, ws.entries);
  for (int64_t t = 0; t < T; ++t) std::memset(y + t * ldy, 0, H * sizeof(float));
  for (int e = 0; e < E; ++e) {
    const int32_t begin = ws.offsets[e], n = ws.offsets[e + 1] - begin;
    if (n == 0) continue;
    const int32_t* entries = ws.entries + begin;
    pool.parallel_for(n, 8, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        std::memcpy(ws.xe + i * H, x + (entries[i] / K) * ldx, H * sizeof(float));
    });
    run_expert(experts_[e], ws.xe, H, n, ws.eo, H, ops, pool, ws);
    // Each token appears once per expert: rows are independent.
    pool.parallel_for(n, 8, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        add_weighted_row(y + (entries[i] / K) * ldy, ws.weights[entries[i]], ws.eo + i * H, H);
    });
  }
  return add_shared(x, ldx, T, y, ldy, ops, pool, ws);
}

int64_t MoeBlock::parallel_rows_for(const MoeSpec& spec, int64_t hidden, int tp_size) {
  return std::max<int64_t>(spec.routing.top_k,
                           kParallelScratchBytes / ((std::max(tp_size, 1) + 1) * hidden * 4));
}

int64_t MoeBlock::parallel_scratch_floats_for(const MoeSpec& spec, int64_t hidden, int tp_size,
                                              int64_t max_tokens) {
  if (tp_size <= 1) return 0;
  // Send [rows, H], receive size() of those; never more rows than a step's entries.
  const int64_t rows =
      std::min(max_tokens * spec.routing.top_k, parallel_rows_for(spec, hidden, tp_size));
  return std::max((tp_size + 1) * rows * hidden,
                  spec.shared_ffn > 0 ? SplitSwiGlu::scratch_floats_for(spec.shared_ffn, hidden,
                                                                        tp_size, max_tokens)
                                      : 0);
}

int64_t MoeBlock::parallel_scratch_floats(int64_t max_tokens) const {
  if (comm_ == nullptr) return 0;
  const int64_t rows = std::min(max_tokens * routing_.top_k, parallel_rows_);
  return std::max((comm_->size() + 1) * rows * hidden_,
                  shared_split_ ? shared_split_->scratch_floats(max_tokens) : 0);
}

Status MoeBlock::forward_parallel(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                                  const KernelOps& ops, ThreadPool& pool, MoeWorkspace& ws) const {
  const int E = routing_.num_experts, K = routing_.top_k, size = comm_->size();
  const int64_t H = hidden_;
  // Every rank routes every token alike (the router and its inputs are replicated).
  ops.matmul(x, T, ldx, gate_, ws.logits, E, pool);
  route_tokens(routing_, ws.logits, E, T, bias_.empty() ? nullptr : bias_.data(), ws.ids,
               ws.weights, pool);
  std::vector<int> owner(E);
  std::vector<int64_t> first_expert(size + 1);
  for (int r = 0; r < size; ++r) {
    const ShardRange er = shard_range(E, size, r);
    first_expert[r] = er.begin;
    first_expert[r + 1] = er.end;
    for (int64_t e = er.begin; e < er.end; ++e) owner[e] = r;
  }
  const int me = comm_->rank();
  float* scratch = ws.reserve_parallel(parallel_scratch_floats(ws.max_tokens()));
  const int64_t cap = std::min(ws.max_tokens() * K, parallel_rows_);
  // Chunks of tokens bound the scratch (no rank gathers more than `cap` rows); a token's result
  // does not depend on its chunk.
  std::vector<int64_t> load(size);
  for (int64_t c0 = 0, c1 = 0; c0 < T; c0 = c1) {
    std::fill(load.begin(), load.end(), 0);
    for (c1 = c0; c1 < T; ++c1) {
      bool fits = true;
      for (int k = 0; k < K; ++k) {
        const int r = owner[ws.ids[c1 * K + k]];
        if (++load[r] > cap) fits = false;
      }
      if (!fits) break;  // c1 > c0: one token's K entries always fit (cap >= K)
    }
    const int64_t n_tok = c1 - c0;
    const int32_t* ids = ws.ids + c0 * K;
    const float* weights = ws.weights + c0 * K;
    group_by_expert(ids, n_tok, K, E, ws.offsets, ws.entries);
    // Rank r's outputs are the grouped entries of its experts, in order: rows
    // [offsets[first_expert[r]], offsets[first_expert[r + 1]]).
    int64_t rows = 0;
    for (int r = 0; r < size; ++r)
      rows = std::max<int64_t>(rows, ws.offsets[first_expert[r + 1]] - ws.offsets[first_expert[r]]);
    float* send = scratch;
    float* recv = scratch + rows * H;
    const int32_t base = ws.offsets[first_expert[me]];
    for (int64_t i = 0; i < local_experts(); ++i) {
      const int64_t e = expert_begin_ + i;
      const int32_t begin = ws.offsets[e], n = ws.offsets[e + 1] - begin;
      if (n == 0) continue;
      const int32_t* entries = ws.entries + begin;
      pool.parallel_for(n, 8, [&](int64_t i0, int64_t i1) {
        for (int64_t j = i0; j < i1; ++j)
          std::memcpy(ws.xe + j * H, x + (c0 + entries[j] / K) * ldx, H * sizeof(float));
      });
      run_expert(experts_[i], ws.xe, H, n, send + (begin - base) * H, H, ops, pool, ws);
    }
    if (rows > 0) STRATA_RETURN_IF_ERROR(all_gather_floats(*comm_, send, rows * H, recv));
    // The combine of forward(): per token, its experts in increasing id, the same arithmetic.
    for (int64_t t = c0; t < c0 + n_tok; ++t) std::memset(y + t * ldy, 0, H * sizeof(float));
    for (int e = 0; e < E; ++e) {
      const int32_t begin = ws.offsets[e], n = ws.offsets[e + 1] - begin;
      if (n == 0) continue;
      const int r = owner[e];
      const float* out = recv + (r * rows + begin - ws.offsets[first_expert[r]]) * H;
      const int32_t* entries = ws.entries + begin;
      pool.parallel_for(n, 8, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          add_weighted_row(y + (c0 + entries[i] / K) * ldy, weights[entries[i]], out + i * H, H);
      });
    }
  }
  return add_shared(x, ldx, T, y, ldy, ops, pool, ws);
}

void MoeBlock::forward_reference(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                                 const KernelOps& ops, ThreadPool& pool, MoeWorkspace& ws) const {
  STRATA_CHECK(comm_ == nullptr) << "forward_reference runs on one process";
  const int K = routing_.top_k;
  ops.matmul(x, T, ldx, gate_, ws.logits, routing_.num_experts, pool);
  route_tokens(routing_, ws.logits, routing_.num_experts, T, bias_.empty() ? nullptr : bias_.data(),
               ws.ids, ws.weights, pool);
  const int64_t H = hidden_;
  std::vector<double> acc(H);
  for (int64_t t = 0; t < T; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int k = 0; k < K; ++k) {
      const int e = ws.ids[t * K + k];
      run_expert(experts_[e], x + t * ldx, ldx, 1, ws.eo, H, ops, pool, ws);
      for (int64_t j = 0; j < H; ++j)
        acc[j] += static_cast<double>(ws.weights[t * K + k]) * ws.eo[j];
    }
    for (int64_t j = 0; j < H; ++j) y[t * ldy + j] = static_cast<float>(acc[j]);
  }
  STRATA_CHECK(add_shared(x, ldx, T, y, ldy, ops, pool, ws).ok());  // one process: no errors
}

}  // namespace strata
