#include "plan/deployment.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <memory>
#include <sstream>
#include <vector>

#include "core/comm.h"
#include "core/strings.h"
#include "engine/worker.h"
#include "model/parallel.h"

namespace strata::plan {
namespace {

std::string bytes(int64_t b) {
  return format_bytes(static_cast<double>(b));
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

namespace {

// The place of tensor-parallel rank 0 (the largest shard: shard_range() gives the remainders to
// the first ranks) of pipeline stage `stage`, with local groups standing in for the ranks' comms
// (the estimate reads only their size and rank; nothing is exchanged).
struct Place {
  std::vector<std::unique_ptr<Comm>> tp, pp;
  ModelParallel parallel;
};
Place place_of(const ParallelConfig& p, const ShardRange& layers, int stage) {
  Place out;
  ModelParallel& m = out.parallel;
  m.tp_size = static_cast<int>(p.tp);
  m.pp_size = static_cast<int>(p.pp);
  m.pp_rank = stage;
  m.expert_parallel = p.ep > 1;
  m.first_layer = layers.begin;
  m.end_layer = layers.end;
  if (p.tp > 1) {
    out.tp = make_local_group(m.tp_size);
    m.tp = out.tp[0].get();
  }
  if (p.pp > 1) {
    out.pp = make_local_group(m.pp_size);
    m.pp = out.pp[static_cast<size_t>(stage)].get();
  }
  return out;
}

// The memory plan inputs of one device from an engine estimate (the device's own or, in the
// fallback, divided) and the weights and KV bytes per token it holds.
engine::MemoryPlanInputs device_inputs(const Deployment& d, const engine::EngineMemoryEstimate& est,
                                       int64_t weight_bytes, int64_t workspace_bytes,
                                       int64_t kv_bytes_per_token, int64_t extra_per_token) {
  engine::MemoryPlanInputs in = est.inputs;
  in.device_memory_bytes = d.device_memory_bytes;
  in.weight_bytes = weight_bytes + est.draft_weight_bytes;
  in.workspace_bytes = workspace_bytes;
  in.kv_bytes_per_token = kv_bytes_per_token;
  in.workspace_for_tokens = [engine_ws = est.inputs.workspace_for_tokens,
                             extra_per_token](int64_t tokens) {
    const int64_t ws = engine_ws(tokens);  // the largest int64 when it cannot be estimated
    const int64_t extra = extra_per_token * tokens;
    return ws > std::numeric_limits<int64_t>::max() - extra ? std::numeric_limits<int64_t>::max()
                                                            : ws + extra;
  };
  return in;
}

// Fewer KV tokens is tighter (a refusal the tightest); at equal tokens, more fixed bytes (weights
// and workspace).
bool tighter(const Result<engine::MemoryPlan>& a, const Result<engine::MemoryPlan>& b) {
  if (!b.ok()) return false;
  if (!a.ok()) return true;
  if (a->num_tokens() != b->num_tokens()) return a->num_tokens() < b->num_tokens();
  return a->weight_bytes + a->workspace_bytes > b->weight_bytes + b->workspace_bytes;
}

}  // namespace

Result<DeviceMemory> plan_device_memory(const Deployment& d) {
  DeviceMemory m;
  const engine::EngineConfig& c = d.engine;
  const ParallelConfig& p = d.parallel;
  STRATA_ASSIGN_OR_RETURN(ModelShape shape, model_shape(d.model));
  if (p.tp < 1 || p.pp < 1 || p.ep < 1 || p.tp * p.pp != d.num_devices)
    return invalid_argument("--tensor-parallel-size " + std::to_string(p.tp) +
                            " x --pipeline-parallel-size " + std::to_string(p.pp) + " is " +
                            std::to_string(p.tp * p.pp) + " devices, but --hardware gives " +
                            std::to_string(d.num_devices));
  if (shape.num_heads % p.tp != 0)
    return invalid_argument("--tensor-parallel-size " + std::to_string(p.tp) + " must divide the " +
                            std::to_string(shape.num_heads) + " attention heads");
  if (p.pp > shape.num_layers)
    return invalid_argument("--pipeline-parallel-size " + std::to_string(p.pp) +
                            " is more than the " + std::to_string(shape.num_layers) + " layers");
  STRATA_ASSIGN_OR_RETURN(
      const std::vector<ShardRange> stages,
      pipeline_layer_ranges(shape.num_layers, static_cast<int>(p.pp), p.layer_partition));
  // What the engine itself estimates and plans with (Worker::create): the target's weights by
  // class, the workspaces (with a draft model's or MTP layer's), the KV spec and dtype.
  STRATA_ASSIGN_OR_RETURN(const engine::EngineMemoryEstimate whole,
                          engine::estimate_engine_memory(c, d.threads));
  m.model_weights = whole.target.weights;
  m.kv_spec = whole.target.kv_spec;
  m.kv_dtype = whole.kv_dtype;
  m.kv_fp8_ds_mla = whole.kv_fp8_ds_mla;
  const int64_t T = c.scheduler.max_num_batched_tokens;
  if (p.tp == 1 && p.pp == 1) {
    m.weights = whole.target.weights;
    m.activation_bytes = whole.inputs.workspace_bytes;
    m.kv_bytes_per_token = whole.inputs.kv_bytes_per_token;
    m.stage_layers = shape.num_layers;
    m.plan = engine::plan_memory(
        device_inputs(d, whole, m.weights.total(), m.activation_bytes, m.kv_bytes_per_token, 0));
    return m;
  }

  // Each stage's tensor-parallel rank 0, estimated by the engine for its place (the model's
  // per-rank accounting: its shard, its stage's layers, its gather scratch in the workspace). The
  // device reported is the tightest one: the fewest KV tokens, or a refusal.
  bool have_estimate = false;
  for (size_t s = 0; s < stages.size(); ++s) {
    Place place = place_of(p, stages[s], static_cast<int>(s));
    engine::EngineConfig rank = c;
    rank.model.parallel = place.parallel;
    Result<engine::EngineMemoryEstimate> est = engine::estimate_engine_memory(rank, d.threads);
    if (!est.ok()) {
      // An architecture the engine cannot split this way yet: the division below.
      if (est.status().code() == StatusCode::kUnimplemented) break;
      return est.status().with_context("tensor-parallel rank 0 of pipeline stage " +
                                       std::to_string(s));
    }
    have_estimate = true;
    Result<engine::MemoryPlan> plan = engine::plan_memory(
        device_inputs(d, *est, est->target.weights.total(), est->inputs.workspace_bytes,
                      est->inputs.kv_bytes_per_token, 0));
    if (s == 0 || tighter(plan, m.plan)) {
      m.weights = est->target.weights;
      m.activation_bytes = est->inputs.workspace_bytes;
      m.kv_bytes_per_token = est->inputs.kv_bytes_per_token;
      m.stage = static_cast<int>(s);
      m.stage_layers = stages[s].size();
      m.plan = std::move(plan);
    }
  }
  if (have_estimate) return m;

  // Fallback: the whole model's classes divided as the engine splits them (model/parallel.h):
  // attention by heads (MLA's q_a/kv_a and the indexer replicated), dense MLPs and shared experts
  // by rows, routed experts whole (ceil(E / tp) of E on rank 0), the embedding and output head by
  // vocabulary rows on the first and last stage, router and norms replicated.
  const WeightBytesByClass& w = m.model_weights;
  const int64_t L = shape.num_layers;
  int64_t attention_split = w.attention, attention_replicated = 0;
  if (shape.mla) {
    const double rep = static_cast<double>(shape.attention_replicated_params());
    const double all = rep + static_cast<double>(shape.attention_sharded_params());
    attention_replicated = static_cast<int64_t>(static_cast<double>(w.attention) * rep / all);
    attention_split = w.attention - attention_replicated;
  }
  const int64_t experts_on_rank = shape.num_experts > 0 ? ceil_div(shape.num_experts, p.tp) : 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    const int64_t layers = stages[s].size();
    auto layer_share = [&](int64_t total, int64_t divisor) {
      return ceil_div(ceil_div(total, divisor) * layers, L);
    };
    WeightBytesByClass sw;
    sw.attention = layer_share(attention_split, p.tp) + layer_share(attention_replicated, 1);
    sw.dense_mlp = layer_share(w.dense_mlp, p.tp);
    sw.routed_experts =
        shape.num_experts > 0
            ? ceil_div(layer_share(w.routed_experts, 1) * experts_on_rank, shape.num_experts)
            : 0;
    sw.shared_experts = layer_share(w.shared_experts, p.tp);
    sw.router = layer_share(w.router, 1);
    sw.other = layer_share(w.other, 1);
    if (s == 0) sw.embedding = ceil_div(w.embedding, p.tp);
    if (s + 1 == stages.size()) sw.lm_head = ceil_div(w.lm_head, p.tp);
    // The gather scratch the decoder adds under tensor parallelism (DecoderModel::
    // tp_workspace_floats: a local slice and tp received ones of the widest gathered row).
    int64_t comm = 0;
    if (p.tp > 1) {
      const int64_t widest =
          std::max({shape.hidden, 2 * ceil_div(shape.dense_ffn, p.tp),
                    2 * ceil_div(shape.shared_ffn, p.tp), shape.attention_output_width() / p.tp});
      const int64_t local =
          std::max(T * widest, c.model.limits.max_logit_rows * ceil_div(shape.vocab, p.tp));
      comm = (1 + p.tp) * local * static_cast<int64_t>(sizeof(float));
      if (shape.num_experts > 0)
        comm = std::max(comm, (1 + p.tp) * T * shape.top_k * shape.hidden *
                                  static_cast<int64_t>(sizeof(float)));
    }
    KvSpec device = m.kv_spec;
    device.num_layers = layers;
    if (device.has_v)
      device.num_kv_heads = std::max<int64_t>(1, ceil_div(device.num_kv_heads, p.tp));
    int64_t kv = device.bytes_per_token(m.kv_dtype, m.kv_fp8_ds_mla) +
                 whole.inputs.draft_kv_bytes_per_token;  // a draft's KV is not split
    engine::MemoryPlanInputs in = device_inputs(
        d, whole, sw.total(), whole.inputs.workspace_bytes + comm, kv, T > 0 ? comm / T : 0);
    if (m.kv_spec.hybrid()) {
      // A hybrid layout (DeepSeek-V4: one shared K=V head, replicated on every tensor-parallel
      // rank) by block: the stage's layers' block bytes; the per-sequence state of the whole
      // model (an upper bound for a stage).
      int64_t block = 0;
      for (int64_t l = stages[s].begin; l < stages[s].end; ++l)
        block += m.kv_spec.layer_block_bytes(l, in.block_size, m.kv_dtype);
      in.kv_block_bytes = block + whole.inputs.draft_kv_bytes_per_token * in.block_size;
      kv = (in.kv_block_bytes + in.block_size - 1) / in.block_size;
      in.kv_bytes_per_token = whole.inputs.draft_kv_bytes_per_token;
    }
    Result<engine::MemoryPlan> plan = engine::plan_memory(in);
    if (s == 0 || tighter(plan, m.plan)) {
      for (const auto& [dtype, b] : w.by_dtype) sw.by_dtype[dtype] = ceil_div(b * layers, L * p.tp);
      m.weights = sw;
      m.activation_bytes = whole.inputs.workspace_bytes;
      m.communication_bytes = comm;
      m.kv_bytes_per_token = kv;
      m.stage = static_cast<int>(s);
      m.stage_layers = layers;
      m.plan = std::move(plan);
    }
  }
  return m;
}

std::string format_memory_report(const Deployment& d, const DeviceMemory& m) {
  std::ostringstream o;
  const engine::EngineConfig& c = d.engine;
  char line[256];
  o << "Model: " << d.model.summary() << "\n";
  o << "Hardware: " << d.num_devices << " x " << d.hardware.name << " ("
    << bytes(d.device_memory_bytes) << " each"
    << (d.hardware.placeholder ? "; its speed figures are estimates: measure them with --calibrate"
                               : "")
    << ")"
    << "; TP " << d.parallel.tp << ", PP " << d.parallel.pp << ", EP " << d.parallel.ep << "\n";
  if (d.parallel.pp > 1)
    o << "Per device (tensor-parallel rank 0 of pipeline stage " << m.stage << ", layers "
      << m.stage_layers << ": the tightest device):\n";
  else
    o << "Per device" << (d.parallel.tp > 1 ? " (tensor-parallel rank 0)" : "") << ":\n";
  auto row = [&](const char* name, int64_t per_device, int64_t whole) {
    if (per_device == 0 && whole == 0) return;
    std::snprintf(line, sizeof line, "  %-22s %12s   (whole model %s)\n", name,
                  bytes(per_device).c_str(), bytes(whole).c_str());
    o << line;
  };
  const WeightBytesByClass& s = m.weights;
  const WeightBytesByClass& w = m.model_weights;
  row("embedding", s.embedding, w.embedding);
  row("attention", s.attention, w.attention);
  row("dense MLP", s.dense_mlp, w.dense_mlp);
  row("routed experts", s.routed_experts, w.routed_experts);
  row("shared experts", s.shared_experts, w.shared_experts);
  row("router", s.router, w.router);
  row("output head", s.lm_head, w.lm_head);
  row("norms and other", s.other, w.other);
  row("weights", s.total(), w.total());
  std::string types;
  for (const auto& [dtype, b] : w.by_dtype)
    types += (types.empty() ? "" : ", ") + dtype + " " + bytes(b);
  o << "  matmul weights by type (whole model): " << types << "\n";
  std::snprintf(line, sizeof line, "  %-22s %12s   (--max-num-batched-tokens %lld)\n",
                "activations", bytes(m.activation_bytes).c_str(),
                static_cast<long long>(c.scheduler.max_num_batched_tokens));
  o << line;
  if (m.communication_bytes > 0) {
    std::snprintf(line, sizeof line, "  %-22s %12s   (estimated: all-gather scratch)\n",
                  "communication buffers", bytes(m.communication_bytes).c_str());
    o << line;
  } else if (d.parallel.tp > 1) {
    o << "  (the activations include the tensor-parallel all-gather scratch)\n";
  }
  if (m.kv_spec.hybrid()) {
    o << "  KV (hybrid layout): "
      << (m.kv_spec.describe
              ? m.kv_spec.describe(m.kv_dtype, c.cache.block_size, c.scheduler.max_model_len)
              : std::to_string(m.kv_bytes_per_token) + " bytes per token on average")
      << "\n";
  } else {
    o << "  KV per token: " << m.kv_bytes_per_token << " bytes (" << dtype_name(m.kv_dtype) << ", "
      << (m.kv_spec.has_v ? "K and V" : "MLA latent row")
      << (m.kv_spec.aux_dim > 0
              ? " + indexer key of " + std::to_string(m.kv_spec.aux_dim) + " values"
              : std::string());
    if (m.kv_fp8_ds_mla)
      o << "; fp8_ds_mla: " << ds_mla_row_bytes(m.kv_spec.head_dim, m.kv_spec.latent_dim)
        << " bytes latent"
        << (m.kv_spec.aux_dim > 0
                ? " + " + std::to_string(m.kv_spec.aux_dim + 4) + " bytes indexer key"
                : std::string())
        << " per layer";
    o << ")\n";
  }
  if (!m.plan.ok()) {
    o << "Refused, as the engine would: " << m.plan.status().message() << "\n";
    return o.str();
  }
  const engine::MemoryPlan& p = *m.plan;
  o << "  budget " << bytes(p.memory_budget) << " (--gpu-memory-utilization "
    << c.cache.gpu_memory_utilization << "): KV cache " << bytes(p.kv_bytes) << " = "
    << p.num_blocks << " blocks of " << p.block_size << " = " << p.num_tokens() << " tokens\n";
  if (p.num_state_slots > 0)
    o << "  per-sequence state (window and compressor rows): " << bytes(p.state_bytes()) << " = "
      << p.num_state_slots << " slots of " << bytes(p.state_bytes_per_slot) << " ("
      << p.max_running_seqs << " running"
      << (p.num_snapshot_slots > 0
              ? ", " + std::to_string(p.num_snapshot_slots) + " prefix-cache snapshots"
              : std::string())
      << ")\n";
  o << "  max_model_len " << c.scheduler.max_model_len << ": "
    << p.num_tokens() / std::max<int64_t>(1, c.scheduler.max_model_len)
    << " requests at full length fit at once; max_num_seqs " << c.scheduler.max_num_seqs << "\n";
  return o.str();
}

}  // namespace strata::plan
