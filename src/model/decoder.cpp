#include "model/decoder.h"

#include <algorithm>
#include <cstring>
#include <utility>

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

namespace {

// The output head a rank holds (its vocabulary rows), planned from the tensors' metadata. Every
// stage plans it: its storage is Model::weight_dtype(), which the KV cache's default dtype
// follows, so it must be the same on every rank. `embed_dtype`: the embedding's storage when the
// head is tied.
Result<WeightPlan> plan_head(const DecoderNames& names, const ModelConfig& c, WeightSource& w,
                             const ModelBuildOptions& opt, const Fp8Quantization& lm_head_fp8,
                             const ShardRange& vocab, DType* embed_dtype) {
  const int64_t H = c.hidden_size;
  if (head_is_embedding(c, w, names)) {
    STRATA_ASSIGN_OR_RETURN(io::TensorRef embed,
                            w.peek(tensor_name(names.embed, w.naming()), {c.vocab_size, H}));
    STRATA_ASSIGN_OR_RETURN(*embed_dtype, EmbeddingTable::storage_for(embed, H, opt.storage));
    return plan_pack(vocab.size(), H, matmul_storage(opt.storage, *embed_dtype));
  }
  return plan_packed(w, {{names.lm_head, c.vocab_size, vocab.begin, vocab.end}}, H, -1, opt.storage,
                     lm_head_fp8);
}

Status mtp_pipeline_error() {
  return unimplemented(
      "a multi-token-prediction module is one layer: load it with --pipeline-parallel-size 1 "
      "(its own place on the ranks that run it; hidden_states() gives every stage the target's "
      "hidden states)");
}

}  // namespace

ModelParallel DecoderModel::module_place(const ModelBuildOptions& opt) {
  ModelParallel p = opt.parallel;
  if (opt.mtp_module) {
    // One layer: the whole module on each rank of its tensor-parallel group (a pipeline-parallel
    // place is refused by stage_layers()).
    p.first_layer = 0;
    p.end_layer = -1;
  }
  return p;
}

Result<ShardRange> DecoderModel::stage_layers(const ModelConfig& c, const ModelParallel& p) {
  if (p.tp_size < 1 || p.pp_size < 1 || p.tp_rank < 0 || p.tp_rank >= p.tp_size || p.pp_rank < 0 ||
      p.pp_rank >= p.pp_size)
    return invalid_argument("model parallelism: rank " + std::to_string(p.tp_rank) + " of " +
                            std::to_string(p.tp_size) + " tensor-parallel ranks, stage " +
                            std::to_string(p.pp_rank) + " of " + std::to_string(p.pp_size) +
                            " pipeline stages is not a place in the deployment");
  if (p.tp_size > 1 && (p.tp == nullptr || p.tp->size() != p.tp_size || p.tp->rank() != p.tp_rank))
    return invalid_argument("tensor-parallel rank " + std::to_string(p.tp_rank) + " of " +
                            std::to_string(p.tp_size) +
                            " needs the group of its stage's ranks (ModelParallel::tp)");
  if (p.pp_size > 1 && (p.pp == nullptr || p.pp->size() != p.pp_size || p.pp->rank() != p.pp_rank))
    return invalid_argument("pipeline stage " + std::to_string(p.pp_rank) + " of " +
                            std::to_string(p.pp_size) +
                            " needs the group of its pipeline's ranks (ModelParallel::pp)");
  const int64_t L = c.num_hidden_layers;
  const int64_t first = p.first_layer, end = p.end_layer < 0 ? L : p.end_layer;
  if (first < 0 || end > L || first >= end || (p.is_first_stage() && first != 0) ||
      (p.is_last_stage() && end != L))
    return invalid_argument("pipeline stage " + std::to_string(p.pp_rank) + " of " +
                            std::to_string(p.pp_size) + ": layers [" + std::to_string(first) +
                            ", " + std::to_string(end) + ") are not a stage of the model's " +
                            std::to_string(L) +
                            " layers (the first stage starts at 0, the last ends at the last "
                            "layer; see pipeline_layer_ranges())");
  return ShardRange{first, end};
}

