#include "model/deepseek.h"

#include <cstring>

#include "core/check.h"
#include "model/deepseek_mla.h"
#include "model/layers.h"
#include "model/moe.h"
#include "model/rope.h"

namespace strata {
namespace {

constexpr TensorName kEmbed{"model.embed_tokens.weight", ""};
constexpr TensorName kFinalNorm{"model.norm.weight", ""};
constexpr TensorName kLmHead{"lm_head.weight", ""};
constexpr TensorName kAttnNorm{"model.layers.{L}.input_layernorm.weight", ""};
constexpr TensorName kFfnNorm{"model.layers.{L}.post_attention_layernorm.weight", ""};

struct Layer {
  std::vector<float> attn_norm, ffn_norm;
  MlaAttention attn;
  std::optional<DenseMlp> mlp;
  std::optional<MoeBlock> moe;
};

class DeepseekModel : public Model {
 public:
  DeepseekModel(ModelConfig config, std::unique_ptr<WeightSource> weights, ThreadPool& pool)
      : Model(std::move(config)), weights_(std::move(weights)), pool_(pool) {}

  Status load(const ModelBuildOptions& opt);

  // One row per token and layer: the latent and the rotated shared key; no V.
  KvSpec kv_spec() const override {
    return {config_.num_hidden_layers, 1, mla_.cache_row(), /*has_v=*/false};
  }
  Status forward(const ForwardBatch& batch, std::span<const PagedKvLayer> kv, const KernelOps& ops,
                 float* logits) override;
  Status compute_logits(std::span<const int32_t> rows, const KernelOps& ops,
                        float* logits) override;
  int64_t weight_bytes_per_token() const override { return active_bytes_; }
  int64_t weight_bytes_total() const override { return total_bytes_; }
  double forward_flops(int64_t num_tokens, int64_t sum_context,
                       int64_t num_logit_rows) const override {
    // Attention counted in the expanded form: per head and key, q.k over qk_dim and p.v over v_dim.
    const double attention =
        2.0 * mla_.num_heads * (mla_.qk_dim() + mla_.v_dim) * static_cast<double>(sum_context);
    return 2.0 * static_cast<double>(active_params_) * num_tokens +
           config_.num_hidden_layers * attention +
           2.0 * num_logit_rows * config_.vocab_size * config_.hidden_size;
  }
  int64_t parameter_count() const override { return params_; }
  int64_t workspace_bytes() const override {
    return static_cast<int64_t>(ws_.size()) + mla_ws_.bytes() + moe_ws_.bytes();
  }
  DType weight_dtype() const override { return config_.fp8 ? DType::kF8E4M3 : lm_head_.dtype(); }

 private:
  Status validate(const ForwardBatch& b, std::span<const PagedKvLayer> kv) const;
  void allocate_workspace(const WorkspaceLimits& limits);

