#include "model/deepseek_mla.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/json.h"
#include "kernels/mla.h"
#include "model/layers.h"
#include "model/moe.h"

namespace strata {
namespace {

constexpr TensorName kQ{"model.layers.{L}.self_attn.q_proj.weight", ""};
constexpr TensorName kQA{"model.layers.{L}.self_attn.q_a_proj.weight", ""};
constexpr TensorName kQANorm{"model.layers.{L}.self_attn.q_a_layernorm.weight", ""};
constexpr TensorName kQB{"model.layers.{L}.self_attn.q_b_proj.weight", ""};
constexpr TensorName kKVA{"model.layers.{L}.self_attn.kv_a_proj_with_mqa.weight", ""};
constexpr TensorName kKVANorm{"model.layers.{L}.self_attn.kv_a_layernorm.weight", ""};
constexpr TensorName kKVB{"model.layers.{L}.self_attn.kv_b_proj.weight", ""};
constexpr TensorName kO{"model.layers.{L}.self_attn.o_proj.weight", ""};
// DeepSeek-V3.2's lightning indexer.
constexpr TensorName kIdxQ{"model.layers.{L}.self_attn.indexer.wq_b.weight", ""};
constexpr TensorName kIdxK{"model.layers.{L}.self_attn.indexer.wk.weight", ""};
constexpr TensorName kIdxNormW{"model.layers.{L}.self_attn.indexer.k_norm.weight", ""};
constexpr TensorName kIdxNormB{"model.layers.{L}.self_attn.indexer.k_norm.bias", ""};
constexpr TensorName kIdxW{"model.layers.{L}.self_attn.indexer.weights_proj.weight", ""};
constexpr float kIndexerNormEps = 1e-6f;  // the reference's LayerNorm default

// YaRN's attention scaling: 0.1 * m * ln(factor) + 1 (1 when not scaling up).
double yarn_mscale(double factor, double m) {
  return factor <= 1 ? 1.0 : 0.1 * m * std::log(factor) + 1.0;
}

Status positive_int(const Json& c, const char* key, int64_t* out) {
  if (!c.contains(key) || !c[key].is_number_integer() || c[key].get<int64_t>() <= 0)
    return invalid_argument(std::string("config.json: '") + key +
                            "' must be a positive integer for multi-head latent attention");
  *out = c[key].get<int64_t>();
  return ok_status();
}

}  // namespace

Result<MlaSpec> parse_mla_spec(const ModelConfig& c) {
  STRATA_CHECK(c.raw != nullptr) << "model config without its config.json";
  const Json& j = *c.raw;
  MlaSpec s;
  s.num_heads = c.num_attention_heads;
  STRATA_RETURN_IF_ERROR(positive_int(j, "kv_lora_rank", &s.kv_lora_rank));
  STRATA_RETURN_IF_ERROR(positive_int(j, "qk_nope_head_dim", &s.nope));
  STRATA_RETURN_IF_ERROR(positive_int(j, "qk_rope_head_dim", &s.rope));
  STRATA_RETURN_IF_ERROR(positive_int(j, "v_head_dim", &s.v_dim));
  if (j.contains("q_lora_rank") && !j["q_lora_rank"].is_null())
    STRATA_RETURN_IF_ERROR(positive_int(j, "q_lora_rank", &s.q_lora_rank));
  if (s.rope % 2 != 0)
    return invalid_argument("config.json: qk_rope_head_dim (" + std::to_string(s.rope) +
                            ") must be even");
  if (s.cache_row() > 2048)
    return unimplemented(
        "MLA cache rows above 2048 values (kv_lora_rank + qk_rope_head_dim) "
        "are not supported");
  if (c.architecture == "DeepseekV32ForCausalLM") {
    STRATA_RETURN_IF_ERROR(positive_int(j, "index_n_heads", &s.index_heads));
    STRATA_RETURN_IF_ERROR(positive_int(j, "index_head_dim", &s.index_dim));
    STRATA_RETURN_IF_ERROR(positive_int(j, "index_topk", &s.index_topk));
    if (s.q_lora_rank == 0)
      return invalid_argument(
          "config.json: DeepSeek-V3.2's indexer projects its queries from the q_lora_rank latent; "
          "q_lora_rank must be set");
    if (s.index_dim < s.rope || s.index_dim > 2048)
      return invalid_argument("config.json: index_head_dim (" + std::to_string(s.index_dim) +
                              ") must be at least qk_rope_head_dim (" + std::to_string(s.rope) +
                              ") and at most 2048");
  }
  s.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.qk_dim())));
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type == RopeScalingType::kYarn) {
    const double m_all = yarn_mscale(rs.factor, rs.mscale_all_dim);
    s.softmax_scale = static_cast<float>(s.softmax_scale * m_all * m_all);
    s.rope_magnitude = yarn_mscale(rs.factor, rs.mscale) / m_all;
  } else if (rs.type != RopeScalingType::kNone) {
    return unimplemented("DeepSeek models support rope_scaling of type yarn (or none)");
  }
  return s;
}

