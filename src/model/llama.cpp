#include "model/llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/check.h"
#include "model/layers.h"
#include "model/moe.h"
#include "model/rope.h"

namespace strata {
namespace {

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

struct Layer {
  std::vector<float> attn_norm, ffn_norm, q_norm, k_norm, qkv_bias;
  PackedWeight qkv, o, gate_up, down;
  std::optional<MoeBlock> moe;  // Mixtral / Qwen-MoE layers (model/moe.h) instead of gate_up/down
};

class LlamaModel : public Model {
 public:
  LlamaModel(ModelConfig config, std::unique_ptr<WeightSource> weights, ThreadPool& pool)
      : Model(std::move(config)), weights_(std::move(weights)), pool_(pool) {}

  Status load(const ModelBuildOptions& opt);

  KvSpec kv_spec() const override {
    return {config_.num_hidden_layers, config_.num_key_value_heads, config_.head_dim};
  }
  Status forward(const ForwardBatch& batch, std::span<const PagedKvLayer> kv, const KernelOps& ops,
                 float* logits) override;
  Status compute_logits(std::span<const int32_t> rows, const KernelOps& ops,
                        float* logits) override;
  int64_t weight_bytes_per_token() const override { return matmul_bytes_; }
  int64_t weight_bytes_total() const override {
    return matmul_bytes_ + other_bytes_ + inactive_expert_bytes_;
  }
  double forward_flops(int64_t num_tokens, int64_t sum_context,
                       int64_t num_logit_rows) const override {
    const ModelConfig& c = config_;
    const double attention =
        4.0 * c.num_attention_heads * c.head_dim * static_cast<double>(sum_context);
    return 2.0 * static_cast<double>(active_params_) * num_tokens +
           c.num_hidden_layers * attention + 2.0 * num_logit_rows * c.vocab_size * c.hidden_size;
  }
  int64_t parameter_count() const override { return params_; }
  int64_t workspace_bytes() const override {
    return static_cast<int64_t>(ws_.size()) + moe_ws_.bytes();
  }
  DType weight_dtype() const override { return lm_head_.dtype(); }

 private:
  Status validate(const ForwardBatch& b, std::span<const PagedKvLayer> kv) const;
  void allocate_workspace(const WorkspaceLimits& limits);

