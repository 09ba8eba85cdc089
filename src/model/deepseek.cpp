#include "model/deepseek.h"

#include "core/check.h"
#include "model/deepseek_mla.h"

namespace strata {
namespace {

// One latent row per token and layer: the compressed KV and the rotated shared key; no V (the
// model's kv_spec() and its memory estimate).
// DeepSeek-V3.2 adds the indexer key of index_head_dim values per token and layer (the aux row).
// `num_layers`: the layers of this pipeline stage.
KvSpec mla_kv_spec(const ModelConfig& c, const MlaSpec& mla, int64_t num_layers) {
  return {num_layers,
          1,
          mla.cache_row(),
          /*has_v=*/false,
          /*aux_dim=*/mla.has_indexer() ? mla.index_dim : 0,
          /*latent_dim=*/mla.kv_lora_rank};
}

constexpr DecoderNames kNames{{"model.embed_tokens.weight", ""},
                              {"model.norm.weight", ""},
                              {"lm_head.weight", ""},
                              {"model.layers.{L}.input_layernorm.weight", ""},
                              {"model.layers.{L}.post_attention_layernorm.weight", ""}};

// Multi-head latent attention (model/deepseek_mla.h) on the skeleton of model/decoder.h, with
// DeepSeekMoE feed-forward layers after the first first_k_dense_replace dense ones.
class DeepseekModel : public DecoderModel {
 public:
  DeepseekModel(ModelConfig config, std::unique_ptr<WeightSource> weights, ThreadPool& pool)
      : DecoderModel(std::move(config), std::move(weights), pool) {}

  Status load(const ModelBuildOptions& opt) {
    STRATA_ASSIGN_OR_RETURN(mla_, parse_mla_spec(config_));
    attn_.resize(config_.num_hidden_layers);
    return DecoderModel::load(kNames, opt, config_.fp8.value_or(Fp8Quantization{}));
  }

  // One row per token and layer: the latent and the rotated shared key; no V.
  KvSpec kv_spec() const override { return mla_kv_spec(config_, mla_, num_local_layers()); }
  double forward_flops(int64_t num_tokens, int64_t sum_context,
                       int64_t num_logit_rows) const override {
    // Attention counted in the expanded form: per head and key, q.k over qk_dim and p.v over v_dim.
    const double attention =
        2.0 * mla_.num_heads * (mla_.qk_dim() + mla_.v_dim) * static_cast<double>(sum_context);
    // V3.2's indexer: per head and key, q.k over index_head_dim (the attention itself is
    // counted dense: an upper bound past index_topk tokens of context).
    const double indexer = mla_.has_indexer() ? 2.0 * mla_.index_heads * mla_.index_dim *
                                                    static_cast<double>(sum_context)
                                              : 0.0;
    return 2.0 * static_cast<double>(active_params_) * num_tokens +
           config_.num_hidden_layers * (attention + indexer) +
           2.0 * num_logit_rows * config_.vocab_size * config_.hidden_size;
  }

