#include "model/llama.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/aligned_buffer.h"
#include "core/check.h"
#include "model/decoder.h"

namespace strata {
namespace {

// The heads a tensor-parallel rank computes: its query heads [q_begin, q_end) (shard_range over
// the heads; the head count must divide evenly, as vLLM requires) and the KV heads they read
// [kv_begin, kv_end): its shard of the KV heads when the ranks divide them, else (fewer KV heads
// than ranks) the one KV head its query heads share, replicated on the ranks that use it.
struct HeadShard {
  int64_t q_begin = 0, q_end = 0, kv_begin = 0, kv_end = 0;
  int64_t q_heads() const { return q_end - q_begin; }
  int64_t kv_heads() const { return kv_end - kv_begin; }
};

Result<HeadShard> llama_heads(const ModelConfig& c, const ModelParallel& p) {
  const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const int tp = p.tp_size;
  if (nh % tp != 0)
    return invalid_argument("num_attention_heads " + std::to_string(nh) +
                            " is not divisible by --tensor-parallel-size " + std::to_string(tp));
  if (nkv % tp != 0 && tp % nkv != 0)
    return invalid_argument("num_key_value_heads " + std::to_string(nkv) +
                            " and --tensor-parallel-size " + std::to_string(tp) +
                            ": one must divide the other (KV heads are split over the ranks, or "
                            "replicated when there are fewer than ranks)");
  HeadShard h;
  const ShardRange q = shard_range(nh, tp, p.tp_rank);
  h.q_begin = q.begin;
  h.q_end = q.end;
  if (nkv % tp == 0) {
    const ShardRange kv = shard_range(nkv, tp, p.tp_rank);
    h.kv_begin = kv.begin;
    h.kv_end = kv.end;
  } else {
    h.kv_begin = q.begin / (nh / nkv);
    h.kv_end = h.kv_begin + 1;
  }
  return h;
}

// K and V of this rank's KV heads, per layer of its stage (the model's kv_spec() and its memory
// estimate).
Result<KvSpec> llama_kv_spec(const ModelConfig& c, const ModelParallel& p) {
  STRATA_ASSIGN_OR_RETURN(const HeadShard h, llama_heads(c, p));
  STRATA_ASSIGN_OR_RETURN(const ShardRange layers, DecoderModel::stage_layers(c, p));
  return KvSpec{layers.size(), h.kv_heads(), c.head_dim};
}

// One table maps our tensors to checkpoint names (HF and GGUF).
constexpr TensorName kEmbed{"model.embed_tokens.weight", "token_embd.weight"};
constexpr TensorName kFinalNorm{"model.norm.weight", "output_norm.weight"};
constexpr TensorName kLmHead{"lm_head.weight", "output.weight"};
constexpr TensorName kAttnNorm{"model.layers.{L}.input_layernorm.weight",
                               "blk.{L}.attn_norm.weight"};
constexpr TensorName kQ{"model.layers.{L}.self_attn.q_proj.weight", "blk.{L}.attn_q.weight"};
constexpr TensorName kK{"model.layers.{L}.self_attn.k_proj.weight", "blk.{L}.attn_k.weight"};
constexpr TensorName kV{"model.layers.{L}.self_attn.v_proj.weight", "blk.{L}.attn_v.weight"};
constexpr TensorName kO{"model.layers.{L}.self_attn.o_proj.weight", "blk.{L}.attn_output.weight"};
constexpr TensorName kQBias{"model.layers.{L}.self_attn.q_proj.bias", "blk.{L}.attn_q.bias"};
constexpr TensorName kKBias{"model.layers.{L}.self_attn.k_proj.bias", "blk.{L}.attn_k.bias"};
constexpr TensorName kVBias{"model.layers.{L}.self_attn.v_proj.bias", "blk.{L}.attn_v.bias"};
constexpr TensorName kQNorm{"model.layers.{L}.self_attn.q_norm.weight",
                            "blk.{L}.attn_q_norm.weight"};
constexpr TensorName kKNorm{"model.layers.{L}.self_attn.k_norm.weight",
                            "blk.{L}.attn_k_norm.weight"};
constexpr TensorName kFfnNorm{"model.layers.{L}.post_attention_layernorm.weight",
                              "blk.{L}.ffn_norm.weight"};
constexpr TensorName kGate{"model.layers.{L}.mlp.gate_proj.weight", "blk.{L}.ffn_gate.weight"};
constexpr TensorName kUp{"model.layers.{L}.mlp.up_proj.weight", "blk.{L}.ffn_up.weight"};
constexpr TensorName kDown{"model.layers.{L}.mlp.down_proj.weight", "blk.{L}.ffn_down.weight"};
constexpr TensorName kRopeFreqs{"", "rope_freqs.weight"};

constexpr DecoderNames kNames{kEmbed, kFinalNorm, kLmHead, kAttnNorm, kFfnNorm};

// The attention workspace's float slots (qkv, attention output, per-thread scratch, and with
// tensor parallelism the gathered attention output of all heads) and the scratch per thread:
// LlamaModel::allocate_attention_workspace() lays them out.
std::array<int64_t, 4> attention_slot_sizes(const ModelConfig& c, const HeadShard& h, int tp,
                                            const WorkspaceLimits& limits, int threads,
                                            int64_t* scratch_per_thread) {
  const int64_t T = limits.max_num_tokens;
  const int64_t q_dim = h.q_heads() * c.head_dim, kv_dim = h.kv_heads() * c.head_dim;
  int64_t scratch =
      attention_scratch_floats(static_cast<int>(h.q_heads()), static_cast<int>(h.kv_heads()),
                               static_cast<int>(c.head_dim), limits.max_seq_len);
  scratch = (scratch + 15) / 16 * 16;
  if (scratch_per_thread != nullptr) *scratch_per_thread = scratch;
  auto round = [](int64_t n) { return (n + 15) / 16 * 16; };
  return {round(T * (q_dim + 2 * kv_dim)), round(T * q_dim), scratch * threads,
          tp > 1 ? round(T * c.num_attention_heads * c.head_dim) : 0};
}

// Grouped-query attention with fused QKV, optional q/k/v biases (Qwen2) and per-head q/k norms
// (Qwen3), on the skeleton of model/decoder.h.
struct Attention {
  std::vector<float> q_norm, k_norm, qkv_bias;
  PackedWeight qkv, o;
};

class LlamaModel : public DecoderModel {
 public:
  LlamaModel(ModelConfig config, std::unique_ptr<WeightSource> weights, ThreadPool& pool)
      : DecoderModel(std::move(config), std::move(weights), pool) {}