  std::unique_ptr<WeightSource> weights_;
  ThreadPool& pool_;
  MlaSpec mla_;
  std::optional<MoeSpec> moe_spec_;
  EmbeddingTable embed_;
  std::vector<float> final_norm_;
  PackedWeight lm_head_;
  std::vector<Layer> layers_;
  std::optional<RopeTable> rope_;
  WorkspaceLimits limits_;
  int64_t active_bytes_ = 0, total_bytes_ = 0, params_ = 0;
  int64_t active_params_ = 0;  // matmul weights one token reads, all layers (no LM head)
  int64_t last_num_tokens_ = 0;
  AlignedBuffer ws_;
  float *h_ = nullptr, *x_ = nullptr, *tmp_ = nullptr, *cos_ = nullptr, *sin_ = nullptr;
  float* rows_ = nullptr;
  MlaWorkspace mla_ws_;
  MoeWorkspace moe_ws_;
};

Status DeepseekModel::load(const ModelBuildOptions& opt) {
  const ModelConfig& c = config_;
  WeightSource& w = *weights_;
  const int64_t H = c.hidden_size;
  STRATA_ASSIGN_OR_RETURN(mla_, parse_mla_spec(c));
  STRATA_ASSIGN_OR_RETURN(moe_spec_, parse_moe_spec(c));
  const Fp8Quantization fp8 = c.fp8.value_or(Fp8Quantization{});
  const std::optional<DType> lin = linear_storage(c, opt.storage);
  STRATA_ASSIGN_OR_RETURN(
      embed_, EmbeddingTable::load(w, kEmbed, c.vocab_size, H, opt.storage, opt.keep_in_place));
  STRATA_ASSIGN_OR_RETURN(final_norm_, load_vector(w, kFinalNorm, H, -1, DummyInit::kOnes));
  if (c.tie_word_embeddings || !w.has(kLmHead.hf)) {
    STRATA_ASSIGN_OR_RETURN(lm_head_,
                            embed_.as_packed(matmul_storage(opt.storage, embed_.dtype())));
  } else {
    // The output head stays in the float dtype, as in DeepSeek's FP8 checkpoints.
    STRATA_ASSIGN_OR_RETURN(lm_head_,
                            load_packed(w, {{kLmHead, c.vocab_size}}, H, -1, opt.storage, fp8));
  }
  int64_t embed_params = c.vocab_size * H * (c.tie_word_embeddings ? 1 : 2);
  params_ = embed_params + H;
  layers_.resize(c.num_hidden_layers);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    Layer& L = layers_[l];
    STRATA_ASSIGN_OR_RETURN(L.attn_norm, load_vector(w, kAttnNorm, H, l, DummyInit::kOnes));
    STRATA_ASSIGN_OR_RETURN(L.ffn_norm, load_vector(w, kFfnNorm, H, l, DummyInit::kOnes));
    STRATA_ASSIGN_OR_RETURN(L.attn, MlaAttention::load(w, c, mla_, l, opt.storage));
    active_bytes_ += L.attn.bytes();
    total_bytes_ += L.attn.bytes();
    params_ += L.attn.parameters() + 2 * H;
    active_params_ += L.attn.parameters();
    if (moe_spec_ && moe_spec_->is_moe(l)) {
      STRATA_ASSIGN_OR_RETURN(MoeBlock moe, MoeBlock::load(w, *moe_spec_, c, l, opt.storage));
      active_bytes_ += moe.bytes_active();
      total_bytes_ += moe.bytes_total();
      params_ += moe.parameters();
      active_params_ += moe_active_parameters(*moe_spec_, H);
      L.moe = std::move(moe);
    } else {
      STRATA_ASSIGN_OR_RETURN(DenseMlp mlp, DenseMlp::load(w, "model.layers.{L}.mlp.", H,
                                                           c.intermediate_size, l, lin, fp8));
      active_bytes_ += mlp.bytes();
      total_bytes_ += mlp.bytes();
      params_ += mlp.parameters();
      active_params_ += mlp.parameters();
      L.mlp = std::move(mlp);
    }
    w.release_generated();
  }
  active_bytes_ += lm_head_.bytes();
  total_bytes_ += lm_head_.bytes() + embed_.bytes();
  STRATA_ASSIGN_OR_RETURN(auto rope, mla_rope_table(c, mla_));
  rope_ = std::move(rope);
  w.release_generated();
  // One allocation for the matmul weights, in the order a forward pass reads them.
  std::vector<PackedWeight*> order;
  for (Layer& L : layers_) {
    L.attn.append_weights_in_order(&order);
    if (L.moe)
      L.moe->append_weights_in_order(&order);
    else
      L.mlp->append_weights_in_order(&order);
  }
  order.push_back(&lm_head_);
  PackedWeight::place_in_order(order);
  allocate_workspace(opt.limits);
  return ok_status();
}

void DeepseekModel::allocate_workspace(const WorkspaceLimits& limits) {
  limits_ = limits;
  const int64_t T = limits.max_num_tokens, H = config_.hidden_size, half = mla_.rope / 2;
  auto round = [](int64_t n) { return (n + 15) / 16 * 16; };
  const int64_t sizes[] = {round(T * H),    round(T * H),    round(T * H),
                           round(T * half), round(T * half), round(limits.max_logit_rows * H)};
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  ws_.resize(static_cast<size_t>(total) * sizeof(float));
  float* p = ws_.as<float>();
  float** slots[] = {&h_, &x_, &tmp_, &cos_, &sin_, &rows_};
  for (int i = 0; i < 6; ++i) {
    *slots[i] = p;
    p += sizes[i];
  }
  mla_ws_.allocate(mla_, T, limits.max_seq_len, pool_.size());
  moe_ws_.allocate(moe_spec_, H, config_.intermediate_size, T);
}

Status DeepseekModel::validate(const ForwardBatch& b, std::span<const PagedKvLayer> kv) const {
  const int64_t T = b.num_tokens();
  if (T == 0) return invalid_argument("forward: empty batch");
  if (T > limits_.max_num_tokens)
    return invalid_argument("forward: " + std::to_string(T) + " tokens exceed the workspace for " +
                            std::to_string(limits_.max_num_tokens));
  if (static_cast<int64_t>(b.logits_rows.size()) > limits_.max_logit_rows)
    return invalid_argument("forward: too many logits rows");
  if (static_cast<int64_t>(kv.size()) != config_.num_hidden_layers)
    return invalid_argument("forward: KV cache has the wrong number of layers");
  for (const PagedKvLayer& l : kv)
    if (l.num_kv_heads != 1 || l.head_dim != mla_.cache_row() || l.k == nullptr)
      return invalid_argument("forward: the KV cache is not an MLA latent cache of " +
                              std::to_string(mla_.cache_row()) + " values per token");
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

Status DeepseekModel::forward(const ForwardBatch& b, std::span<const PagedKvLayer> kv,
                              const KernelOps& ops, float* logits) {
  STRATA_RETURN_IF_ERROR(validate(b, kv));
  const ModelConfig& c = config_;
  const int64_t T = b.num_tokens(), H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  ThreadPool& pool = pool_;
  embed_.lookup(b.token_ids.data(), T, h_, H, pool);
  dump("embed", h_, T, H, H);
  rope_->compute(b.positions, cos_, sin_);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const Layer& L = layers_[l];
    const std::string prefix = dump_ ? "layers." + std::to_string(l) + "." : std::string();
    ops.rms_norm(h_, H, L.attn_norm.data(), eps, T, H, x_, H, pool);
    L.attn.forward(x_, H, b, kv[l], cos_, sin_, tmp_, H, ops, pool, mla_ws_);
    if (dump_) dump(prefix + "attn_out", tmp_, T, H, H);
    add_rows(h_, H, tmp_, H, T, H, pool);
    ops.rms_norm(h_, H, L.ffn_norm.data(), eps, T, H, x_, H, pool);
    if (L.moe)
      L.moe->forward(x_, H, T, tmp_, H, ops, pool, moe_ws_);
    else
      L.mlp->forward(x_, H, T, tmp_, H, ops, pool, moe_ws_);
    if (dump_) dump(prefix + "mlp_out", tmp_, T, H, H);
    add_rows(h_, H, tmp_, H, T, H, pool);
    if (dump_) dump(prefix + "hidden", h_, T, H, H);
  }
  last_num_tokens_ = T;
  return compute_logits(b.logits_rows, ops, logits);
}

Status DeepseekModel::compute_logits(std::span<const int32_t> rows, const KernelOps& ops,
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

Result<std::unique_ptr<Model>> create_deepseek_model(const ModelConfig& config,
                                                     std::unique_ptr<WeightSource> weights,
                                                     const ModelBuildOptions& options) {
  STRATA_CHECK(options.pool != nullptr) << "create_deepseek_model needs a thread pool";
  auto m = std::make_unique<DeepseekModel>(config, std::move(weights), *options.pool);
  STRATA_RETURN_IF_ERROR(m->load(options));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace strata