int64_t DecoderModel::tp_workspace_floats(const ModelConfig& c, const ModelParallel& p,
                                          int64_t attention_tp_width,
                                          const WorkspaceLimits& limits) {
  const int tp = p.tp_size;
  if (tp <= 1) return 0;
  auto widest = [tp](int64_t n) { return (n + tp - 1) / tp; };
  const int64_t H = c.hidden_size;
  const int64_t w = std::max({H, 2 * widest(c.intermediate_size), attention_tp_width});
  int64_t local = std::max(limits.max_num_tokens * w, limits.max_logit_rows * widest(c.vocab_size));
  local = (local + 15) / 16 * 16;
  return local * (1 + tp);
}

int64_t DecoderModel::tp_ld(int64_t units, int64_t unit, int parts) const {
  const int tp = par_.tp_size;
  return (units + tp - 1) / tp * unit * parts;
}

Status DecoderModel::gather_columns(const float* local, int64_t ld, int64_t T, int64_t units,
                                    int64_t unit, int parts, float* out, int64_t ldo) {
  const int tp = par_.tp_size;
  STRATA_RETURN_IF_ERROR(all_gather_floats(*par_.tp, local, T * ld, tp_stage_));
  const int64_t full = units * unit;
  for (int r = 0; r < tp; ++r) {
    const ShardRange range = shard_range(units, tp, r);
    const int64_t w = range.size() * unit;
    const float* src = tp_stage_ + r * T * ld;
    for (int64_t t = 0; t < T; ++t)
      for (int part = 0; part < parts; ++part)
        std::memcpy(out + t * ldo + part * full + range.begin * unit, src + t * ld + part * w,
                    static_cast<size_t>(w) * sizeof(float));
  }
  return ok_status();
}

Result<DecoderModel::FeedForward> DecoderModel::load_dense_mlp(const TensorName& gate,
                                                               const TensorName& up,
                                                               const TensorName& down, int64_t ffn,
                                                               int64_t layer,
                                                               const ModelBuildOptions& opt) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size;
  const Fp8Quantization fp8 = c.fp8.value_or(Fp8Quantization{});
  FeedForward f;
  if (opt.parallel.tp_size == 1) {
    STRATA_ASSIGN_OR_RETURN(
        DenseMlp m, DenseMlp::load(weights(), gate, up, down, H, ffn, layer, opt.layers(), fp8));
    f.mlp = std::move(m);
    return f;
  }
  // The gather buffers are sized for the config's intermediate size (tp_workspace_floats()).
  if (ffn > c.intermediate_size)
    return invalid_argument("a tensor-parallel dense MLP of " + std::to_string(ffn) +
                            " is wider than the config's intermediate_size " +
                            std::to_string(c.intermediate_size));
  const ShardRange fr = shard_range(ffn, opt.parallel.tp_size, opt.parallel.tp_rank);
  const ShardRange hr = shard_range(H, opt.parallel.tp_size, opt.parallel.tp_rank);
  DenseMlp m;
  m.ffn = ffn;
  STRATA_ASSIGN_OR_RETURN(
      m.gate_up,
      load_packed(weights(), {{gate, ffn, fr.begin, fr.end}, {up, ffn, fr.begin, fr.end}}, H, layer,
                  opt.layers(), fp8));
  STRATA_ASSIGN_OR_RETURN(
      m.down, load_packed(weights(), {{down, H, hr.begin, hr.end}}, ffn, layer, opt.layers(), fp8));
  f.mlp = std::move(m);
  f.tp_sharded = true;
  return f;
}