  std::unique_ptr<WeightSource> weights_;
  ThreadPool& pool_;
  EmbeddingTable embed_;
  std::vector<float> final_norm_;
  PackedWeight lm_head_;
  std::vector<Layer> layers_;
  std::optional<RopeTable> rope_;
  WorkspaceLimits limits_;
  int64_t matmul_bytes_ = 0, other_bytes_ = 0, params_ = 0;
  int64_t inactive_expert_bytes_ = 0;  // MoE: expert weights a token does not read
  int64_t active_params_ = 0;          // matmul weights one token reads, all layers (no LM head)
  std::optional<MoeSpec> moe_spec_;
  MoeWorkspace moe_ws_;
  int64_t q_dim_ = 0, kv_dim_ = 0, qkv_dim_ = 0;
  int64_t last_num_tokens_ = 0;  // tokens of the last forward (rows compute_logits may read)
  // Workspace, carved once from one buffer.
  AlignedBuffer ws_;
  float *h_ = nullptr, *x_ = nullptr, *qkv_ = nullptr, *attn_ = nullptr, *tmp_ = nullptr;
  float *gu_ = nullptr, *act_ = nullptr, *cos_ = nullptr, *sin_ = nullptr, *rows_ = nullptr;
  float* scratch_ = nullptr;
  int64_t scratch_per_thread_ = 0;
};

Status LlamaModel::load(const ModelBuildOptions& opt) {
  const ModelConfig& c = config_;
  WeightSource& w = *weights_;
  const int64_t H = c.hidden_size, F = c.intermediate_size, hd = c.head_dim;
  STRATA_ASSIGN_OR_RETURN(moe_spec_, parse_moe_spec(c));
  q_dim_ = c.num_attention_heads * hd;
  kv_dim_ = c.num_key_value_heads * hd;
  qkv_dim_ = q_dim_ + 2 * kv_dim_;
  STRATA_ASSIGN_OR_RETURN(
      embed_, EmbeddingTable::load(w, kEmbed, c.vocab_size, H, opt.storage, opt.keep_in_place));
  STRATA_ASSIGN_OR_RETURN(final_norm_, load_vector(w, kFinalNorm, H, -1, DummyInit::kOnes));
  std::string lm_name = tensor_name(kLmHead, w.naming());
  if (c.tie_word_embeddings || !w.has(lm_name)) {
    STRATA_ASSIGN_OR_RETURN(lm_head_,
                            embed_.as_packed(matmul_storage(opt.storage, embed_.dtype())));
  } else {
    STRATA_ASSIGN_OR_RETURN(lm_head_,
                            load_packed(w, {{kLmHead, c.vocab_size}}, H, -1, opt.storage));
  }
  layers_.resize(c.num_hidden_layers);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    Layer& L = layers_[l];
    STRATA_ASSIGN_OR_RETURN(L.attn_norm, load_vector(w, kAttnNorm, H, l, DummyInit::kOnes));
    STRATA_ASSIGN_OR_RETURN(L.ffn_norm, load_vector(w, kFfnNorm, H, l, DummyInit::kOnes));
    STRATA_ASSIGN_OR_RETURN(
        L.qkv, load_packed(w, {{kQ, q_dim_}, {kK, kv_dim_}, {kV, kv_dim_}}, H, l, opt.storage));
    STRATA_ASSIGN_OR_RETURN(L.o, load_packed(w, {{kO, H}}, q_dim_, l, opt.storage));
    if (moe_spec_ && moe_spec_->is_moe(l)) {
      STRATA_ASSIGN_OR_RETURN(MoeBlock moe, MoeBlock::load(w, *moe_spec_, c, l, opt.storage));
      matmul_bytes_ += moe.bytes_active();
      inactive_expert_bytes_ += moe.bytes_total() - moe.bytes_active();
      params_ += moe.parameters() - 3 * F * H;  // replaces the dense MLP counted below
      active_params_ += moe_active_parameters(*moe_spec_, H) - 3 * F * H;
      L.moe = std::move(moe);
    } else {
      STRATA_ASSIGN_OR_RETURN(L.gate_up, load_packed(w, {{kGate, F}, {kUp, F}}, H, l, opt.storage));
      STRATA_ASSIGN_OR_RETURN(L.down, load_packed(w, {{kDown, H}}, F, l, opt.storage));
    }
    if (c.attention_bias) {
      std::vector<float> qb, kb, vb;
      STRATA_ASSIGN_OR_RETURN(qb, load_vector(w, kQBias, q_dim_, l, DummyInit::kNormal));
      STRATA_ASSIGN_OR_RETURN(kb, load_vector(w, kKBias, kv_dim_, l, DummyInit::kNormal));
      STRATA_ASSIGN_OR_RETURN(vb, load_vector(w, kVBias, kv_dim_, l, DummyInit::kNormal));
      L.qkv_bias = qb;
      L.qkv_bias.insert(L.qkv_bias.end(), kb.begin(), kb.end());
      L.qkv_bias.insert(L.qkv_bias.end(), vb.begin(), vb.end());
    }
    if (c.qk_norm) {
      STRATA_ASSIGN_OR_RETURN(L.q_norm, load_vector(w, kQNorm, hd, l, DummyInit::kOnes));
      STRATA_ASSIGN_OR_RETURN(L.k_norm, load_vector(w, kKNorm, hd, l, DummyInit::kOnes));
    }
    matmul_bytes_ += L.qkv.bytes() + L.o.bytes() + L.gate_up.bytes() + L.down.bytes();
    active_params_ += (qkv_dim_ + q_dim_) * H + 3 * F * H;
    params_ += (qkv_dim_ + q_dim_) * H + 3 * F * H + 2 * H + L.qkv_bias.size() + L.q_norm.size() +
               L.k_norm.size();
    w.release_generated();
  }
  matmul_bytes_ += lm_head_.bytes();
  other_bytes_ = embed_.bytes();
  params_ += c.vocab_size * H * (c.tie_word_embeddings ? 1 : 2) + H;
  STRATA_ASSIGN_OR_RETURN(auto rope, RopeTable::create(c));
  if (w.naming() == TensorNaming::kGguf && w.has(kRopeFreqs.gguf)) {
    STRATA_ASSIGN_OR_RETURN(auto f, w.get(kRopeFreqs.gguf, {c.rotary_dim / 2}));
    std::vector<float> factors(c.rotary_dim / 2);
    dequantize_row(f.dtype, f.data, factors.data(), c.rotary_dim / 2);
    STRATA_RETURN_IF_ERROR(rope.apply_frequency_factors(factors));
  }
  rope_ = std::move(rope);
  w.release_generated();
  // One allocation for the matmul weights, in the order a forward pass reads them.
  std::vector<PackedWeight*> order;
  for (Layer& L : layers_) {
    order.push_back(&L.qkv);
    order.push_back(&L.o);
    if (L.moe) {
      L.moe->append_weights_in_order(&order);
    } else {
      order.push_back(&L.gate_up);
      order.push_back(&L.down);
    }
  }
  order.push_back(&lm_head_);
  PackedWeight::place_in_order(order);
  allocate_workspace(opt.limits);
  return ok_status();
}

void LlamaModel::allocate_workspace(const WorkspaceLimits& limits) {
  limits_ = limits;
  const ModelConfig& c = config_;
  const int64_t T = limits.max_num_tokens, H = c.hidden_size, F = c.intermediate_size;
  const int64_t half = c.rotary_dim / 2;
  scratch_per_thread_ = attention_scratch_floats(static_cast<int>(c.num_attention_heads),
                                                 static_cast<int>(c.num_key_value_heads),
                                                 static_cast<int>(c.head_dim), limits.max_seq_len);
  scratch_per_thread_ = (scratch_per_thread_ + 15) / 16 * 16;
  auto round = [](int64_t n) { return (n + 15) / 16 * 16; };
  const int64_t sizes[] = {round(T * H),
                           round(T * H),
                           round(T * qkv_dim_),
                           round(T * q_dim_),
                           round(T * H),
                           round(T * 2 * F),
                           round(T * F),
                           round(T * half),
                           round(T * half),
                           round(limits.max_logit_rows * H),
                           scratch_per_thread_ * pool_.size()};
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  ws_.resize(static_cast<size_t>(total) * sizeof(float));
  float* p = ws_.as<float>();
  float** slots[] = {&h_, &x_, &qkv_, &attn_, &tmp_, &gu_, &act_, &cos_, &sin_, &rows_, &scratch_};
  for (int i = 0; i < 11; ++i) {
    *slots[i] = p;
    p += sizes[i];
  }
  if (moe_spec_) moe_ws_.allocate(moe_spec_, H, F, T);
}

Status LlamaModel::validate(const ForwardBatch& b, std::span<const PagedKvLayer> kv) const {
  const int64_t T = b.num_tokens();
  if (T == 0) return invalid_argument("forward: empty batch");
  if (T > limits_.max_num_tokens)
    return invalid_argument("forward: " + std::to_string(T) + " tokens exceed the workspace for " +
                            std::to_string(limits_.max_num_tokens));
  if (static_cast<int64_t>(b.logits_rows.size()) > limits_.max_logit_rows)
    return invalid_argument("forward: too many logits rows");
  if (static_cast<int64_t>(kv.size()) != config_.num_hidden_layers)
    return invalid_argument("forward: KV cache has the wrong number of layers");
  if (b.positions.size() != b.token_ids.size() || b.slot_mapping.size() != b.token_ids.size() ||
      b.query_start.size() != b.seq_lens.size() + 1 || b.query_start.back() != T)
    return invalid_argument("forward: inconsistent batch shapes");
  for (int32_t id : b.token_ids)
    if (id < 0 || id >= config_.vocab_size)
      return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary (" +
                              std::to_string(config_.vocab_size) + ")");
  for (int s = 0; s < b.num_seqs(); ++s) {
    if (b.seq_lens[s] > limits_.max_seq_len)
      return invalid_argument("forward: sequence longer than max_seq_len");
    if (b.seq_lens[s] < b.query_start[s + 1] - b.query_start[s])
      return invalid_argument("forward: sequence shorter than its query");
  }
  for (int32_t r : b.logits_rows)
    if (r < 0 || r >= T) return invalid_argument("forward: logits row out of range");
  return ok_status();
}

Status LlamaModel::forward(const ForwardBatch& b, std::span<const PagedKvLayer> kv,
                           const KernelOps& ops, float* logits) {
  STRATA_RETURN_IF_ERROR(validate(b, kv));
  const ModelConfig& c = config_;
  const int64_t T = b.num_tokens(), H = c.hidden_size, F = c.intermediate_size;
  const int nh = static_cast<int>(c.num_attention_heads);
  const int nkv = static_cast<int>(c.num_key_value_heads);
  const int hd = static_cast<int>(c.head_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  ThreadPool& pool = pool_;

  embed_.lookup(b.token_ids.data(), T, h_, H, pool);
  dump("embed", h_, T, H, H);
  rope_->compute(b.positions, cos_, sin_);

  AttentionArgs attn;
  attn.q = qkv_;
  attn.ldq = qkv_dim_;
  attn.out = attn_;
  attn.ldo = q_dim_;
  attn.num_heads = nh;
  attn.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  attn.num_seqs = b.num_seqs();
  attn.query_start = b.query_start.data();
  attn.seq_lens = b.seq_lens.data();
  attn.block_tables = b.block_tables.data();
  attn.max_blocks_per_seq = b.max_blocks_per_seq;
  attn.scratch = scratch_;
  attn.scratch_floats_per_thread = scratch_per_thread_;

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Layer& L = layers_[l];
    const std::string prefix = dump_ ? "layers." + std::to_string(l) + "." : std::string();
    ops.rms_norm(h_, H, L.attn_norm.data(), eps, T, H, x_, H, pool);
    ops.matmul(x_, T, H, L.qkv, qkv_, qkv_dim_, pool);
    if (!L.qkv_bias.empty()) add_bias(qkv_, qkv_dim_, L.qkv_bias.data(), T, qkv_dim_);
    if (!L.q_norm.empty()) {
      pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          float* row = qkv_ + t * qkv_dim_;
          ops.rms_norm(row, hd, L.q_norm.data(), eps, nh, hd, row, hd, pool);
          ops.rms_norm(row + q_dim_, hd, L.k_norm.data(), eps, nkv, hd, row + q_dim_, hd, pool);
        }
      });
    }
    ops.rope(qkv_, T, qkv_dim_, nh, hd, static_cast<int>(c.rotary_dim), cos_, sin_, c.rope_neox);
    ops.rope(qkv_ + q_dim_, T, qkv_dim_, nkv, hd, static_cast<int>(c.rotary_dim), cos_, sin_,
             c.rope_neox);
    ops.kv_write(qkv_ + q_dim_, qkv_dim_, qkv_ + q_dim_ + kv_dim_, qkv_dim_, T,
                 b.slot_mapping.data(), kv[l]);
    attn.kv = &kv[l];
    ops.attention(attn, pool);
    ops.matmul(attn_, T, q_dim_, L.o, tmp_, H, pool);
    if (dump_) dump(prefix + "attn_out", tmp_, T, H, H);
    add_rows(h_, H, tmp_, H, T, H, pool);
    ops.rms_norm(h_, H, L.ffn_norm.data(), eps, T, H, x_, H, pool);
    if (L.moe) {
      L.moe->forward(x_, H, T, tmp_, H, ops, pool, moe_ws_);
    } else {
      ops.matmul(x_, T, H, L.gate_up, gu_, 2 * F, pool);
      ops.silu_mul(gu_, 2 * F, T, F, act_, F, pool);
      ops.matmul(act_, T, F, L.down, tmp_, H, pool);
    }
    if (dump_) dump(prefix + "mlp_out", tmp_, T, H, H);
    add_rows(h_, H, tmp_, H, T, H, pool);
    if (dump_) dump(prefix + "hidden", h_, T, H, H);
  }
  last_num_tokens_ = T;
  return compute_logits(b.logits_rows, ops, logits);
}