Result<RopeTable> mla_rope_table(const ModelConfig& c, const MlaSpec& s) {
  RopeScaling rs = c.rope_scaling;
  if (rs.type == RopeScalingType::kYarn) rs.attention_factor = s.rope_magnitude;
  return RopeTable::create(s.rope, c.rope_theta, rs, c.max_position_embeddings);
}

namespace {

int64_t mla_scratch_per_thread(const MlaSpec& s, int64_t max_seq_len) {
  int64_t n = mla_attention_scratch_floats(static_cast<int>(s.num_heads), s.cache_row(),
                                           s.kv_lora_rank, max_seq_len);
  if (s.has_indexer()) n = std::max(n, dsa_select_scratch_floats(s.index_dim, max_seq_len));
  return (n + 15) / 16 * 16;
}

}  // namespace

std::array<int64_t, 12> MlaWorkspace::slot_sizes(const MlaSpec& s, int64_t max_tok,
                                                 int64_t max_seq_len, int threads) {
  const int64_t T = max_tok, nh = s.num_heads, r = s.kv_lora_rank;
  const int64_t q_in = s.q_lora_rank > 0 ? s.q_lora_rank : nh * s.qk_dim();
  const int64_t chunk = std::min(kChunk, T);
  auto round = [](int64_t n) { return (n + 15) / 16 * 16; };
  const bool ix = s.has_indexer();
  const int64_t cap = std::min(s.index_topk, max_seq_len);
  return {round(T * (q_in + r + s.rope)),
          round(T * s.q_lora_rank),
          s.q_lora_rank > 0 ? round(T * nh * s.qk_dim()) : 0,
          round(T * r),
          round(chunk * nh * s.cache_row()),
          round(chunk * nh * r),
          round(T * nh * s.v_dim),
          mla_scratch_per_thread(s, max_seq_len) * threads,
          ix ? round(T * s.index_heads * s.index_dim) : 0,
          ix ? round(T * s.index_dim) : 0,
          ix ? round(T * s.index_heads) : 0,
          ix ? round(chunk * cap + chunk) : 0};
}

int64_t MlaWorkspace::bytes_for(const MlaSpec& s, int64_t max_tokens, int64_t max_seq_len,
                                int threads) {
  int64_t total = 0;
  for (int64_t n : slot_sizes(s, max_tokens, max_seq_len, threads)) total += n;
  return total * 4;
}

void MlaWorkspace::allocate(const MlaSpec& s, int64_t max_tok, int64_t max_seq_len, int threads) {
  max_tokens = max_tok;
  scratch_per_thread = mla_scratch_per_thread(s, max_seq_len);
  const std::array<int64_t, 12> sizes = slot_sizes(s, max_tok, max_seq_len, threads);
  buf_.resize(static_cast<size_t>(bytes_for(s, max_tok, max_seq_len, threads)));
  float* p = buf_.as<float>();
  float* sel = nullptr;
  float** slots[] = {&a, &qn, &q, &latent, &q_abs, &o_lat, &o, &scratch, &iq, &ik, &iw, &sel};
  for (int i = 0; i < 12; ++i) {
    *slots[i] = p;
    p += sizes[i];
  }
  topk_cap = s.has_indexer() ? std::min(s.index_topk, max_seq_len) : 0;
  selected = s.has_indexer() ? reinterpret_cast<int32_t*>(sel) : nullptr;
  counts = s.has_indexer() ? selected + std::min(kChunk, max_tok) * topk_cap : nullptr;
}