  Status load(const ModelBuildOptions& opt) {
    const ModelConfig& c = config_;
    STRATA_ASSIGN_OR_RETURN(heads_, llama_heads(c, opt.parallel));
    tp_ = opt.parallel.tp_size;
    q_dim_ = heads_.q_heads() * c.head_dim;
    kv_dim_ = heads_.kv_heads() * c.head_dim;
    qkv_dim_ = q_dim_ + 2 * kv_dim_;
    full_q_dim_ = c.num_attention_heads * c.head_dim;
    attn_.resize(c.num_hidden_layers);  // indexed by the checkpoint's layer; this stage's filled
    return DecoderModel::load(kNames, opt, Fp8Quantization{});
  }

  KvSpec kv_spec() const override {
    return {num_local_layers(), heads_.kv_heads(), config_.head_dim};
  }
  // This rank's share: its heads, its stage's layers, its slice of the output head.
  double forward_flops(int64_t num_tokens, int64_t sum_context,
                       int64_t num_logit_rows) const override {
    const ModelConfig& c = config_;
    const double attention = 4.0 * heads_.q_heads() * c.head_dim * static_cast<double>(sum_context);
    const int64_t vocab =
        parallel().is_last_stage() ? shard_range(c.vocab_size, tp_, parallel().tp_rank).size() : 0;
    return 2.0 * static_cast<double>(active_params_) * num_tokens + num_local_layers() * attention +
           2.0 * num_logit_rows * vocab * c.hidden_size;
  }

 protected:
  Status load_attention(int64_t l, const ModelBuildOptions& opt) override;
  Result<FeedForward> load_feed_forward(int64_t l, const ModelBuildOptions& opt) override;
  Result<RopeTable> make_rope() override;
  int64_t rope_half() const override { return config_.rotary_dim / 2; }
  void append_attention_weights(int64_t l, std::vector<PackedWeight*>* out) override {
    out->push_back(&attn_[l].qkv);
    out->push_back(&attn_[l].o);
  }
  void allocate_attention_workspace(const WorkspaceLimits& limits) override;
  int64_t attention_workspace_bytes() const override { return static_cast<int64_t>(ws_.size()); }
  int64_t attention_tp_width() const override { return tp_ > 1 ? q_dim_ : 0; }
  void attention(int64_t l, const float* x, const ForwardBatch& b, const PagedKvLayer& kv,
                 const float* cos, const float* sin, float* out, const KernelOps& ops) override;

