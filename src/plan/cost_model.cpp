#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/fp8_ds_mla.h"
#include "model/deepseek_mla.h"
#include "model/moe.h"

namespace strata::plan {

int64_t ModelShape::attention_sharded_params() const {
  if (!mla)
    return hidden * (num_heads * head_dim + 2 * num_kv_heads * head_dim) +
           num_heads * head_dim * hidden;
  const int64_t qk = qk_nope_dim + qk_rope_dim;
  const int64_t q_b = q_lora_rank > 0 ? q_lora_rank * num_heads * qk : 0;
  // Absorbed form, per token: q_nope W_UK per head, then the latent output W_UV per head, o_proj.
  // The indexer: wq_b from the q latent, wk and weights_proj from the hidden state.
  const int64_t indexer =
      has_indexer() ? q_lora_rank * index_heads * index_dim + hidden * (index_dim + index_heads)
                    : 0;
  return q_b + num_heads * qk_nope_dim * kv_lora_rank + num_heads * kv_lora_rank * v_head_dim +
         num_heads * v_head_dim * hidden + indexer;
}

int64_t ModelShape::attention_replicated_params() const {
  if (!mla) return 0;
  const int64_t q_in = q_lora_rank > 0 ? q_lora_rank : num_heads * (qk_nope_dim + qk_rope_dim);
  return hidden * (q_in + kv_lora_rank + qk_rope_dim);  // the fused q_a|kv_a projection
}

int64_t ModelShape::kv_elems_per_token() const {
  return mla ? kv_lora_rank + qk_rope_dim + (has_indexer() ? index_dim : 0)
             : 2 * num_kv_heads * head_dim;
}

double ModelShape::indexer_flops_per_pair() const {
  return has_indexer() ? 2.0 * static_cast<double>(index_heads) * (index_dim + 1) : 0.0;
}

double ModelShape::attention_flops_per_pair() const {
  if (!mla) return 4.0 * static_cast<double>(num_heads * head_dim);
  return static_cast<double>(num_heads) *
         (2.0 * static_cast<double>(kv_lora_rank + qk_rope_dim) + 2.0 * kv_lora_rank);
}

Result<ModelShape> model_shape(const ModelConfig& c) {
  STRATA_RETURN_IF_ERROR(c.validate());
  ModelShape m;
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
  if (p.tp % p.ep != 0)
    return invalid_argument("the expert-parallel size " + std::to_string(p.ep) +
                            " must divide --tensor-parallel-size " + std::to_string(p.tp));
  if (p.ep > 1 && (model.num_experts == 0 || model.num_experts % p.ep != 0))
    return invalid_argument("expert parallelism over " + std::to_string(p.ep) + " ranks needs an " +
                            "MoE model whose expert count divides evenly (this one has " +
                            std::to_string(model.num_experts) + ")");
  return CostModel(std::move(model), std::move(hardware), p, precision);
}

std::pair<int64_t, int64_t> CostModel::stage_layers(int64_t s) const {
  const int64_t base = model_.num_layers / par_.pp, extra = model_.num_layers % par_.pp;
  const int64_t first = s * base + std::min(s, extra);
  return {first, first + base + (s < extra ? 1 : 0)};
}

double CostModel::all_reduce_s(double bytes, int64_t ranks, const LinkSpec& link, double eff) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double n = static_cast<double>(ranks);
  return 2.0 * (n - 1) / n * bytes / (link.bandwidth_bytes_per_s * eff) +
         2.0 * (n - 1) * link.latency_s;
}