void MlaWorkspace::allocate_parallel(int64_t floats) {
  tp_buf_.resize(static_cast<size_t>(std::max<int64_t>(floats, 0)) * sizeof(float));
  tp = floats > 0 ? tp_buf_.as<float>() : nullptr;
  tp_floats = floats;
}

Result<MlaAttention> MlaAttention::load(WeightSource& src, const ModelConfig& c, const MlaSpec& s,
                                        int64_t layer, std::optional<DType> storage,
                                        const ModelParallel& par) {
  const int64_t H = c.hidden_size, nh = s.num_heads, r = s.kv_lora_rank, qk = s.qk_dim();
  const bool split = par.tp_size > 1;
  if (split && par.tp == nullptr)
    return invalid_argument("MLA: tensor parallel size " + std::to_string(par.tp_size) +
                            " without its group of ranks");
  if (split && nh % par.tp_size != 0)
    return invalid_argument("config.json: num_attention_heads (" + std::to_string(nh) +
                            ") is not divisible by the tensor parallel size (" +
                            std::to_string(par.tp_size) +
                            "); multi-head latent attention splits whole heads over the ranks");
  MlaAttention m;
  m.spec_ = s;
  m.full_heads_ = nh;
  m.spec_.num_heads = nh / std::max(par.tp_size, 1);
  m.head_begin_ = split ? par.tp_rank * m.spec_.num_heads : 0;
  m.comm_ = split ? par.tp : nullptr;
  m.hidden_ = c.hidden_size;
  m.eps_ = static_cast<float>(c.rms_norm_eps);
  const int64_t h0 = m.head_begin_, h1 = h0 + m.spec_.num_heads;
  const Fp8Quantization fp8 = c.fp8.value_or(Fp8Quantization{});
  const std::optional<DType> lin = linear_storage(c, storage);
  if (s.q_lora_rank > 0) {
    STRATA_ASSIGN_OR_RETURN(
        m.qkv_a_, load_packed(src, {{kQA, s.q_lora_rank}, {kKVA, r + s.rope}}, H, layer, lin, fp8));
    STRATA_ASSIGN_OR_RETURN(m.q_a_norm_,
                            load_vector(src, kQANorm, s.q_lora_rank, layer, DummyInit::kOnes));
    if (split) {
      // This rank's heads' rows (the matmul computes each row as on one process).
      STRATA_ASSIGN_OR_RETURN(RowSlice mine, load_rows(src, c, kQB, nh * qk, s.q_lora_rank, h0 * qk,
                                                       h1 * qk, layer, lin, fp8));
      m.q_b_ = std::move(mine.w);
      m.q_offset_ = mine.offset;
    } else {
      STRATA_ASSIGN_OR_RETURN(m.q_b_,
                              load_packed(src, {{kQB, nh * qk}}, s.q_lora_rank, layer, lin, fp8));
    }
  } else if (split) {
    // q_proj apart from kv_a (the fused weight packs each part on its own, so every row is the
    // same), cut to the panels covering this rank's heads.
    STRATA_ASSIGN_OR_RETURN(m.qkv_a_, load_packed(src, {{kKVA, r + s.rope}}, H, layer, lin, fp8));
    STRATA_ASSIGN_OR_RETURN(RowSlice mine,
                            load_rows(src, c, kQ, nh * qk, H, h0 * qk, h1 * qk, layer, lin, fp8));
    m.q_ = std::move(mine.w);
    m.q_offset_ = mine.offset;
  } else {
    STRATA_ASSIGN_OR_RETURN(
        m.qkv_a_, load_packed(src, {{kQ, nh * qk}, {kKVA, r + s.rope}}, H, layer, lin, fp8));
  }
  STRATA_ASSIGN_OR_RETURN(m.kv_a_norm_, load_vector(src, kKVANorm, r, layer, DummyInit::kOnes));
  if (split) {
    // This rank's panels of output rows (RowSplitLinear's split).
    const ShardRange p = row_split_panels(H, par.tp_size, par.tp_rank);
    const int64_t r0 = std::min(H, p.begin * kPanelRows), r1 = std::min(H, p.end * kPanelRows);
    STRATA_ASSIGN_OR_RETURN(RowSlice mine,
                            load_rows(src, c, kO, H, nh * s.v_dim, r0, r1, layer, lin, fp8));
    m.o_ = RowSplitLinear::from_shard(std::move(mine.w), H, par);
  } else {
    STRATA_ASSIGN_OR_RETURN(PackedWeight o,
                            load_packed(src, {{kO, H}}, nh * s.v_dim, layer, lin, fp8));
    m.o_ = RowSplitLinear::split(std::move(o), par);
  }
  if (s.has_indexer()) {
    STRATA_ASSIGN_OR_RETURN(m.idx_q_, load_packed(src, {{kIdxQ, s.index_heads * s.index_dim}},
                                                  s.q_lora_rank, layer, lin, fp8));
    STRATA_ASSIGN_OR_RETURN(m.idx_k_, load_packed(src, {{kIdxK, s.index_dim}}, H, layer, lin, fp8));
    STRATA_ASSIGN_OR_RETURN(m.idx_w_,
                            load_packed(src, {{kIdxW, s.index_heads}}, H, layer, lin, fp8));
    STRATA_ASSIGN_OR_RETURN(m.idx_norm_w_,
                            load_vector(src, kIdxNormW, s.index_dim, layer, DummyInit::kOnes));
    STRATA_ASSIGN_OR_RETURN(m.idx_norm_b_,
                            load_vector(src, kIdxNormB, s.index_dim, layer, DummyInit::kZeros));
  }
  // kv_b_proj [heads * (nope + v_dim), kv_lora_rank] (dequantised if FP8, as DeepSeek's reference
  // and vLLM do for the absorbed form), split per head into W_UK^T and W_UV.
  STRATA_ASSIGN_OR_RETURN(std::vector<float> kv_b,
                          load_matrix_f32(src, kKVB, nh * (s.nope + s.v_dim), r, layer, fp8));
  const DType dense = matmul_storage(storage, DType::kBF16);
  std::vector<float> uk_t(r * s.nope);
  for (int64_t h = h0; h < h1; ++h) {
    const float* head = kv_b.data() + h * (s.nope + s.v_dim) * r;
    for (int64_t i = 0; i < r; ++i)
      for (int64_t e = 0; e < s.nope; ++e) uk_t[i * s.nope + e] = head[e * r + i];
    STRATA_ASSIGN_OR_RETURN(PackedWeight wk,
                            PackedWeight::pack(uk_t.data(), DType::kF32, r, s.nope, dense));
    STRATA_ASSIGN_OR_RETURN(PackedWeight wv,
                            PackedWeight::pack(head + s.nope * r, DType::kF32, s.v_dim, r, dense));
    m.uk_t_.push_back(std::move(wk));
    m.uv_.push_back(std::move(wv));
  }
  return m;
}