Result<std::array<WeightPlan, 2>> DecoderModel::plan_dense_mlp(
    WeightSource& w, const ModelConfig& c, const TensorName& gate, const TensorName& up,
    const TensorName& down, int64_t ffn, int64_t layer, const ModelBuildOptions& opt) {
  const int64_t H = c.hidden_size;
  const Fp8Quantization fp8 = c.fp8.value_or(Fp8Quantization{});
  if (opt.parallel.tp_size == 1)
    return DenseMlp::plan(w, gate, up, down, H, ffn, layer, opt.layers(), fp8);
  const ShardRange fr = shard_range(ffn, opt.parallel.tp_size, opt.parallel.tp_rank);
  const ShardRange hr = shard_range(H, opt.parallel.tp_size, opt.parallel.tp_rank);
  std::array<WeightPlan, 2> out;
  STRATA_ASSIGN_OR_RETURN(
      out[0], plan_packed(w, {{gate, ffn, fr.begin, fr.end}, {up, ffn, fr.begin, fr.end}}, H, layer,
                          opt.layers(), fp8));
  STRATA_ASSIGN_OR_RETURN(
      out[1], plan_packed(w, {{down, H, hr.begin, hr.end}}, ffn, layer, opt.layers(), fp8));
  return out;
}

Status DecoderModel::load(const DecoderNames& names, const ModelBuildOptions& opt,
                          const Fp8Quantization& lm_head_fp8) {
  const ModelConfig& c = config_;
  WeightSource& w = *weights_;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  if (opt.mtp_module && opt.parallel.pp_size > 1) return mtp_pipeline_error();
  STRATA_ASSIGN_OR_RETURN(const ShardRange stage, stage_layers(c, module_place(opt)));
  par_ = module_place(opt);
  first_layer_ = stage.begin;
  num_layers_ = stage.size();
  const bool first = par_.is_first_stage(), last = par_.is_last_stage();
  vocab_range_ = shard_range(V, par_.tp_size, par_.tp_rank);
  const int64_t V_local = vocab_range_.size();
  STRATA_ASSIGN_OR_RETURN(moe_spec_, parse_moe_spec(c));
  const bool tied = head_is_embedding(c, w, names);
  if (first || (last && tied)) {
    STRATA_ASSIGN_OR_RETURN(
        embed_, EmbeddingTable::load(w, names.embed, V, H, opt.storage, opt.keep_in_place,
                                     vocab_range_.begin, vocab_range_.end));
    params_ += V_local * H;
  }
  if (last) {
    STRATA_ASSIGN_OR_RETURN(final_norm_, load_vector(w, names.final_norm, H, -1, DummyInit::kOnes));
    if (tied) {
      STRATA_ASSIGN_OR_RETURN(lm_head_,
                              embed_.as_packed(matmul_storage(opt.storage, embed_.dtype())));
    } else {
      // DeepSeek's FP8 checkpoints keep the output head in the float dtype.
      STRATA_ASSIGN_OR_RETURN(
          lm_head_, load_packed(w, {{names.lm_head, V, vocab_range_.begin, vocab_range_.end}}, H,
                                -1, opt.storage, lm_head_fp8));
      params_ += V_local * H;
    }
    params_ += H;
    total_bytes_ += H * static_cast<int64_t>(sizeof(float));  // final norm
  }
  if (!first) embed_ = EmbeddingTable();  // the last stage's tied head is packed from it
  if (last) {
    head_dtype_ = lm_head_.dtype();
  } else {
    DType embed_dtype = DType::kF32;
    STRATA_ASSIGN_OR_RETURN(const WeightPlan head,
                            plan_head(names, c, w, opt, lm_head_fp8, vocab_range_, &embed_dtype));
    head_dtype_ = head.dtype;
  }
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
  const int64_t L = num_layers_;
  attn_norm_.resize(L);
  ffn_norm_.resize(L);
  ffn_.resize(L);
  for (int64_t i = 0; i < L; ++i) {
    const int64_t l = first_layer_ + i;  // the checkpoint's (and the hooks') layer index
    STRATA_ASSIGN_OR_RETURN(attn_norm_[i], load_vector(w, names.attn_norm, H, l, DummyInit::kOnes));
    STRATA_ASSIGN_OR_RETURN(ffn_norm_[i], load_vector(w, names.ffn_norm, H, l, DummyInit::kOnes));
    params_ += 2 * H;
    total_bytes_ += 2 * H * static_cast<int64_t>(sizeof(float));
    STRATA_RETURN_IF_ERROR(load_attention(l, opt));
    STRATA_ASSIGN_OR_RETURN(ffn_[i], load_feed_forward(l, opt));
    FeedForward& f = ffn_[i];
    const std::string prefix = "layers." + std::to_string(l) + ".";
    std::vector<LinearInfo> linears;
    if (f.moe) {
      active_bytes_ += f.moe->bytes_active();
      total_bytes_ += f.moe->bytes_total();
      params_ += f.moe->parameters();
      active_params_ += moe_active_parameters(*moe_spec_, H);
      f.moe->describe(prefix + "moe.", &linears);
      // Under tensor parallelism: the all-gather scratch of its experts' outputs.
      ffn_ws_.reserve_parallel(f.moe->parallel_scratch_floats(opt.limits.max_num_tokens));
    } else {
      STRATA_CHECK(f.mlp.has_value()) << "layer " << l << " has no feed-forward";
      const int64_t mlp_params =
          f.tp_sharded ? f.mlp->gate_up.n() * f.mlp->gate_up.k() + f.mlp->down.n() * f.mlp->down.k()
                       : f.mlp->parameters();
      active_bytes_ += f.mlp->bytes();
      total_bytes_ += f.mlp->bytes();
      params_ += mlp_params;
      active_params_ += mlp_params;
      f.mlp->describe(prefix + "mlp.", Sharding::kColumn, Sharding::kRow, &linears);
    }
    declare(std::move(linears));
    w.release_generated();
  }
  if (last) {
    active_bytes_ += lm_head_.bytes();
    total_bytes_ += lm_head_.bytes();
    declare("lm_head", lm_head_, Sharding::kVocab);
  }
  if (first) total_bytes_ += embed_.bytes();
  STRATA_ASSIGN_OR_RETURN(auto rope, make_rope());
  rope_ = std::move(rope);
  w.release_generated();
  // One allocation for the matmul weights, in the order a forward pass reads them.
  std::vector<PackedWeight*> order;
  if (mtp_) order.push_back(&mtp_->eh_proj);
  for (int64_t i = 0; i < L; ++i) {
    append_attention_weights(first_layer_ + i, &order);
    if (ffn_[i].moe)
      ffn_[i].moe->append_weights_in_order(&order);
    else
      ffn_[i].mlp->append_weights_in_order(&order);
  }
  if (last) order.push_back(&lm_head_);
  STRATA_RETURN_IF_ERROR(
      PackedWeight::place_in_order(order, opt.allocator ? *opt.allocator : host_allocator()));
  allocate_workspace(opt.limits);
  if (kv_spec().num_layers != num_layers_)
    return unimplemented(c.architecture +
                         " does not support pipeline parallelism yet (its KV cache spans all " +
                         std::to_string(kv_spec().num_layers) + " layers, the stage holds " +
                         std::to_string(num_layers_) + ")");
  return ok_status();
}

