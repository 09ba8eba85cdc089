#include "model/decoder.h"

#include <cstring>

#include "core/check.h"

namespace strata {

namespace {

// A tied head, or a checkpoint without one (it reuses the embedding). A head quantized in the file
// (GPTQ's lm_head: true) has no `lm_head.weight` but is the checkpoint's own.
bool head_is_embedding(const ModelConfig& c, const WeightSource& w, const DecoderNames& names) {
  const std::string head = tensor_name(names.lm_head, w.naming());
  return c.tie_word_embeddings || (!w.has(head) && int_quantized_base(w, head).empty());
}

}  // namespace

void DecoderModel::declare(const std::string& name, const PackedWeight& w, Sharding sharding) {
  if (!w.empty()) linears_.push_back({name, w.n(), w.k(), w.dtype(), sharding, w.bytes()});
}

void DecoderModel::declare(std::vector<LinearInfo> linears) {
  for (auto& l : linears) linears_.push_back(std::move(l));
}

Status DecoderModel::load(const DecoderNames& names, const ModelBuildOptions& opt,
                          const Fp8Quantization& lm_head_fp8) {
  const ModelConfig& c = config_;
  WeightSource& w = *weights_;
  const int64_t H = c.hidden_size;
  STRATA_ASSIGN_OR_RETURN(moe_spec_, parse_moe_spec(c));
  STRATA_ASSIGN_OR_RETURN(embed_, EmbeddingTable::load(w, names.embed, c.vocab_size, H, opt.storage,
                                                       opt.keep_in_place));
  STRATA_ASSIGN_OR_RETURN(final_norm_, load_vector(w, names.final_norm, H, -1, DummyInit::kOnes));
  if (head_is_embedding(c, w, names)) {
    STRATA_ASSIGN_OR_RETURN(lm_head_,
                            embed_.as_packed(matmul_storage(opt.storage, embed_.dtype())));
  } else {
    // DeepSeek's FP8 checkpoints keep the output head in the float dtype.
    STRATA_ASSIGN_OR_RETURN(
        lm_head_, load_packed(w, {{names.lm_head, c.vocab_size}}, H, -1, opt.storage, lm_head_fp8));
  }
  params_ = c.vocab_size * H * (c.tie_word_embeddings ? 1 : 2) + H;
  total_bytes_ += H * static_cast<int64_t>(sizeof(float));  // final norm
  if (opt.mtp_module) {
    MtpInput m;
    STRATA_ASSIGN_OR_RETURN(
        m.enorm, load_vector(w, {"model.layers.{L}.enorm.weight", ""}, H, 0, DummyInit::kOnes));
    STRATA_ASSIGN_OR_RETURN(
        m.hnorm, load_vector(w, {"model.layers.{L}.hnorm.weight", ""}, H, 0, DummyInit::kOnes));
    STRATA_ASSIGN_OR_RETURN(m.eh_proj,
                            load_packed(w, {{{"model.layers.{L}.eh_proj.weight", ""}, H}}, 2 * H, 0,
                                        opt.layers(), c.fp8.value_or(Fp8Quantization{})));
    params_ += 2 * H + 2 * H * H;
    active_params_ += 2 * H * H;
    active_bytes_ += m.eh_proj.bytes();
    total_bytes_ += m.eh_proj.bytes() + 2 * H * static_cast<int64_t>(sizeof(float));
    declare("mtp.eh_proj", m.eh_proj, Sharding::kReplicated);
    mtp_ = std::move(m);
  }
  const int64_t L = c.num_hidden_layers;
  attn_norm_.resize(L);
  ffn_norm_.resize(L);
  ffn_.resize(L);
  for (int64_t l = 0; l < L; ++l) {
    STRATA_ASSIGN_OR_RETURN(attn_norm_[l], load_vector(w, names.attn_norm, H, l, DummyInit::kOnes));
    STRATA_ASSIGN_OR_RETURN(ffn_norm_[l], load_vector(w, names.ffn_norm, H, l, DummyInit::kOnes));
    params_ += 2 * H;
    total_bytes_ += 2 * H * static_cast<int64_t>(sizeof(float));
    STRATA_RETURN_IF_ERROR(load_attention(l, opt));
    STRATA_ASSIGN_OR_RETURN(ffn_[l], load_feed_forward(l, opt));
    FeedForward& f = ffn_[l];
    const std::string prefix = "layers." + std::to_string(l) + ".";
    std::vector<LinearInfo> linears;
    if (f.moe) {
      active_bytes_ += f.moe->bytes_active();
      total_bytes_ += f.moe->bytes_total();
      params_ += f.moe->parameters();
      active_params_ += moe_active_parameters(*moe_spec_, H);
      f.moe->describe(prefix + "moe.", &linears);
    } else {
      STRATA_CHECK(f.mlp.has_value()) << "layer " << l << " has no feed-forward";
      active_bytes_ += f.mlp->bytes();
      total_bytes_ += f.mlp->bytes();
      params_ += f.mlp->parameters();
      active_params_ += f.mlp->parameters();
      f.mlp->describe(prefix + "mlp.", Sharding::kColumn, Sharding::kRow, &linears);
    }
    declare(std::move(linears));
    w.release_generated();
  }
  active_bytes_ += lm_head_.bytes();
  total_bytes_ += lm_head_.bytes() + embed_.bytes();
  declare("lm_head", lm_head_, Sharding::kVocab);
  STRATA_ASSIGN_OR_RETURN(auto rope, make_rope());
  rope_ = std::move(rope);
  w.release_generated();
  // One allocation for the matmul weights, in the order a forward pass reads them.
  std::vector<PackedWeight*> order;
  if (mtp_) order.push_back(&mtp_->eh_proj);
  for (int64_t l = 0; l < L; ++l) {
    append_attention_weights(l, &order);
    if (ffn_[l].moe)
      ffn_[l].moe->append_weights_in_order(&order);
    else
      ffn_[l].mlp->append_weights_in_order(&order);
  }
  order.push_back(&lm_head_);
  STRATA_RETURN_IF_ERROR(
      PackedWeight::place_in_order(order, opt.allocator ? *opt.allocator : host_allocator()));
  allocate_workspace(opt.limits);
  return ok_status();
}

Result<ModelMemoryEstimate> DecoderModel::estimate(const DecoderNames& names, const ModelConfig& c,
                                                   WeightSource& w, const ModelBuildOptions& opt,
                                                   const Fp8Quantization& lm_head_fp8,
                                                   const EstimateHooks& hooks) {
  // Mirrors load() above, weight for weight.
  ModelMemoryEstimate out;
  WeightBytesByClass& b = out.weights;
  const int64_t H = c.hidden_size;
  STRATA_ASSIGN_OR_RETURN(std::optional<MoeSpec> moe, parse_moe_spec(c));
  STRATA_ASSIGN_OR_RETURN(io::TensorRef embed,
                          w.peek(tensor_name(names.embed, w.naming()), {c.vocab_size, H}));
  STRATA_ASSIGN_OR_RETURN(const DType embed_dtype,
                          EmbeddingTable::storage_for(embed, H, opt.storage));
  b.embedding = dtype_bytes(embed_dtype, c.vocab_size * H);
  STRATA_ASSIGN_OR_RETURN(int64_t final_norm, plan_vector(w, names.final_norm, H, -1));
  b.other += final_norm;
  WeightPlan head;
  if (head_is_embedding(c, w, names)) {
    STRATA_ASSIGN_OR_RETURN(head,
                            plan_pack(c.vocab_size, H, matmul_storage(opt.storage, embed_dtype)));
  } else {
    STRATA_ASSIGN_OR_RETURN(
        head, plan_packed(w, {{names.lm_head, c.vocab_size}}, H, -1, opt.storage, lm_head_fp8));
  }
  if (opt.mtp_module) {
    for (const char* norm : {"model.layers.{L}.enorm.weight", "model.layers.{L}.hnorm.weight"}) {
      STRATA_ASSIGN_OR_RETURN(int64_t n, plan_vector(w, {norm, ""}, H, 0));
      b.other += n;
    }
    STRATA_ASSIGN_OR_RETURN(WeightPlan eh,
                            plan_packed(w, {{{"model.layers.{L}.eh_proj.weight", ""}, H}}, 2 * H, 0,
                                        opt.layers(), c.fp8.value_or(Fp8Quantization{})));
    b.add_matmul(&WeightBytesByClass::other, eh.dtype, eh.bytes);
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    STRATA_ASSIGN_OR_RETURN(int64_t attn_norm, plan_vector(w, names.attn_norm, H, l));
    STRATA_ASSIGN_OR_RETURN(int64_t ffn_norm, plan_vector(w, names.ffn_norm, H, l));
    b.other += attn_norm + ffn_norm;
    STRATA_RETURN_IF_ERROR(hooks.attention(l, &b));
    if (moe && moe->is_moe(l)) {
      STRATA_RETURN_IF_ERROR(MoeBlock::plan(w, *moe, c, l, opt.layers(), &b));
    } else {
      STRATA_RETURN_IF_ERROR(hooks.dense_mlp(l, &b));
    }
  }
  b.add_matmul(&WeightBytesByClass::lm_head, head.dtype, head.bytes);
  b.weight_dtype = c.fp8 ? DType::kF8E4M3 : head.dtype;  // as weight_dtype() reports it
  out.workspace_bytes = workspace_bytes_for(c, moe, hooks.rope_half, opt.mtp_module, opt.limits) +
                        hooks.attention_workspace_bytes;
  return out;
}

std::array<int64_t, 6> DecoderModel::workspace_slot_sizes(int64_t H, int64_t half,
                                                          const WorkspaceLimits& limits) {
  const int64_t T = limits.max_num_tokens;
  auto round = [](int64_t n) { return (n + 15) / 16 * 16; };
  return {round(T * H),    round(T * H),    round(T * H),
          round(T * half), round(T * half), round(limits.max_logit_rows * H)};
}

int64_t DecoderModel::workspace_bytes_for(const ModelConfig& c, const std::optional<MoeSpec>& moe,
                                          int64_t rope_half, bool mtp_module,
                                          const WorkspaceLimits& limits) {
  const int64_t T = limits.max_num_tokens, H = c.hidden_size;
  int64_t floats = 0;
  for (int64_t s : workspace_slot_sizes(H, rope_half, limits)) floats += s;
  return floats * static_cast<int64_t>(sizeof(float)) +
         MoeWorkspace::bytes_for(moe, H, c.intermediate_size, T) +
         (mtp_module ? T * 2 * H * static_cast<int64_t>(sizeof(float)) : 0);
}

void DecoderModel::allocate_workspace(const WorkspaceLimits& limits) {
  limits_ = limits;
  const int64_t T = limits.max_num_tokens, H = config_.hidden_size;
  const std::array<int64_t, 6> sizes = workspace_slot_sizes(H, rope_half(), limits);
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  ws_.resize(static_cast<size_t>(total) * sizeof(float));
  float* p = ws_.as<float>();
  float** slots[] = {&h_, &x_, &tmp_, &cos_, &sin_, &rows_};
  for (int i = 0; i < 6; ++i) {
    *slots[i] = p;
    p += sizes[i];
  }
  ffn_ws_.allocate(moe_spec_, H, config_.intermediate_size, T);
  if (mtp_) mtp_ws_.resize(static_cast<size_t>(T * 2 * H) * sizeof(float));
  allocate_attention_workspace(limits);
}

Status DecoderModel::validate(const ForwardBatch& b, std::span<const PagedKvLayer> kv) const {
  const int64_t T = b.num_tokens();
  if (T == 0) return invalid_argument("forward: empty batch");
  if (T > limits_.max_num_tokens)
    return invalid_argument("forward: " + std::to_string(T) + " tokens exceed the workspace for " +
                            std::to_string(limits_.max_num_tokens));
  if (static_cast<int64_t>(b.logits_rows.size()) > limits_.max_logit_rows)
    return invalid_argument("forward: too many logits rows");
  if (static_cast<int64_t>(kv.size()) != config_.num_hidden_layers)
    return invalid_argument("forward: KV cache has the wrong number of layers");
  STRATA_RETURN_IF_ERROR(validate_kv(kv));
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
  if (mtp_ && static_cast<int64_t>(b.input_hidden.size()) != T * config_.hidden_size)
    return invalid_argument(
        "forward: a multi-token-prediction module needs the hidden state of "
        "each of the " +
        std::to_string(T) + " tokens");
  return ok_status();
}

Status DecoderModel::forward(const ForwardBatch& b, std::span<const PagedKvLayer> kv,
                             const KernelOps& ops, float* logits) {
  STRATA_RETURN_IF_ERROR(validate(b, kv));
  const ModelConfig& c = config_;
  const int64_t T = b.num_tokens(), H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  ThreadPool& pool = pool_;
  embed_.lookup(b.token_ids.data(), T, h_, H, pool);
  dump("embed", h_, T, H, H);
  if (mtp_) {
    float* cat = mtp_ws_.as<float>();
    for (int64_t t = 0; t < T; ++t)
      if (b.positions[t] == 0) std::memset(h_ + t * H, 0, H * sizeof(float));
    ops.rms_norm(h_, H, mtp_->enorm.data(), eps, T, H, cat, 2 * H, pool);
    ops.rms_norm(b.input_hidden.data(), H, mtp_->hnorm.data(), eps, T, H, cat + H, 2 * H, pool);
    ops.matmul(cat, T, 2 * H, mtp_->eh_proj, h_, H, pool);
    dump("mtp_input", h_, T, H, H);
  }
  rope_->compute(b.positions, cos_, sin_);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string prefix = dump_ ? "layers." + std::to_string(l) + "." : std::string();
    ops.rms_norm(h_, H, attn_norm_[l].data(), eps, T, H, x_, H, pool);
    attention(l, x_, b, kv[l], cos_, sin_, tmp_, ops);
    if (dump_) dump(prefix + "attn_out", tmp_, T, H, H);
    add_rows(h_, H, tmp_, H, T, H, pool);
    ops.rms_norm(h_, H, ffn_norm_[l].data(), eps, T, H, x_, H, pool);
    const FeedForward& f = ffn_[l];
    if (f.moe)
      f.moe->forward(x_, H, T, tmp_, H, ops, pool, ffn_ws_);
    else
      f.mlp->forward(x_, H, T, tmp_, H, ops, pool, ffn_ws_);
    if (dump_) dump(prefix + "mlp_out", tmp_, T, H, H);
    add_rows(h_, H, tmp_, H, T, H, pool);
    if (dump_) dump(prefix + "hidden", h_, T, H, H);
  }
  last_num_tokens_ = T;
  return compute_logits(b.logits_rows, ops, logits);
}

Status DecoderModel::hidden_states(std::span<const int32_t> rows, bool final_norm,
                                   const KernelOps& ops, float* out) {
  const int64_t R = static_cast<int64_t>(rows.size()), H = config_.hidden_size;
  for (int64_t r = 0; r < R; ++r) {
    if (rows[r] < 0 || rows[r] >= last_num_tokens_)
      return invalid_argument("hidden_states: row out of range");
    std::memcpy(out + r * H, h_ + int64_t{rows[r]} * H, H * sizeof(float));
  }
  if (final_norm && R > 0)
    ops.rms_norm(out, H, final_norm_.data(), static_cast<float>(config_.rms_norm_eps), R, H, out, H,
                 pool_);
  return ok_status();
}

Status DecoderModel::compute_logits(std::span<const int32_t> rows, const KernelOps& ops,
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

}  // namespace strata