Status MlaAttention::plan(WeightSource& src, const ModelConfig& c, const MlaSpec& s, int64_t layer,
                          std::optional<DType> storage, WeightBytesByClass* out,
                          const ModelParallel& par) {
  // Mirrors load() above, weight for weight (and its checks).
  const int64_t H = c.hidden_size, nh = s.num_heads, r = s.kv_lora_rank, qk = s.qk_dim();
  const bool split = par.tp_size > 1;
  if (split && nh % par.tp_size != 0)
    return invalid_argument("config.json: num_attention_heads (" + std::to_string(nh) +
                            ") is not divisible by the tensor parallel size (" +
                            std::to_string(par.tp_size) +
                            "); multi-head latent attention splits whole heads over the ranks");
  const int64_t local = split ? nh / par.tp_size : nh, h0 = split ? par.tp_rank * local : 0;

  const Fp8Quantization fp8 = c.fp8.value_or(Fp8Quantization{});
  const std::optional<DType> lin = linear_storage(c, storage);
  auto add = [&](const WeightPlan& p) {
    out->add_matmul(&WeightBytesByClass::attention, p.dtype, p.bytes);
  };
  if (s.q_lora_rank > 0) {
    STRATA_ASSIGN_OR_RETURN(
        WeightPlan a,
        plan_packed(src, {{kQA, s.q_lora_rank}, {kKVA, r + s.rope}}, H, layer, lin, fp8));
    add(a);
    STRATA_ASSIGN_OR_RETURN(int64_t norm, plan_vector(src, kQANorm, s.q_lora_rank, layer));
    out->other += norm;
    STRATA_ASSIGN_OR_RETURN(WeightPlan b,
                            plan_packed(src, {{kQB, nh * qk}}, s.q_lora_rank, layer, lin, fp8));
    if (split) {
      STRATA_ASSIGN_OR_RETURN(b, plan_rows(src, c, kQB, nh * qk, s.q_lora_rank, h0 * qk,
                                           (h0 + local) * qk, layer, lin, fp8));
    }
    add(b);
  } else if (split) {
    STRATA_ASSIGN_OR_RETURN(WeightPlan a,
                            plan_packed(src, {{kKVA, r + s.rope}}, H, layer, lin, fp8));
    add(a);
    STRATA_ASSIGN_OR_RETURN(WeightPlan q, plan_rows(src, c, kQ, nh * qk, H, h0 * qk,
                                                    (h0 + local) * qk, layer, lin, fp8));
    add(q);
  } else {
    STRATA_ASSIGN_OR_RETURN(
        WeightPlan a, plan_packed(src, {{kQ, nh * qk}, {kKVA, r + s.rope}}, H, layer, lin, fp8));
    add(a);
  }
  STRATA_ASSIGN_OR_RETURN(int64_t kv_norm, plan_vector(src, kKVANorm, r, layer));
  out->other += kv_norm;
  if (split) {
    const ShardRange p = row_split_panels(H, par.tp_size, par.tp_rank);
    STRATA_ASSIGN_OR_RETURN(
        WeightPlan o, plan_rows(src, c, kO, H, nh * s.v_dim, std::min(H, p.begin * kPanelRows),
                                std::min(H, p.end * kPanelRows), layer, lin, fp8));
    add(o);
  } else {
    STRATA_ASSIGN_OR_RETURN(WeightPlan o,
                            plan_packed(src, {{kO, H}}, nh * s.v_dim, layer, lin, fp8));
    add(o);
  }
  if (s.has_indexer()) {
    STRATA_ASSIGN_OR_RETURN(WeightPlan iq, plan_packed(src, {{kIdxQ, s.index_heads * s.index_dim}},
                                                       s.q_lora_rank, layer, lin, fp8));
    add(iq);
    STRATA_ASSIGN_OR_RETURN(WeightPlan ik,
                            plan_packed(src, {{kIdxK, s.index_dim}}, H, layer, lin, fp8));
    add(ik);
    STRATA_ASSIGN_OR_RETURN(WeightPlan iw,
                            plan_packed(src, {{kIdxW, s.index_heads}}, H, layer, lin, fp8));
    add(iw);
    for (const TensorName& n : {kIdxNormW, kIdxNormB}) {
      STRATA_ASSIGN_OR_RETURN(int64_t v, plan_vector(src, n, s.index_dim, layer));
      out->other += v;
    }
  }
  // kv_b_proj is read (dequantised) and split per head into W_UK^T and W_UV.
  STRATA_RETURN_IF_ERROR(plan_matrix_f32(src, kKVB, nh * (s.nope + s.v_dim), r, layer));
  const DType dense = matmul_storage(storage, DType::kBF16);
  STRATA_ASSIGN_OR_RETURN(const WeightPlan uk_t, plan_pack(r, s.nope, dense));
  STRATA_ASSIGN_OR_RETURN(const WeightPlan uv, plan_pack(s.v_dim, r, dense));
  for (int64_t h = 0; h < local; ++h) {
    add(uk_t);
    add(uv);
  }
  return ok_status();
}