Result<ModelMemoryEstimate> DecoderModel::estimate(const DecoderNames& names, const ModelConfig& c,
                                                   WeightSource& w, const ModelBuildOptions& opt,
                                                   const Fp8Quantization& lm_head_fp8,
                                                   const EstimateHooks& hooks) {
  // Mirrors load() above, weight for weight, for this rank's shard and stage.
  ModelMemoryEstimate out;
  WeightBytesByClass& b = out.weights;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  if (opt.mtp_module && opt.parallel.pp_size > 1) return mtp_pipeline_error();
  const ModelParallel par = module_place(opt);
  STRATA_ASSIGN_OR_RETURN(const ShardRange stage, stage_layers(c, par));
  const bool first = par.is_first_stage(), last = par.is_last_stage();
  const ShardRange vocab = shard_range(V, par.tp_size, par.tp_rank);
  STRATA_ASSIGN_OR_RETURN(std::optional<MoeSpec> moe, parse_moe_spec(c));
  DType embed_dtype = DType::kF32;
  STRATA_ASSIGN_OR_RETURN(const WeightPlan head,
                          plan_head(names, c, w, opt, lm_head_fp8, vocab, &embed_dtype));
  if (first) {
    STRATA_ASSIGN_OR_RETURN(io::TensorRef embed,
                            w.peek(tensor_name(names.embed, w.naming()), {V, H}));
    STRATA_ASSIGN_OR_RETURN(embed_dtype, EmbeddingTable::storage_for(embed, H, opt.storage));
    b.embedding = dtype_bytes(embed_dtype, vocab.size() * H);
  }
  if (last) {
    STRATA_ASSIGN_OR_RETURN(int64_t final_norm, plan_vector(w, names.final_norm, H, -1));
    b.other += final_norm;
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
  for (int64_t l = stage.begin; l < stage.end; ++l) {
    STRATA_ASSIGN_OR_RETURN(int64_t attn_norm, plan_vector(w, names.attn_norm, H, l));
    STRATA_ASSIGN_OR_RETURN(int64_t ffn_norm, plan_vector(w, names.ffn_norm, H, l));
    b.other += attn_norm + ffn_norm;
    STRATA_RETURN_IF_ERROR(hooks.attention(l, &b));
    if (moe && moe->is_moe(l)) {
      STRATA_RETURN_IF_ERROR(MoeBlock::plan(w, *moe, c, l, opt.layers(), &b, opt.parallel));
    } else {
      STRATA_RETURN_IF_ERROR(hooks.dense_mlp(l, &b));
    }
  }
  if (last) b.add_matmul(&WeightBytesByClass::lm_head, head.dtype, head.bytes);
  b.weight_dtype = c.fp8 ? DType::kF8E4M3 : head.dtype;  // as weight_dtype() reports it
  bool stage_has_moe = false;
  for (int64_t l = stage.begin; l < stage.end; ++l) stage_has_moe |= moe && moe->is_moe(l);
  out.workspace_bytes = workspace_bytes_for(c, moe, hooks.rope_half, opt.mtp_module, opt.limits) +
                        (stage_has_moe ? 4 * MoeBlock::parallel_scratch_floats_for(
                                                 *moe, H, par.tp_size, opt.limits.max_num_tokens)
                                       : 0) +
                        hooks.attention_workspace_bytes +
                        tp_workspace_floats(c, par, hooks.attention_tp_width, opt.limits) *
                            static_cast<int64_t>(sizeof(float));
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
  const int64_t tp_floats = tp_workspace_floats(config_, par_, attention_tp_width(), limits);
  if (tp_floats > 0) {
    tp_ws_.resize(static_cast<size_t>(tp_floats) * sizeof(float));
    tp_local_ = tp_ws_.as<float>();
    tp_stage_ = tp_local_ + tp_floats / (1 + par_.tp_size);
  }
}

Status DecoderModel::validate(const ForwardBatch& b, std::span<const PagedKvLayer> kv) const {
  const int64_t T = b.num_tokens();
  if (T == 0) return invalid_argument("forward: empty batch");
  if (T > limits_.max_num_tokens)
    return invalid_argument("forward: " + std::to_string(T) + " tokens exceed the workspace for " +
                            std::to_string(limits_.max_num_tokens));
  if (static_cast<int64_t>(b.logits_rows.size()) > limits_.max_logit_rows)
    return invalid_argument("forward: too many logits rows");
  if (static_cast<int64_t>(kv.size()) != num_layers_)
    return invalid_argument("forward: KV cache has " + std::to_string(kv.size()) +
                            " layers; this model (stage) holds " + std::to_string(num_layers_));
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

Status DecoderModel::embed(const ForwardBatch& b) {
  const int64_t T = b.num_tokens(), H = config_.hidden_size;
  if (par_.tp_size == 1) {
    embed_.lookup(b.token_ids.data(), T, h_, H, pool_);
    return ok_status();
  }
  // Each rank embeds the tokens of its vocabulary rows (zeros for the others); every token's row
  // is then taken from the rank that holds it.
  embed_.lookup(b.token_ids.data(), T, tp_local_, H, pool_);
  STRATA_RETURN_IF_ERROR(all_gather_floats(*par_.tp, tp_local_, T * H, tp_stage_));
  const int tp = par_.tp_size;
  for (int64_t t = 0; t < T; ++t) {
    int owner = 0;
    while (owner + 1 < tp && b.token_ids[t] >= shard_range(config_.vocab_size, tp, owner).end)
      ++owner;
    std::memcpy(h_ + t * H, tp_stage_ + (owner * T + t) * H, H * sizeof(float));
  }
  return ok_status();
}

Status DecoderModel::dense_mlp_tp(const DenseMlp& m, const float* x, int64_t T, float* y,
                                  const KernelOps& ops) {
  // gate/up: this rank's rows of both, gathered into whole rows, so the activation runs over the
  // whole intermediate row exactly as one process runs it; down: this rank's output rows over the
  // whole intermediate, gathered into [T, H].
  const int64_t H = config_.hidden_size, F = m.ffn;
  const int64_t ld_gu = tp_ld(F, 1, 2), ld_h = tp_ld(H, 1, 1);
  ops.matmul(x, T, H, m.gate_up, tp_local_, ld_gu, pool_);
  STRATA_RETURN_IF_ERROR(gather_columns(tp_local_, ld_gu, T, F, 1, 2, ffn_ws_.gu, 2 * F));
  ops.silu_mul(ffn_ws_.gu, 2 * F, T, F, ffn_ws_.act, F, pool_);
  ops.matmul(ffn_ws_.act, T, F, m.down, tp_local_, ld_h, pool_);
  return gather_columns(tp_local_, ld_h, T, H, 1, 1, y, H);
}

Status DecoderModel::forward(const ForwardBatch& b, std::span<const PagedKvLayer> kv,
                             const KernelOps& ops, float* logits) {
  STRATA_RETURN_IF_ERROR(validate(b, kv));
  const ModelConfig& c = config_;
  const int64_t T = b.num_tokens(), H = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  ThreadPool& pool = pool_;
  if (par_.is_first_stage()) {
    STRATA_RETURN_IF_ERROR(embed(b));
    dump("embed", h_, T, H, H);
  } else {
    STRATA_RETURN_IF_ERROR(par_.pp->recv(par_.pp_rank - 1, h_, T * H * sizeof(float)));
  }
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
  for (int64_t i = 0; i < num_layers_; ++i) {
    const int64_t l = first_layer_ + i;
    const std::string prefix = dump_ ? "layers." + std::to_string(l) + "." : std::string();
    ops.rms_norm(h_, H, attn_norm_[i].data(), eps, T, H, x_, H, pool);
    attention(l, x_, b, kv[i], cos_, sin_, tmp_, ops);
    if (!tp_status_.ok()) return std::exchange(tp_status_, ok_status());
    if (dump_) dump(prefix + "attn_out", tmp_, T, H, H);
    add_rows(h_, H, tmp_, H, T, H, pool);
    ops.rms_norm(h_, H, ffn_norm_[i].data(), eps, T, H, x_, H, pool);
    const FeedForward& f = ffn_[i];
    if (f.moe) {
      STRATA_RETURN_IF_ERROR(f.moe->forward(x_, H, T, tmp_, H, ops, pool, ffn_ws_));
    } else if (f.tp_sharded) {
      STRATA_RETURN_IF_ERROR(dense_mlp_tp(*f.mlp, x_, T, tmp_, ops));
    } else {
      f.mlp->forward(x_, H, T, tmp_, H, ops, pool, ffn_ws_);
    }
    if (dump_) dump(prefix + "mlp_out", tmp_, T, H, H);
    add_rows(h_, H, tmp_, H, T, H, pool);
    if (dump_) dump(prefix + "hidden", h_, T, H, H);
  }
  // Not waiting for the next stage to take them: this stage may go on with the next micro-batch.
  if (!par_.is_last_stage())
    STRATA_RETURN_IF_ERROR(par_.pp->send_async(par_.pp_rank + 1, h_, T * H * sizeof(float)));
  last_num_tokens_ = T;
  return compute_logits(b.logits_rows, ops, logits);
}

Status DecoderModel::hidden_states(std::span<const int32_t> rows, bool final_norm,
                                   const KernelOps& ops, float* out) {
  const int64_t R = static_cast<int64_t>(rows.size()), H = config_.hidden_size;
  for (int64_t r = 0; r < R; ++r)
    if (rows[r] < 0 || rows[r] >= last_num_tokens_)
      return invalid_argument("hidden_states: row out of range");
  if (R == 0) return ok_status();
  // The last stage holds the model's final hidden states; it sends them to the other stages.
  if (par_.is_last_stage()) {
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(out + r * H, h_ + int64_t{rows[r]} * H, H * sizeof(float));
    if (final_norm)
      ops.rms_norm(out, H, final_norm_.data(), static_cast<float>(config_.rms_norm_eps), R, H, out,
                   H, pool_);
  }
  if (par_.pp_size > 1) return par_.pp->broadcast(out, R * H * sizeof(float), par_.pp_size - 1);
  return ok_status();
}

Status DecoderModel::compute_logits(std::span<const int32_t> rows, const KernelOps& ops,
                                    float* logits) {
  const int64_t R = static_cast<int64_t>(rows.size()), H = config_.hidden_size;
  const int64_t V = config_.vocab_size;
  if (R == 0) return ok_status();
  if (R > limits_.max_logit_rows)
    return invalid_argument("compute_logits: " + std::to_string(R) + " rows exceed " +
                            std::to_string(limits_.max_logit_rows));
  // Only the last stage reads the rows (an earlier stage may have run later micro-batches since).
  if (par_.is_last_stage())
    for (int64_t r = 0; r < R; ++r)
      if (rows[r] < 0 || rows[r] >= last_num_tokens_)
        return invalid_argument("compute_logits: row out of range");
  if (par_.is_last_stage()) {
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(rows_ + r * H, h_ + int64_t{rows[r]} * H, H * sizeof(float));
    ops.rms_norm(rows_, H, final_norm_.data(), static_cast<float>(config_.rms_norm_eps), R, H,
                 rows_, H, pool_);
    dump("norm", rows_, R, H, H);
    if (par_.tp_size == 1) {
      ops.matmul(rows_, R, H, lm_head_, logits, V, pool_);
    } else {
      // Each rank's vocabulary slice, gathered so that every rank has the whole rows (and its
      // sampler picks the same tokens).
      const int64_t ld = tp_ld(V, 1, 1);
      ops.matmul(rows_, R, H, lm_head_, tp_local_, ld, pool_);
      STRATA_RETURN_IF_ERROR(gather_columns(tp_local_, ld, R, V, 1, 1, logits, V));
    }
    dump("logits", logits, R, V, V);
  }
  if (par_.pp_size > 1) return par_.pp->broadcast(logits, R * V * sizeof(float), par_.pp_size - 1);
  return ok_status();
}

}  // namespace strata