 private:
  std::vector<Attention> attn_;
  HeadShard heads_;  // this rank's heads
  int tp_ = 1;
  // This rank's widths (all heads with tensor parallelism off); full_q_dim_: all heads'.
  int64_t q_dim_ = 0, kv_dim_ = 0, qkv_dim_ = 0, full_q_dim_ = 0;
  AlignedBuffer ws_;
  float *qkv_ = nullptr, *attn_out_ = nullptr, *scratch_ = nullptr;
  float* attn_full_ = nullptr;  // [T, full_q_dim_]: every rank's heads (tensor parallelism)
  int64_t scratch_per_thread_ = 0;
};

Status LlamaModel::load_attention(int64_t l, const ModelBuildOptions& opt) {
  const ModelConfig& c = config_;
  WeightSource& w = weights();
  const int64_t H = c.hidden_size, hd = c.head_dim;
  Attention& A = attn_[l];
  // This rank's heads: rows of q, k, v (and their biases); its hidden rows of o over all heads.
  const int64_t q_all = full_q_dim_, kv_all = c.num_key_value_heads * hd;
  const int64_t qb0 = heads_.q_begin * hd, qb1 = heads_.q_end * hd;
  const int64_t kb0 = heads_.kv_begin * hd, kb1 = heads_.kv_end * hd;
  const ShardRange hr = shard_range(H, tp_, opt.parallel.tp_rank);
  STRATA_ASSIGN_OR_RETURN(
      A.qkv, load_packed(w, {{kQ, q_all, qb0, qb1}, {kK, kv_all, kb0, kb1}, {kV, kv_all, kb0, kb1}},
                         H, l, opt.layers(), config().fp8.value_or(Fp8Quantization{})));
  STRATA_ASSIGN_OR_RETURN(A.o, load_packed(w, {{kO, H, hr.begin, hr.end}}, q_all, l, opt.layers(),
                                           config().fp8.value_or(Fp8Quantization{})));
  if (c.attention_bias) {
    std::vector<float> qb, kb, vb;
    STRATA_ASSIGN_OR_RETURN(qb,
                            load_vector_range(w, kQBias, q_all, l, DummyInit::kNormal, qb0, qb1));
    STRATA_ASSIGN_OR_RETURN(kb,
                            load_vector_range(w, kKBias, kv_all, l, DummyInit::kNormal, kb0, kb1));
    STRATA_ASSIGN_OR_RETURN(vb,
                            load_vector_range(w, kVBias, kv_all, l, DummyInit::kNormal, kb0, kb1));
    A.qkv_bias = qb;
    A.qkv_bias.insert(A.qkv_bias.end(), kb.begin(), kb.end());
    A.qkv_bias.insert(A.qkv_bias.end(), vb.begin(), vb.end());
  }
  if (c.qk_norm) {
    STRATA_ASSIGN_OR_RETURN(A.q_norm, load_vector(w, kQNorm, hd, l, DummyInit::kOnes));
    STRATA_ASSIGN_OR_RETURN(A.k_norm, load_vector(w, kKNorm, hd, l, DummyInit::kOnes));
  }
  active_bytes_ += A.qkv.bytes() + A.o.bytes();
  total_bytes_ +=
      A.qkv.bytes() + A.o.bytes() +
      static_cast<int64_t>((A.qkv_bias.size() + A.q_norm.size() + A.k_norm.size()) * sizeof(float));
  const int64_t matmul_params = A.qkv.n() * A.qkv.k() + A.o.n() * A.o.k();
  active_params_ += matmul_params;
  params_ +=
      matmul_params + static_cast<int64_t>(A.qkv_bias.size() + A.q_norm.size() + A.k_norm.size());
  const std::string prefix = "layers." + std::to_string(l) + ".attn.";
  declare(prefix + "qkv", A.qkv, Sharding::kColumn);
  declare(prefix + "o", A.o, Sharding::kRow);
  return ok_status();
}

Result<DecoderModel::FeedForward> LlamaModel::load_feed_forward(int64_t l,
                                                                const ModelBuildOptions& opt) {
  const ModelConfig& c = config_;
  FeedForward f;
  if (moe_spec() && moe_spec()->is_moe(l)) {
    STRATA_ASSIGN_OR_RETURN(MoeBlock moe,
                            MoeBlock::load(weights(), *moe_spec(), c, l, opt.layers()));
    f.moe = std::move(moe);
  } else {
    return load_dense_mlp(kGate, kUp, kDown, c.intermediate_size, l, opt);
  }
  return f;
}

Result<RopeTable> LlamaModel::make_rope() {
  const ModelConfig& c = config_;
  WeightSource& w = weights();
  STRATA_ASSIGN_OR_RETURN(auto rope, RopeTable::create(c));
  if (w.naming() == TensorNaming::kGguf && w.has(kRopeFreqs.gguf)) {
    STRATA_ASSIGN_OR_RETURN(auto f, w.get(kRopeFreqs.gguf, {c.rotary_dim / 2}));
    std::vector<float> factors(c.rotary_dim / 2);
    dequantize_row(f.dtype, f.data, factors.data(), c.rotary_dim / 2);
    STRATA_RETURN_IF_ERROR(rope.apply_frequency_factors(factors));
  }
  return rope;
}

void LlamaModel::allocate_attention_workspace(const WorkspaceLimits& limits) {
  const std::array<int64_t, 4> sizes =
      attention_slot_sizes(config_, heads_, tp_, limits, pool_.size(), &scratch_per_thread_);
  ws_.resize(static_cast<size_t>(sizes[0] + sizes[1] + sizes[2] + sizes[3]) * sizeof(float));
  qkv_ = ws_.as<float>();
  attn_out_ = qkv_ + sizes[0];
  scratch_ = attn_out_ + sizes[1];
  attn_full_ = sizes[3] > 0 ? scratch_ + sizes[2] : nullptr;
}

void LlamaModel::attention(int64_t l, const float* x, const ForwardBatch& b, const PagedKvLayer& kv,
                           const float* cos, const float* sin, float* out, const KernelOps& ops) {
  const ModelConfig& c = config_;
  const Attention& A = attn_[l];
  const int64_t T = b.num_tokens(), H = c.hidden_size;
  const int nh = static_cast<int>(heads_.q_heads());
  const int nkv = static_cast<int>(heads_.kv_heads());
  const int hd = static_cast<int>(c.head_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  ThreadPool& pool = pool_;
  ops.matmul(x, T, H, A.qkv, qkv_, qkv_dim_, pool);
  if (!A.qkv_bias.empty()) add_bias(qkv_, qkv_dim_, A.qkv_bias.data(), T, qkv_dim_);
  if (!A.q_norm.empty()) {
    pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* row = qkv_ + t * qkv_dim_;
        ops.rms_norm(row, hd, A.q_norm.data(), eps, nh, hd, row, hd, pool);
        ops.rms_norm(row + q_dim_, hd, A.k_norm.data(), eps, nkv, hd, row + q_dim_, hd, pool);
      }
    });
  }
  ops.rope(qkv_, T, qkv_dim_, nh, hd, static_cast<int>(c.rotary_dim), cos, sin, c.rope_neox);
  ops.rope(qkv_ + q_dim_, T, qkv_dim_, nkv, hd, static_cast<int>(c.rotary_dim), cos, sin,
           c.rope_neox);
  ops.kv_write(qkv_ + q_dim_, qkv_dim_, qkv_ + q_dim_ + kv_dim_, qkv_dim_, T, b.slot_mapping.data(),
               kv);
  AttentionArgs args;
  args.q = qkv_;
  args.ldq = qkv_dim_;
  args.out = attn_out_;
  args.ldo = q_dim_;
  args.num_heads = nh;
  args.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  args.kv = &kv;
  args.num_seqs = b.num_seqs();
  args.query_start = b.query_start.data();
  args.seq_lens = b.seq_lens.data();
  args.block_tables = b.block_tables.data();
  args.max_blocks_per_seq = b.max_blocks_per_seq;
  args.scratch = scratch_;
  args.scratch_floats_per_thread = scratch_per_thread_;
  ops.attention(args, pool);
  if (tp_ == 1) {
    ops.matmul(attn_out_, T, q_dim_, A.o, out, H, pool);
    return;
  }
  // Every rank's heads side by side, then this rank's rows of o over all of them, gathered.
  Status st =
      gather_columns(attn_out_, q_dim_, T, c.num_attention_heads, hd, 1, attn_full_, full_q_dim_);
  const int64_t ld = tp_ld(H, 1, 1);
  if (st.ok()) {
    ops.matmul(attn_full_, T, full_q_dim_, A.o, tp_local(), ld, pool);
    st = gather_columns(tp_local(), ld, T, H, 1, 1, out, H);
  }
  if (!st.ok()) tp_status_ = std::move(st);
}

}  // namespace