void MlaAttention::describe(const std::string& prefix, std::vector<LinearInfo>* out) const {
  auto add = [&](const std::string& name, const PackedWeight& w, Sharding s) {
    if (!w.empty()) out->push_back({prefix + name, w.n(), w.k(), w.dtype(), s, w.bytes()});
  };
  add("qkv_a", qkv_a_, Sharding::kReplicated);
  add("q", q_, Sharding::kColumn);
  add("q_b", q_b_, Sharding::kColumn);
  // Global head numbers: rank r's heads follow rank r - 1's.
  for (size_t h = 0; h < uk_t_.size(); ++h)
    add("uk_t." + std::to_string(head_begin_ + h), uk_t_[h], Sharding::kColumn);
  for (size_t h = 0; h < uv_.size(); ++h)
    add("uv." + std::to_string(head_begin_ + h), uv_[h], Sharding::kColumn);
  add("o", o_.local(), Sharding::kRow);
  add("indexer.wq_b", idx_q_, Sharding::kReplicated);
  add("indexer.wk", idx_k_, Sharding::kReplicated);
  add("indexer.weights_proj", idx_w_, Sharding::kReplicated);
}

void MlaAttention::append_weights_in_order(std::vector<PackedWeight*>* out) {
  if (!q_.empty()) out->push_back(&q_);
  out->push_back(&qkv_a_);
  out->push_back(&q_b_);
  if (!idx_q_.empty()) {  // forward() runs the indexer before the attention
    out->push_back(&idx_q_);
    out->push_back(&idx_k_);
    out->push_back(&idx_w_);
  }
  for (PackedWeight& w : uk_t_) out->push_back(&w);
  for (PackedWeight& w : uv_) out->push_back(&w);
  out->push_back(&o_.local());
}