Status LlamaModel::compute_logits(std::span<const int32_t> rows, const KernelOps& ops,
                                  float* logits) {
  const int64_t R = static_cast<int64_t>(rows.size()), H = config_.hidden_size;
  if (R == 0) return ok_status();
  if (R > limits_.max_logit_rows)
    return invalid_argument("compute_logits: " + std::to_string(R) + " rows exceed " +
                            std::to_string(limits_.max_logit_rows));
  for (int64_t r = 0; r < R; ++r) {
    if (rows[r] < 0 || rows[r] >= last_num_tokens_)
      return invalid_argument("compute_logits: row out of range");
    std::memcpy(rows_ + r * H, h_ + int64_t{rows[r]} * H, H * sizeof(float));
  }
  ops.rms_norm(rows_, H, final_norm_.data(), static_cast<float>(config_.rms_norm_eps), R, H, rows_,
               H, pool_);
  dump("norm", rows_, R, H, H);
  ops.matmul(rows_, R, H, lm_head_, logits, config_.vocab_size, pool_);
  dump("logits", logits, R, config_.vocab_size, config_.vocab_size);
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<Model>> create_llama_model(const ModelConfig& config,
                                                  std::unique_ptr<WeightSource> weights,
                                                  const ModelBuildOptions& options) {
  STRATA_CHECK(options.pool != nullptr) << "create_llama_model needs a thread pool";
  auto m = std::make_unique<LlamaModel>(config, std::move(weights), *options.pool);
  STRATA_RETURN_IF_ERROR(m->load(options));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace strata
