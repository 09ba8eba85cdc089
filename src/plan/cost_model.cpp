#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/fp8_ds_mla.h"
#include "model/deepseek_mla.h"
#include "model/deepseek_v4_ops.h"
#include "model/moe.h"
#include "model/parallel.h"

namespace strata::plan {

int64_t ModelShape::attention_sharded_params() const {
  if (v4)  // wq_b by heads, wo_a by groups, wo_b by its output rows
    return q_lora_rank * num_heads * head_dim +
           o_groups * o_lora_rank * num_heads * head_dim / o_groups +
           hidden * o_groups * o_lora_rank;
  if (!mla)
    return hidden * (num_heads * head_dim + 2 * num_kv_heads * head_dim) +
           num_heads * head_dim * hidden;
  const int64_t qk = qk_nope_dim + qk_rope_dim;
  // q_b from the q latent, or without one q_proj from the hidden state: split by heads.
  const int64_t q = q_lora_rank > 0 ? q_lora_rank * num_heads * qk : hidden * num_heads * qk;
  // Absorbed form, per token: q_nope W_UK per head, then the latent output W_UV per head, o_proj
  // (split by its output rows).
  return q + num_heads * qk_nope_dim * kv_lora_rank + num_heads * kv_lora_rank * v_head_dim +
         num_heads * v_head_dim * hidden;
}

int64_t ModelShape::attention_replicated_params() const {
  if (v4) {
    // wq_a and wkv, and (averaged over the layers) each compressed layer's compressor (kv and
    // gate, twice as wide with the overlapping windows of ratio 4) and the indexer of ratio-4
    // layers (wq_b, weights_proj, its own overlapping compressor): replicated like V3.2's indexer.
    int64_t per_layers = 0;
    for (int r : compress_ratio) {
      if (r == 0) continue;
      const int64_t coff = r == 4 ? 2 : 1;
      per_layers += 2 * coff * head_dim * hidden;
      if (r == 4)
        per_layers += q_lora_rank * index_heads * index_dim + hidden * index_heads +
                      2 * 2 * index_dim * hidden;
    }
    return hidden * (q_lora_rank + head_dim) + (num_layers > 0 ? per_layers / num_layers : 0);
  }
  if (!mla) return 0;
  // q_a (with a q latent) and kv_a from the hidden state; the indexer's wq_b from the q latent,
  // wk and weights_proj from the hidden state: every rank holds and runs them whole.
  const int64_t indexer =
      has_indexer() ? q_lora_rank * index_heads * index_dim + hidden * (index_dim + index_heads)
                    : 0;
  return hidden * (q_lora_rank + kv_lora_rank + qk_rope_dim) + indexer;
}

double ModelShape::v4_row_bytes(double kv_b, bool fp8) const {
  return fp8 ? static_cast<double>(v4_fp8_row_bytes) : static_cast<double>(head_dim) * kv_b;
}

double ModelShape::v4_key_bytes(double kv_b, bool fp8) const {
  return fp8 ? static_cast<double>(index_dim + 4) : static_cast<double>(index_dim) * kv_b;
}

int64_t ModelShape::kv_elems_per_token() const {
  if (v4) return head_dim;  // the window row; compressed rows are fewer (v4 step cost)
  return mla ? kv_lora_rank + qk_rope_dim + (has_indexer() ? index_dim : 0)
             : 2 * num_kv_heads * head_dim;
}

double ModelShape::indexer_flops_per_pair() const {
  return has_indexer() ? 2.0 * static_cast<double>(index_heads) * (index_dim + 1) : 0.0;
}

double ModelShape::attention_flops_per_pair() const {
  if (v4) return 4.0 * static_cast<double>(num_heads * head_dim);  // K = V: QK^T and PV
  if (!mla) return 4.0 * static_cast<double>(num_heads * head_dim);
  return static_cast<double>(num_heads) *
         (2.0 * static_cast<double>(kv_lora_rank + qk_rope_dim) + 2.0 * kv_lora_rank);
}

Result<ModelShape> model_shape(const ModelConfig& c) {
  ModelShape m;
  if (c.architecture == "DeepseekV4ForCausalLM") {
    if (c.raw == nullptr) return invalid_argument("DeepSeek-V4: the config has no JSON");
    STRATA_ASSIGN_OR_RETURN(dsv4::DeepseekV4Config v, dsv4::parse_deepseek_v4_config(*c.raw));
    m.v4 = true;
    m.hidden = v.hidden_size;
    m.vocab = v.vocab_size;
    m.num_layers = v.num_hidden_layers;
    m.num_heads = v.num_attention_heads;
    m.num_kv_heads = 1;
    m.head_dim = v.head_dim;
    m.qk_rope_dim = v.qk_rope_head_dim;
    m.q_lora_rank = v.q_lora_rank;
    m.index_heads = v.index_n_heads;
    m.index_dim = v.index_head_dim;
    m.index_topk = v.index_topk;
    m.compress_ratio.assign(v.compress_ratios.begin(),
                            v.compress_ratios.begin() + static_cast<ptrdiff_t>(m.num_layers));
    m.window = v.sliding_window;
    m.o_groups = v.o_groups;
    m.o_lora_rank = v.o_lora_rank;
    m.hc_mult = v.hc_mult;
    m.expert_fp4 = v.expert_dtype == dsv4::ExpertDtype::kFp4;
    const Result<int64_t> fp8_row = dsv4::kv_token_bytes_fp8(v.head_dim, v.qk_rope_head_dim);
    m.v4_fp8_row_bytes = fp8_row.ok() ? *fp8_row : 0;
    m.dense_ffn = 0;
    m.moe_layer.assign(static_cast<size_t>(m.num_layers), true);
    m.num_experts = v.n_routed_experts;
    m.top_k = v.num_experts_per_tok;
    m.expert_ffn = v.moe_intermediate_size;
    m.shared_ffn = v.moe_intermediate_size * v.n_shared_experts;
    return m;
  }
  STRATA_RETURN_IF_ERROR(c.validate());
  m.hidden = c.hidden_size;
  m.vocab = c.vocab_size;
  m.num_layers = c.num_hidden_layers;
  m.num_heads = c.num_attention_heads;
  m.num_kv_heads = c.num_key_value_heads;
  m.head_dim = c.head_dim;
  m.dense_ffn = c.intermediate_size;
  if (c.architecture == "DeepseekV2ForCausalLM" || c.architecture == "DeepseekV3ForCausalLM" ||
      c.architecture == "DeepseekV32ForCausalLM") {
    STRATA_ASSIGN_OR_RETURN(MlaSpec mla, parse_mla_spec(c));
    m.index_heads = mla.index_heads;
    m.index_dim = mla.index_dim;
    m.index_topk = mla.index_topk;
    m.mla = true;
    m.q_lora_rank = mla.q_lora_rank;
    m.kv_lora_rank = mla.kv_lora_rank;
    m.qk_nope_dim = mla.nope;
    m.qk_rope_dim = mla.rope;
    m.v_head_dim = mla.v_dim;
  }
  STRATA_ASSIGN_OR_RETURN(std::optional<MoeSpec> moe, parse_moe_spec(c));
  m.moe_layer.assign(static_cast<size_t>(m.num_layers), false);
  if (moe) {
    for (int64_t l = 0; l < m.num_layers; ++l) m.moe_layer[l] = moe->is_moe(l);
    m.num_experts = moe->routing.num_experts;
    m.top_k = moe->routing.top_k;
    m.expert_ffn = moe->expert_ffn;
    m.shared_ffn = moe->shared_ffn;
  }
  return m;
}

double bytes_per_element(DType t, int64_t group_size) {
  if (t == DType::kW4G || t == DType::kW8G) {
    const double bits = t == DType::kW4G ? 4 : 8;
    return bits / 8 + 4.0 / static_cast<double>(std::max<int64_t>(group_size, 1));
  }
  return static_cast<double>(dtype_block_bytes(t)) / static_cast<double>(dtype_block_elems(t));
}

ComputeType matmul_compute_type(DType weight, DType activation) {
  if (weight == DType::kF8E4M3) return ComputeType::kFP8;
  switch (activation) {
    case DType::kF16:
      return ComputeType::kFP16;
    case DType::kF32:
      return ComputeType::kFP32;
    default:
      return ComputeType::kBF16;
  }
}

double expected_distinct_experts(int64_t num_experts, int64_t top_k, double tokens) {
  if (num_experts <= 0 || tokens <= 0) return 0;
  const double e = static_cast<double>(num_experts);
  const double miss = 1.0 - static_cast<double>(std::min(top_k, num_experts)) / e;
  return e * (1.0 - std::pow(miss, tokens));
}

Result<CostModel> CostModel::create(ModelShape model, HardwareSpec hardware, ParallelConfig p,
                                    PrecisionConfig precision) {
  if (p.tp < 1 || p.pp < 1 || p.ep < 1)
    return invalid_argument("parallel sizes must be >= 1 (tensor " + std::to_string(p.tp) +
                            ", pipeline " + std::to_string(p.pp) + ", expert " +
                            std::to_string(p.ep) + ")");
  if (model.num_heads % p.tp != 0)
    return invalid_argument("--tensor-parallel-size " + std::to_string(p.tp) + " does not divide " +
                            "the model's " + std::to_string(model.num_heads) + " attention heads");
  if (p.pp > model.num_layers)
    return invalid_argument("--pipeline-parallel-size " + std::to_string(p.pp) + " exceeds the " +
                            std::to_string(model.num_layers) + " layers");
  if (p.ep != 1 && p.ep != p.tp)
    return invalid_argument("the expert-parallel size " + std::to_string(p.ep) +
                            " must be 1 or --tensor-parallel-size " + std::to_string(p.tp) +
                            " (--enable-expert-parallel places whole experts on every "
                            "tensor-parallel rank)");
  if (p.ep > 1 && model.num_experts == 0)
    return invalid_argument(
        "--enable-expert-parallel needs an MoE model (this one has no "
        "routed experts)");
  Result<std::vector<ShardRange>> ranges =
      pipeline_layer_ranges(model.num_layers, static_cast<int>(p.pp), p.layer_partition);
  if (!ranges.ok()) return ranges.status();
  CostModel cm(std::move(model), std::move(hardware), p, precision);
  for (const ShardRange& r : *ranges) cm.stages_.emplace_back(r.begin, r.end);
  return cm;
}

std::pair<int64_t, int64_t> CostModel::stage_layers(int64_t s) const {
  return stages_[static_cast<size_t>(s)];
}

double CostModel::all_gather_s(double bytes, int64_t ranks, const LinkSpec& link, double eff) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double n = static_cast<double>(ranks);
  return (n - 1) / n * bytes / (link.bandwidth_bytes_per_s * eff) + (n - 1) * link.latency_s;
}