int64_t MlaAttention::bytes() const {
  int64_t n = q_.bytes() + qkv_a_.bytes() + q_b_.bytes() + o_.local().bytes() + idx_q_.bytes() +
              idx_k_.bytes() + idx_w_.bytes();
  for (size_t h = 0; h < uk_t_.size(); ++h) n += uk_t_[h].bytes() + uv_[h].bytes();
  return n;
}

int64_t MlaAttention::parameters() const {
  const MlaSpec& s = spec_;
  return q_.n() * q_.k() + qkv_a_.n() * qkv_a_.k() + q_b_.n() * q_b_.k() +
         o_.local().n() * o_.local().k() + s.num_heads * (s.nope + s.v_dim) * s.kv_lora_rank +
         s.q_lora_rank + s.kv_lora_rank + idx_q_.n() * idx_q_.k() + idx_k_.n() * idx_k_.k() +
         idx_w_.n() * idx_w_.k() + static_cast<int64_t>(idx_norm_w_.size() + idx_norm_b_.size());
}

int64_t MlaAttention::parallel_scratch_floats(int64_t T) const {
  if (comm_ == nullptr) return 0;
  MlaSpec full = spec_;
  full.num_heads = full_heads_;
  return parallel_scratch_floats_for(full, hidden_, comm_->size(), T);
}

int64_t MlaAttention::parallel_scratch_floats_for(const MlaSpec& s, int64_t hidden, int tp_size,
                                                  int64_t T) {
  if (tp_size <= 1) return 0;
  const int64_t local = s.num_heads / tp_size * s.v_dim;
  // The gathered heads' outputs, then the gather of the heads or of o's rows.
  return T * s.num_heads * s.v_dim +
         std::max(gather_columns_scratch(tp_size, T, local),
                  gather_columns_scratch(tp_size, T, row_split_max_rows(hidden, tp_size)));
}