const LinkSpec& CostModel::group_link(int64_t ranks) const {
  return ranks <= hw_.devices_per_node ? hw_.intra_node_link : hw_.inter_node_link;
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
  for (const SequenceWork& s : batch) {
    if (s.num_new_tokens <= 0) continue;
    const double n = static_cast<double>(s.num_new_tokens),
                 ctx = static_cast<double>(s.context_len);
    c.num_tokens += s.num_new_tokens;
    c.num_logits_rows += s.sample ? 1 : 0;
    pairs += n * ctx + n * (n + 1) / 2;  // causal: token i sees ctx + i + 1 keys
    kv_tokens += ctx + n;
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
  const double tp = static_cast<double>(par_.tp), ep = static_cast<double>(par_.ep);
  const double moe_tp = tp / ep;
  const double wb = bytes_per_element(prec_.weight_dtype, prec_.weight_group_size);
  const double lm_b = bytes_per_element(prec_.lm_head_dtype);
  const double kv_b = bytes_per_element(prec_.kv_dtype);
  const double act_b = bytes_per_element(prec_.activation_dtype);
  // KV per rank: GQA splits the KV heads (replicated when fewer than tp), MLA's latent is whole
  // on every rank.
  double kv_share = 1;
  if (!m.mla) kv_share = m.num_kv_heads >= par_.tp ? 1.0 / tp : 1.0 / m.num_kv_heads;
  double kv_bytes_token_layer = static_cast<double>(m.kv_elems_per_token()) * kv_b * kv_share;
  // With the indexer, the latent rows (read for the selected positions) and the keys (all read).
  double key_bytes = static_cast<double>(m.index_dim) * kv_b;
  double latent_bytes = kv_bytes_token_layer - key_bytes;
  if (m.mla && prec_.kv_fp8_ds_mla) {
    latent_bytes =
        static_cast<double>(ds_mla_row_bytes(m.kv_lora_rank + m.qk_rope_dim, m.kv_lora_rank));
    key_bytes = m.has_indexer() ? static_cast<double>(m.index_dim) + 4 : 0;
    kv_bytes_token_layer = latent_bytes + key_bytes;
  }
  const double distinct_on_rank = expected_distinct_experts(m.num_experts, m.top_k, T) / ep;

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
  const double all_reduce = all_reduce_s(hidden_bytes, par_.tp, tp_link, eff.link_bandwidth);
  // EP all-to-all, dispatch and combine: each rank owns T / ep tokens and sends the copies of
  // their hidden states routed to experts on the other ep - 1 ranks.
  double all_to_all = 0;
  if (par_.ep > 1) {
    const double sent = T / ep * static_cast<double>(m.top_k) * static_cast<double>(m.hidden) *
                        act_b * (ep - 1) / ep;
    all_to_all = sent / (tp_link.bandwidth_bytes_per_s * eff.link_bandwidth) + tp_link.latency_s;
  }

  for (int64_t s = 0; s < par_.pp; ++s) {
    const auto [first, last] = stage_layers(s);
    double mm = 0, attn = 0, weights = 0, kv_read = 0, kv_write = 0, act = 0, tp_s = 0, ep_s = 0;
    for (int64_t l = first; l < last; ++l) {
      const double attn_sharded = static_cast<double>(m.attention_sharded_params()) / tp;
      const double attn_repl = static_cast<double>(m.attention_replicated_params());
      mm += 2 * T * (attn_sharded + attn_repl);
      weights += (attn_sharded + attn_repl) * wb;
      if (m.has_indexer()) {
        attn +=
            (sparse_pairs * m.attention_flops_per_pair() + pairs * m.indexer_flops_per_pair()) / tp;
        kv_read += sparse_rows * latent_bytes + kv_tokens * key_bytes;
      } else {
        attn += pairs * m.attention_flops_per_pair() / tp;
        kv_read += kv_tokens * kv_bytes_token_layer;
      }
      kv_write += T * kv_bytes_token_layer;
      act += 8 * T * static_cast<double>(m.hidden) * act_b;
      tp_s += all_reduce;  // after attention's o_proj
      if (m.is_moe(l)) {
        const double router = static_cast<double>(m.router_params());
        const double shared = static_cast<double>(m.shared_expert_params()) / tp;
        const double expert = static_cast<double>(m.expert_params());
        mm += 2 * T * (router + shared + static_cast<double>(m.top_k) * expert / tp);
        weights += router * 4 + shared * wb + distinct_on_rank * expert / moe_tp * wb;
        if (par_.ep > 1) {
          ep_s += 2 * all_to_all;
        } else {
          tp_s += all_reduce;
        }
      } else {
        const double mlp = static_cast<double>(m.dense_mlp_params()) / tp;
        mm += 2 * T * mlp;
        weights += mlp * wb;
        tp_s += all_reduce;
      }
    }
    double lm_flops = 0;
    if (s == par_.pp - 1 && c.num_logits_rows > 0) {
      const double lm = static_cast<double>(m.lm_head_params()) / tp;
      lm_flops = 2 * static_cast<double>(c.num_logits_rows) * lm;
      weights += lm * lm_b;
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
    c.ep_comm_s += ep_s;
    c.step_time_s +=
        (hw_.roofline == Roofline::kSum ? compute + memory : std::max(compute, memory)) + tp_s +
        ep_s;
    if (s + 1 < par_.pp) {
      // Rank i of stage s sends the hidden states to rank i of stage s + 1 (device s*tp + i to
      // (s+1)*tp + i); over the inter-node link when any such pair is on different nodes.
      bool crosses = false;
      for (int64_t i = 0; i < par_.tp; ++i)
        crosses |= (s * par_.tp + i) / hw_.devices_per_node !=
                   ((s + 1) * par_.tp + i) / hw_.devices_per_node;
      const LinkSpec& link = crosses ? hw_.inter_node_link : hw_.intra_node_link;
      c.pp_comm_s +=
          hidden_bytes / (link.bandwidth_bytes_per_s * eff.link_bandwidth) + link.latency_s;
    }
  }
  c.step_time_s += c.pp_comm_s + c.overhead_s;
  return c;
}

}  // namespace strata::plan