Result<ModelMemoryEstimate> estimate_llama_model(const ModelConfig& c, WeightSource& w,
                                                 const ModelBuildOptions& opt, int threads) {
  // Mirrors LlamaModel::load_attention() and load_feed_forward(), weight for weight, for this
  // rank's heads and stage.
  const int64_t H = c.hidden_size, hd = c.head_dim;
  STRATA_ASSIGN_OR_RETURN(const HeadShard heads, llama_heads(c, opt.parallel));
  const int tp = opt.parallel.tp_size;
  const int64_t q_all = c.num_attention_heads * hd, kv_all = c.num_key_value_heads * hd;
  const int64_t q_dim = heads.q_heads() * hd, kv_dim = heads.kv_heads() * hd;
  const int64_t qb0 = heads.q_begin * hd, qb1 = heads.q_end * hd;
  const int64_t kb0 = heads.kv_begin * hd, kb1 = heads.kv_end * hd;
  const ShardRange hr = shard_range(H, tp, opt.parallel.tp_rank);
  const Fp8Quantization fp8 = c.fp8.value_or(Fp8Quantization{});
  DecoderModel::EstimateHooks hooks;
  hooks.attention = [&](int64_t l, WeightBytesByClass* b) -> Status {
    STRATA_ASSIGN_OR_RETURN(
        WeightPlan qkv,
        plan_packed(w, {{kQ, q_all, qb0, qb1}, {kK, kv_all, kb0, kb1}, {kV, kv_all, kb0, kb1}}, H,
                    l, opt.layers(), fp8));
    STRATA_ASSIGN_OR_RETURN(
        WeightPlan o, plan_packed(w, {{kO, H, hr.begin, hr.end}}, q_all, l, opt.layers(), fp8));
    b->add_matmul(&WeightBytesByClass::attention, qkv.dtype, qkv.bytes);
    b->add_matmul(&WeightBytesByClass::attention, o.dtype, o.bytes);
    if (c.attention_bias) {
      for (const auto& [name, n] :
           {std::pair{kQBias, q_all}, std::pair{kKBias, kv_all}, std::pair{kVBias, kv_all}}) {
        STRATA_RETURN_IF_ERROR(plan_vector(w, name, n, l).status());
      }
      b->other += (q_dim + 2 * kv_dim) * static_cast<int64_t>(sizeof(float));
    }
    if (c.qk_norm) {
      for (const TensorName& name : {kQNorm, kKNorm}) {
        STRATA_ASSIGN_OR_RETURN(int64_t bytes, plan_vector(w, name, hd, l));
        b->other += bytes;
      }
    }
    return ok_status();
  };
  hooks.dense_mlp = [&](int64_t l, WeightBytesByClass* b) -> Status {
    STRATA_ASSIGN_OR_RETURN(auto mlp, DecoderModel::plan_dense_mlp(w, c, kGate, kUp, kDown,
                                                                   c.intermediate_size, l, opt));
    for (const WeightPlan& p : mlp) b->add_matmul(&WeightBytesByClass::dense_mlp, p.dtype, p.bytes);
    return ok_status();
  };
  hooks.rope_half = c.rotary_dim / 2;
  int64_t floats = 0;
  for (int64_t n : attention_slot_sizes(c, heads, tp, opt.limits, threads, nullptr)) floats += n;
  hooks.attention_workspace_bytes = floats * static_cast<int64_t>(sizeof(float));
  hooks.attention_tp_width = tp > 1 ? q_dim : 0;
  STRATA_ASSIGN_OR_RETURN(ModelMemoryEstimate out,
                          DecoderModel::estimate(kNames, c, w, opt, Fp8Quantization{}, hooks));
  STRATA_ASSIGN_OR_RETURN(out.kv_spec, llama_kv_spec(c, opt.parallel));
  return out;
}

Result<std::unique_ptr<Model>> create_llama_model(const ModelConfig& config,
                                                  std::unique_ptr<WeightSource> weights,
                                                  const ModelBuildOptions& options) {
  STRATA_CHECK(options.pool != nullptr) << "create_llama_model needs a thread pool";
  auto m = std::make_unique<LlamaModel>(config, std::move(weights), *options.pool);
  STRATA_RETURN_IF_ERROR(m->load(options));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace strata