Status MlaAttention::forward(const float* x, int64_t ldx, const ForwardBatch& b,
                             const PagedKvLayer& kv, const float* cos, const float* sin, float* out,
                             int64_t ldo, const KernelOps& ops, ThreadPool& pool,
                             MlaWorkspace& ws) const {
  const MlaSpec& s = spec_;
  const int64_t T = b.num_tokens(), nh = s.num_heads, r = s.kv_lora_rank, qk = s.qk_dim();
  const int64_t q_in = s.q_lora_rank > 0 ? s.q_lora_rank : full_heads_ * qk;
  const int64_t la = q_in + r + s.rope;
  STRATA_CHECK(T <= ws.max_tokens) << T << " tokens for an MLA workspace of " << ws.max_tokens;
  if (!q_.empty()) {
    // Tensor parallel without q_lora: this rank's q rows, then kv_a after the full q width.
    ops.matmul(x, T, ldx, q_, ws.a, la, pool);
    ops.matmul(x, T, ldx, qkv_a_, ws.a + q_in, la, pool);
  } else {
    ops.matmul(x, T, ldx, qkv_a_, ws.a, la, pool);
  }
  float* q = ws.a;
  int64_t ldq = la;
  if (s.q_lora_rank > 0) {
    ops.rms_norm(ws.a, la, q_a_norm_.data(), eps_, T, s.q_lora_rank, ws.qn, s.q_lora_rank, pool);
    ops.matmul(ws.qn, T, s.q_lora_rank, q_b_, ws.q, q_b_.n(), pool);
    q = ws.q + q_offset_;
    ldq = q_b_.n();
  } else if (!q_.empty()) {
    q = ws.a + q_offset_;
  } else {
    q = ws.a;
  }
  const int irot = static_cast<int>(s.rope);
  ops.rope(q + s.nope, T, ldq, static_cast<int>(nh), static_cast<int>(qk), irot, cos, sin, false);
  float* k_pe = ws.a + q_in + r;
  ops.rms_norm(ws.a + q_in, la, kv_a_norm_.data(), eps_, T, r, ws.latent, r, pool);
  ops.rope(k_pe, T, la, 1, irot, irot, cos, sin, false);
  mla_kv_write(ws.latent, r, k_pe, la, T, r, b.slot_mapping.data(), kv);
  if (s.has_indexer()) index(x, ldx, b, kv, cos, sin, ops, pool, ws);

  AttentionArgs args;
  args.num_heads = static_cast<int>(nh);
  args.scale = s.softmax_scale;
  args.kv = &kv;
  args.num_seqs = b.num_seqs();
  args.query_start = b.query_start.data();
  args.seq_lens = b.seq_lens.data();
  args.block_tables = b.block_tables.data();
  args.max_blocks_per_seq = b.max_blocks_per_seq;
  attend_absorbed(args, T, q, ldq, ops, pool, ws);
  if (comm_ == nullptr) return o_.forward(ws.o, T, nh * s.v_dim, out, ldo, ops, pool, nullptr);
  // Every head's output on every rank, then this rank's rows of o_proj over all of them.
  STRATA_CHECK(ws.tp_floats >= parallel_scratch_floats(T))
      << "MLA workspace without its tensor-parallel scratch for " << T << " tokens";
  const int64_t full = full_heads_ * s.v_dim;
  float* all = ws.tp;
  float* scratch = ws.tp + T * full;
  STRATA_RETURN_IF_ERROR(gather_columns(*comm_, ws.o, nh * s.v_dim, T,
                                        std::vector<int64_t>(comm_->size(), nh * s.v_dim), all,
                                        full, scratch));
  return o_.forward(all, T, full, out, ldo, ops, pool, scratch);
}