double CostModel::broadcast_s(double bytes, int64_t ranks, const LinkSpec& link, double eff) {
  return 2 * all_gather_s(bytes, ranks, link, eff);
}

const LinkSpec& CostModel::group_link(int64_t ranks) const {
  return ranks <= hw_.devices_per_node ? hw_.intra_node_link : hw_.inter_node_link;
}

const LinkSpec& CostModel::pp_link(int64_t a, int64_t b) const {
  for (int64_t i = 0; i < par_.tp; ++i)
    if ((a * par_.tp + i) / hw_.devices_per_node != (b * par_.tp + i) / hw_.devices_per_node)
      return hw_.inter_node_link;
  return hw_.intra_node_link;
}

StepCost CostModel::step_cost(std::span<const SequenceWork> batch) const {
  StepCost c;
  const ModelShape& m = model_;
  double pairs = 0;      // (query, context) token pairs, per layer
  double kv_tokens = 0;  // tokens whose KV is read, per layer
  // With the indexer: the pairs and rows the sparse attention reads (each token its top-k), while
  // `pairs` and `kv_tokens` are what the indexer scores (the whole causal context).
  double sparse_pairs = 0, sparse_rows = 0;
  const double topk = static_cast<double>(m.index_topk);
  // sum over v = a+1 .. a+n of min(v, k): the keys each of n tokens after a context of a sees
  // when at most k are visible.
  auto sum_min = [](double a, double n, double k) {
    const double below = std::clamp(k - a, 0.0, n);
    return below * a + below * (below + 1) / 2 + (n - below) * k;
  };
  // V4, per layer kind (sums over the batch): (query, row) pairs of the window, of the HCA rows
  // (every complete row: v / 128 for the token at v), of the CSA rows the indexer picks
  // (min(v / 4, top-k)) and of the indexer's scoring (v / 4); and rows read once per step.
  // sum over v = a+1 .. a+n of min(floor(v / r), k) (k < 0: no cap).
  auto sum_floor_min = [](double a, double n, int64_t r, int64_t k) {
    auto floor_sum = [r](int64_t x) {  // sum over v = 1 .. x of floor(v / r)
      const int64_t q = x / r, rem = x - q * r;
      return static_cast<double>(r) * static_cast<double>(q) * static_cast<double>(q - 1) / 2 +
             static_cast<double>(q) * static_cast<double>(rem + 1);
    };
    auto capped = [&](int64_t x) {
      if (k < 0) return floor_sum(x);
      const int64_t cap = k * r + r - 1;  // from here on floor(v / r) >= k
      return x <= cap ? floor_sum(x) : floor_sum(cap) + static_cast<double>(x - cap) * k;
    };
    const int64_t lo = static_cast<int64_t>(a), hi = static_cast<int64_t>(a + n);
    return capped(hi) - capped(lo);
  };
  double v4_window_pairs = 0, v4_hca_pairs = 0, v4_csa_pairs = 0, v4_index_pairs = 0;
  double v4_window_rows = 0, v4_hca_rows = 0, v4_csa_rows = 0, v4_index_rows = 0, v4_new = 0;
  const double window = static_cast<double>(m.window);
  for (const SequenceWork& s : batch) {
    if (s.num_new_tokens <= 0) continue;
    const double n = static_cast<double>(s.num_new_tokens),
                 ctx = static_cast<double>(s.context_len);
    c.num_tokens += s.num_new_tokens;
    c.num_logits_rows += s.sample ? 1 : 0;
    pairs += n * ctx + n * (n + 1) / 2;  // causal: token i sees ctx + i + 1 keys
    kv_tokens += ctx + n;
    if (m.v4) {
      // Exact integer sums over the new tokens' counts v = ctx+1 .. ctx+n (the token at position
      // p sees min(v, W) window rows, floor(v / 128) HCA rows, min(floor(v / 4), top-k) CSA rows
      // and scores floor(v / 4) indexer keys).
      v4_window_pairs += sum_min(ctx, n, window);
      v4_hca_pairs += sum_floor_min(ctx, n, 128, -1);
      v4_csa_pairs += sum_floor_min(ctx, n, 4, m.index_topk);
      v4_index_pairs += sum_floor_min(ctx, n, 4, -1);
      // Rows read once per step: the union of the tokens' windows, every complete HCA row, the
      // CSA rows picked (at most top-k per token) and every indexer key.
      v4_window_rows += std::min(ctx + n, window - 1 + n);
      v4_hca_rows += std::floor((ctx + n) / 128);
      v4_csa_rows += std::min(std::floor((ctx + n) / 4), topk * n);
      v4_index_rows += std::floor((ctx + n) / 4);
      v4_new += n;
      continue;
    }
    if (m.has_indexer()) {
      // Token i sees min(ctx + i + 1, topk) positions: sum over v = ctx+1 .. ctx+n of min(v, K).
      const double below = std::clamp(topk - ctx, 0.0, n);  // tokens whose whole context fits
      sparse_pairs += below * ctx + below * (below + 1) / 2 + (n - below) * topk;
      sparse_rows += std::min(ctx + n, topk);
    }
  }
  c.overhead_s = hw_.step_overhead_s + hw_.per_sequence_s * static_cast<double>(c.num_logits_rows);
  if (c.num_tokens == 0) {
    c.step_time_s = c.overhead_s;
    return c;
  }
  const double T = static_cast<double>(c.num_tokens);
  const double R = static_cast<double>(c.num_logits_rows);
  const double tp = static_cast<double>(par_.tp);
  const double wb = bytes_per_element(prec_.weight_dtype, prec_.weight_group_size);
  const double lm_b = bytes_per_element(prec_.lm_head_dtype);
  const double kv_b = bytes_per_element(prec_.kv_dtype);
  const double act_b = bytes_per_element(prec_.activation_dtype);
  // KV per rank: GQA splits the KV heads (replicated when fewer than tp), MLA's latent is whole
  // on every rank.
  double kv_share = 1;
  if (!m.mla) kv_share = m.num_kv_heads >= par_.tp ? 1.0 / tp : 1.0 / m.num_kv_heads;
  double kv_bytes_token_layer = static_cast<double>(m.kv_elems_per_token()) * kv_b * kv_share;
  const bool v4_fp8 = prec_.kv_dtype == DType::kF8E4M3;
  const double v4_row = m.v4 ? m.v4_row_bytes(kv_b, v4_fp8) : 0;
  const double v4_key = m.v4 ? m.v4_key_bytes(kv_b, v4_fp8) : 0;
  // With the indexer, the latent rows (read for the selected positions) and the keys (all read).
  double key_bytes = static_cast<double>(m.index_dim) * kv_b;
  double latent_bytes = kv_bytes_token_layer - key_bytes;
  if (m.mla && prec_.kv_fp8_ds_mla) {
    latent_bytes =
        static_cast<double>(ds_mla_row_bytes(m.kv_lora_rank + m.qk_rope_dim, m.kv_lora_rank));
    key_bytes = m.has_indexer() ? static_cast<double>(m.index_dim) + 4 : 0;
    kv_bytes_token_layer = latent_bytes + key_bytes;
  }
  // Attention weights per rank: the sharded ones over tp, except GQA's K and V when there are
  // fewer KV heads than ranks (each rank then holds one KV head's), and the replicated ones whole.
  double attn_params = static_cast<double>(m.attention_sharded_params()) / tp +
                       static_cast<double>(m.attention_replicated_params());
  if (!m.mla && m.num_kv_heads < par_.tp)
    attn_params += 2.0 * static_cast<double>(m.hidden * m.head_dim) *
                   (1.0 - static_cast<double>(m.num_kv_heads) / tp);
  // Routed experts: whole experts, shard_range(E, tp, rank); the critical path is the rank with
  // the most, ceil(E / tp) of E, which runs that share of the (token, expert) pairs and reads that
  // share of the experts the batch touches.
  const double expert_share = m.num_experts > 0
                                  ? static_cast<double>((m.num_experts + par_.tp - 1) / par_.tp) /
                                        static_cast<double>(m.num_experts)
                                  : 0;
  const double distinct_on_rank =
      expected_distinct_experts(m.num_experts, m.top_k, T) * expert_share;

  const Efficiency& eff = hw_.efficiency;
  const double mm_peak =
      hw_.peak_flops_for(matmul_compute_type(prec_.weight_dtype, prec_.activation_dtype)) *
      eff.flops;
  const double act_peak =
      hw_.peak_flops_for(matmul_compute_type(prec_.activation_dtype, prec_.activation_dtype)) *
      eff.flops;
  const double attn_peak =
      hw_.attention_flops_per_s > 0 ? hw_.attention_flops_per_s * eff.flops : act_peak;
  const double bw = hw_.memory_bandwidth_bytes_per_s * eff.memory_bandwidth;
  const LinkSpec& tp_link = group_link(par_.tp);
  const double hidden_bytes = T * static_cast<double>(m.hidden) * act_b;
  // The engine's all-gathers (model/parallel.h), each of `width` values per row gathered from the
  // tp ranks' column slices of ceil(width / tp) (the last ranks' padded).
  auto padded = [&](int64_t width) {
    return tp * static_cast<double>((width + par_.tp - 1) / par_.tp);
  };
  auto gather = [&](double bytes) {
    return all_gather_s(bytes, par_.tp, tp_link, eff.link_bandwidth);
  };
  // o_proj's (down's) output rows, gathered into [T, H]; after each attention and each MLP.
  const double hidden_gather = gather(T * padded(m.hidden) * act_b);
  const double attention_gather =
      gather(T * static_cast<double>(m.attention_output_width()) * act_b) + hidden_gather;
  // A SwiGLU split by rows: the [gate | up] rows gathered (T x 2 ffn), then down's.
  auto swiglu_gather = [&](int64_t ffn) {
    return gather(T * 2 * padded(ffn) * act_b) + hidden_gather;
  };
  // MoE: every rank's outputs of its experts' (token, slot) pairs, about T top_k rows of H in all.
  const double experts_gather =
      gather(T * static_cast<double>(m.top_k) * static_cast<double>(m.hidden) * act_b);

  const int64_t last_stage = par_.pp - 1;
  for (int64_t s = 0; s < par_.pp; ++s) {
    const auto [first, last] = stage_layers(s);
    double mm = 0, attn = 0, weights = 0, kv_read = 0, kv_write = 0, act = 0, tp_s = 0;
    // The vocab-parallel embedding: each rank looks up its vocabulary rows for all T tokens (zeros
    // elsewhere) and the ranks gather [tp, T, H].
    if (s == 0) tp_s += gather(tp * hidden_bytes);
    for (int64_t l = first; l < last; ++l) {
      mm += 2 * T * attn_params;
      weights += attn_params * wb;
      if (m.v4) {
        // The hyper-connection mixes before attention and FFN ((2 + hc) hc rows of hc x H, f32,
        // replicated), the window (and the compressed rows of the layer's kind), the indexer.
        const double hc = static_cast<double>(m.hc_mult);
        const double hc_params = 2 * (2 + hc) * hc * hc * static_cast<double>(m.hidden);
        mm += 2 * T * hc_params;
        weights += hc_params * 4;
        const int r = m.compress_ratio[static_cast<size_t>(l)];
        const double fp = m.attention_flops_per_pair() / tp;
        attn += v4_window_pairs * fp;
        kv_read += v4_window_rows * v4_row;
        kv_write += v4_new * v4_row;
        if (r == 128) {
          attn += v4_hca_pairs * fp;
          kv_read += v4_hca_rows * v4_row;
          kv_write += v4_new / 128 * v4_row;
        } else if (r == 4) {
          attn += v4_csa_pairs * fp + v4_index_pairs * m.indexer_flops_per_pair();
          kv_read += v4_csa_rows * v4_row + v4_index_rows * v4_key;
          kv_write += v4_new / 4 * (v4_row + v4_key);
        }
      } else if (m.has_indexer()) {
        // The indexer is replicated: every rank scores the whole context.
        attn +=
            sparse_pairs * m.attention_flops_per_pair() / tp + pairs * m.indexer_flops_per_pair();
        kv_read += sparse_rows * latent_bytes + kv_tokens * key_bytes;
      } else {
        attn += pairs * m.attention_flops_per_pair() / tp;
        kv_read += kv_tokens * kv_bytes_token_layer;
      }
      kv_write += T * kv_bytes_token_layer;
      act += 8 * T * static_cast<double>(m.hidden * (m.v4 ? m.hc_mult : 1)) * act_b;
      tp_s += attention_gather;
      if (m.is_moe(l)) {
        const double router = static_cast<double>(m.router_params());
        const double shared = static_cast<double>(m.shared_expert_params()) / tp;
        const double expert = static_cast<double>(m.expert_params());
        const double expert_b = m.expert_fp4 ? 17.0 / 32.0 : wb;  // MXFP4: e2m1 + e8m0 per 32
        mm += 2 * T * (router + shared + static_cast<double>(m.top_k) * expert * expert_share);
        weights += router * 4 + shared * wb + distinct_on_rank * expert * expert_b;
        tp_s += experts_gather + (m.shared_ffn > 0 ? swiglu_gather(m.shared_ffn) : 0);
      } else {
        const double mlp = static_cast<double>(m.dense_mlp_params()) / tp;
        mm += 2 * T * mlp;
        weights += mlp * wb;
        tp_s += swiglu_gather(m.dense_ffn);
      }
    }
    double lm_flops = 0;
    if (s == last_stage && c.num_logits_rows > 0) {
      const double lm = static_cast<double>(m.lm_head_params()) / tp;
      lm_flops = 2 * R * lm;
      weights += lm * lm_b;
      tp_s += gather(R * padded(m.vocab) * 4);  // f32 logits, rows x vocab
    }
    const double bytes = weights + kv_read + kv_write + act;
    const double compute = (mm + lm_flops) / mm_peak + attn / attn_peak;
    const double memory = bytes / bw;
    c.matmul_flops += mm + lm_flops;
    c.attention_flops += attn;
    c.weight_bytes += weights;
    c.kv_read_bytes += kv_read;
    c.kv_write_bytes += kv_write;
    c.activation_bytes += act;
    c.compute_s += compute;
    c.memory_s += memory;
    c.tp_comm_s += tp_s;
    double stage =
        (hw_.roofline == Roofline::kSum ? compute + memory : std::max(compute, memory)) + tp_s;
    c.step_time_s += stage;
    if (s + 1 < par_.pp) {
      // Rank i of stage s sends the hidden states to rank i of stage s + 1 (device s*tp + i to
      // (s+1)*tp + i); over the inter-node link when any such pair is on different nodes.
      const double send =
          hidden_bytes / (pp_link(s, s + 1).bandwidth_bytes_per_s * eff.link_bandwidth) +
          pp_link(s, s + 1).latency_s;
      c.pp_comm_s += send;
      stage += send;
    }
    c.stage_s.push_back(stage);
  }
  // The last stage broadcasts the f32 logits rows to every other stage (each rank samples).
  if (par_.pp > 1 && c.num_logits_rows > 0) {
    bool crosses = false;
    for (int64_t s = 0; s < last_stage; ++s)
      crosses |= &pp_link(s, last_stage) == &hw_.inter_node_link;
    const double logits =
        broadcast_s(R * static_cast<double>(m.vocab) * 4, par_.pp,
                    crosses ? hw_.inter_node_link : hw_.intra_node_link, eff.link_bandwidth);
    c.pp_comm_s += logits;
    c.stage_s.back() += logits;
  }
  c.step_time_s += c.pp_comm_s + c.overhead_s;
  return c;
}

}  // namespace strata::plan