 protected:
  Status load_attention(int64_t l, const ModelBuildOptions& opt) override {
    STRATA_ASSIGN_OR_RETURN(attn_[l],
                            MlaAttention::load(weights(), config_, mla_, l, opt.layers()));
    const MlaAttention& a = *attn_[l];
    active_bytes_ += a.bytes();
    total_bytes_ += a.bytes() + a.vector_bytes();
    params_ += a.parameters();
    active_params_ += a.parameters();
    std::vector<LinearInfo> linears;
    a.describe("layers." + std::to_string(l) + ".attn.", &linears);
    declare(std::move(linears));
    return ok_status();
  }
  Result<FeedForward> load_feed_forward(int64_t l, const ModelBuildOptions& opt) override {
    const ModelConfig& c = config_;
    FeedForward f;
    if (moe_spec() && moe_spec()->is_moe(l)) {
      STRATA_ASSIGN_OR_RETURN(MoeBlock moe,
                              MoeBlock::load(weights(), *moe_spec(), c, l, opt.layers()));
      f.moe = std::move(moe);
    } else {
      STRATA_ASSIGN_OR_RETURN(
          DenseMlp mlp,
          DenseMlp::load(weights(), "model.layers.{L}.mlp.", c.hidden_size, c.intermediate_size, l,
                         linear_storage(c, opt.layers()), c.fp8.value_or(Fp8Quantization{})));
      f.mlp = std::move(mlp);
    }
    return f;
  }
  Result<RopeTable> make_rope() override { return mla_rope_table(config_, mla_); }
  int64_t rope_half() const override { return mla_.rope / 2; }
  void append_attention_weights(int64_t l, std::vector<PackedWeight*>* out) override {
    attn_[l]->append_weights_in_order(out);
  }
  void allocate_attention_workspace(const WorkspaceLimits& limits) override {
    mla_ws_.allocate(mla_, limits.max_num_tokens, limits.max_seq_len, pool_.size());
  }
  int64_t attention_workspace_bytes() const override { return mla_ws_.bytes(); }
  Status validate_kv(std::span<const PagedKvLayer> kv) const override {
    for (const PagedKvLayer& l : kv) {
      if (l.num_kv_heads != 1 || l.head_dim != mla_.cache_row() || l.k == nullptr)
        return invalid_argument("forward: the KV cache is not an MLA latent cache of " +
                                std::to_string(mla_.cache_row()) + " values per token");
      if (mla_.has_indexer() && (l.aux == nullptr || l.aux_dim != mla_.index_dim))
        return invalid_argument("forward: the KV cache has no DeepSeek-V3.2 indexer keys of " +
                                std::to_string(mla_.index_dim) + " values per token");
      if (l.ds_mla_latent != 0 && l.ds_mla_latent != mla_.kv_lora_rank)
        return invalid_argument("forward: the fp8_ds_mla KV cache quantises " +
                                std::to_string(l.ds_mla_latent) + " latent values, not " +
                                std::to_string(mla_.kv_lora_rank));
    }
    return ok_status();
  }
  void attention(int64_t l, const float* x, const ForwardBatch& b, const PagedKvLayer& kv,
                 const float* cos, const float* sin, float* out, const KernelOps& ops) override {
    const int64_t H = config_.hidden_size;
    attn_[l]->forward(x, H, b, kv, cos, sin, out, H, ops, pool_, mla_ws_);
  }

 private:
  MlaSpec mla_;
  std::vector<std::optional<MlaAttention>> attn_;
  MlaWorkspace mla_ws_;
};

}  // namespace

Result<ModelMemoryEstimate> estimate_deepseek_model(const ModelConfig& c, WeightSource& w,
                                                    const ModelBuildOptions& opt, int threads) {
  // Mirrors DeepseekModel::load_attention() and load_feed_forward(), weight for weight.
  STRATA_ASSIGN_OR_RETURN(const MlaSpec mla, parse_mla_spec(c));
  const Fp8Quantization fp8 = c.fp8.value_or(Fp8Quantization{});
  DecoderModel::EstimateHooks hooks;
  hooks.attention = [&](int64_t l, WeightBytesByClass* b) {
    return MlaAttention::plan(w, c, mla, l, opt.layers(), b);
  };
  hooks.dense_mlp = [&](int64_t l, WeightBytesByClass* b) -> Status {
    STRATA_ASSIGN_OR_RETURN(
        auto mlp, DenseMlp::plan(w, "model.layers.{L}.mlp.", c.hidden_size, c.intermediate_size, l,
                                 linear_storage(c, opt.layers()), fp8));
    for (const WeightPlan& p : mlp) b->add_matmul(&WeightBytesByClass::dense_mlp, p.dtype, p.bytes);
    return ok_status();
  };
  hooks.rope_half = mla.rope / 2;
  hooks.attention_workspace_bytes =
      MlaWorkspace::bytes_for(mla, opt.limits.max_num_tokens, opt.limits.max_seq_len, threads);
  STRATA_ASSIGN_OR_RETURN(ModelMemoryEstimate out,
                          DecoderModel::estimate(kNames, c, w, opt, fp8, hooks));
  STRATA_ASSIGN_OR_RETURN(const ShardRange stage,
                          DecoderModel::stage_layers(c, DecoderModel::module_place(opt)));
  out.kv_spec = mla_kv_spec(c, mla, stage.size());
  return out;
}

Result<std::unique_ptr<Model>> create_deepseek_model(const ModelConfig& config,
                                                     std::unique_ptr<WeightSource> weights,
                                                     const ModelBuildOptions& options) {
  STRATA_CHECK(options.pool != nullptr) << "create_deepseek_model needs a thread pool";
  auto m = std::make_unique<DeepseekModel>(config, std::move(weights), *options.pool);
  STRATA_RETURN_IF_ERROR(m->load(options));
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace strata