void MlaAttention::attend_absorbed(const AttentionArgs& base, int64_t T, const float* q,
                                   int64_t ldq, const KernelOps& ops, ThreadPool& pool,
                                   MlaWorkspace& ws) const {
  const MlaSpec& s = spec_;
  const int64_t nh = s.num_heads, r = s.kv_lora_rank, qk = s.qk_dim(), row = s.cache_row();
  AttentionArgs args = base;
  args.q = ws.q_abs;
  args.ldq = nh * row;
  args.out = ws.o_lat;
  args.ldo = nh * r;
  args.scratch = ws.scratch;
  args.scratch_floats_per_thread = ws.scratch_per_thread;
  for (int64_t t0 = 0; t0 < T; t0 += MlaWorkspace::kChunk) {
    const int64_t n = std::min(MlaWorkspace::kChunk, T - t0);
    const float* qc = q + t0 * ldq;
    // Per head (each head's matmul runs whole on one thread): [q_nope W_UK | q_pe].
    pool.for_each(nh, [&](int64_t h) {
      ops.matmul(qc + h * qk, n, ldq, uk_t_[h], ws.q_abs + h * row, nh * row, pool);
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(ws.q_abs + i * nh * row + h * row + r, qc + i * ldq + h * qk + s.nope,
                    s.rope * sizeof(float));
    });
    if (s.has_indexer()) {
      // DeepSeek Sparse Attention: each row's selected positions, then the attention over them.
      const PagedKvLayer keys = base.kv->aux_layer();
      AttentionArgs ia = args;
      ia.q = ws.iq + t0 * s.index_heads * s.index_dim;
      ia.ldq = s.index_heads * s.index_dim;
      ia.num_heads = static_cast<int>(s.index_heads);
      ia.kv = &keys;
      dsa_select(ops, ia, ws.iw + t0 * s.index_heads, s.index_heads, ws.topk_cap, ws.selected,
                 ws.counts, pool, t0, t0 + n);
      mla_sparse_attention(ops, args, r, ws.selected, ws.topk_cap, ws.counts, pool, t0, t0 + n);
    } else {
      mla_attention(ops, args, r, pool, t0, t0 + n);
    }
    float* oc = ws.o + t0 * nh * s.v_dim;
    pool.for_each(nh, [&](int64_t h) {
      ops.matmul(ws.o_lat + h * r, n, nh * r, uv_[h], oc + h * s.v_dim, nh * s.v_dim, pool);
    });
  }
}

void MlaAttention::index(const float* x, int64_t ldx, const ForwardBatch& b, const PagedKvLayer& kv,
                         const float* cos, const float* sin, const KernelOps& ops, ThreadPool& pool,
                         MlaWorkspace& ws) const {
  const MlaSpec& s = spec_;
  const int64_t T = b.num_tokens(), nh = s.index_heads, d = s.index_dim;
  STRATA_CHECK(kv.aux != nullptr && kv.aux_dim == d)
      << "the KV cache has no indexer keys of " << d << " values";
  ops.matmul(ws.qn, T, s.q_lora_rank, idx_q_, ws.iq, nh * d, pool);
  ops.matmul(x, T, ldx, idx_k_, ws.ik, d, pool);
  ops.matmul(x, T, ldx, idx_w_, ws.iw, nh, pool);
  // k_norm is a LayerNorm with weight and bias (per token, in a fixed order).
  pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* k = ws.ik + t * d;
      double mean = 0, var = 0;
      for (int64_t e = 0; e < d; ++e) mean += k[e];
      mean /= static_cast<double>(d);
      for (int64_t e = 0; e < d; ++e) var += (k[e] - mean) * (k[e] - mean);
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(d) + kIndexerNormEps);
      for (int64_t e = 0; e < d; ++e)
        k[e] = static_cast<float>((k[e] - mean) * inv) * idx_norm_w_[e] + idx_norm_b_[e];
    }
  });
  // The indexer's RoPE pairs dims (i, i + rope / 2) of its first `rope` dims (non-interleaved,
  // unlike the MLA heads).
  const int irot = static_cast<int>(s.rope);
  ops.rope(ws.iq, T, nh * d, static_cast<int>(nh), static_cast<int>(d), irot, cos, sin, true);
  ops.rope(ws.ik, T, d, 1, static_cast<int>(d), irot, cos, sin, true);
  const float w_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(nh) * d));
  for (int64_t i = 0; i < T * nh; ++i) ws.iw[i] *= w_scale;
  dsa_key_write(ws.ik, d, T, b.slot_mapping.data(), kv.aux_layer());
}

}  // namespace strata
