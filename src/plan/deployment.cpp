#include "plan/deployment.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/strings.h"
#include "engine/worker.h"

namespace strata::plan {
namespace {

std::string bytes(int64_t b) {
  return format_bytes(static_cast<double>(b));
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
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
  // What the engine itself estimates and plans with (Worker::create): the target's weights by
  // class, the workspaces (with a draft model's or MTP layer's), the KV spec and dtype.
  STRATA_ASSIGN_OR_RETURN(const engine::EngineMemoryEstimate est,
                          engine::estimate_engine_memory(c, d.threads));
  m.model_weights = est.target.weights;

  // Weights: each class divided as vLLM shards it, and the layers over the pipeline stages (the
  // first stage holds the embedding, the last the output head; the largest stage is reported).
  const WeightBytesByClass& w = m.model_weights;
  const int64_t L = shape.num_layers;
  const int64_t stage_layers = ceil_div(L, p.pp);
  auto layer_share = [&](int64_t total, int64_t divisor) {
    return ceil_div(ceil_div(total, divisor) * stage_layers, L);
  };
  // MLA's fused q_a | kv_a projection is replicated on every TP rank; the rest of attention split.
  int64_t attention_split = w.attention, attention_replicated = 0;
  if (shape.mla) {
    const double rep = static_cast<double>(shape.attention_replicated_params());
    const double all = rep + static_cast<double>(shape.attention_sharded_params());
    attention_replicated = static_cast<int64_t>(static_cast<double>(w.attention) * rep / all);
    attention_split = w.attention - attention_replicated;
  }
  WeightBytesByClass& s = m.weights;
  s.attention = layer_share(attention_split, p.tp) + layer_share(attention_replicated, 1);
  s.dense_mlp = layer_share(w.dense_mlp, p.tp);
  s.routed_experts = layer_share(w.routed_experts, p.tp);  // ep ranks x tp / ep slices
  s.shared_experts = layer_share(w.shared_experts, p.tp);
  s.router = layer_share(w.router, 1);
  s.other = layer_share(w.other, 1);
  const int64_t first = ceil_div(w.embedding, p.tp), last = ceil_div(w.lm_head, p.tp);
  if (p.pp == 1) {
    s.embedding = first;
    s.lm_head = last;
  } else if (first >= last) {  // the heavier end stage
    s.embedding = first;
  } else {
    s.lm_head = last;
  }
  for (const auto& [dtype, b] : w.by_dtype) s.by_dtype[dtype] = ceil_div(b, d.num_devices);

  // Activations: the engine's workspaces for the token budget and its logits buffers (a device
  // runs the whole batch through its layers); communication buffers for the batch's hidden
  // states: TP all-reduce (in and out), PP send and receive, EP dispatch and combine.
  m.activation_bytes = est.inputs.workspace_bytes;
  const int64_t T = c.scheduler.max_num_batched_tokens;
  const int64_t act = 2;  // bf16 hidden states on the links
  const int64_t hidden_batch = T * shape.hidden * act;
  if (p.tp > 1) m.communication_bytes += 2 * hidden_batch;
  if (p.pp > 1) m.communication_bytes += 2 * hidden_batch;
  // EP: each rank sends and receives its share of the batch's top_k expert inputs (in and out).
  if (p.ep > 1 && shape.num_experts > 0)
    m.communication_bytes += 2 * ceil_div(hidden_batch * shape.top_k, p.ep);

  // KV: KV heads split over TP ranks (each rank holds at least one, replicated beyond that), the
  // MLA latent row on every rank; the stage's layers.
  m.kv_spec = est.target.kv_spec;
  m.kv_dtype = est.kv_dtype;
  m.kv_fp8_ds_mla = est.kv_fp8_ds_mla;
  KvSpec device = m.kv_spec;
  device.num_layers = stage_layers;
  if (device.has_v) device.num_kv_heads = std::max<int64_t>(1, ceil_div(device.num_kv_heads, p.tp));
  m.kv_bytes_per_token = device.bytes_per_token(m.kv_dtype, m.kv_fp8_ds_mla) +
                         est.inputs.draft_kv_bytes_per_token;  // a draft's KV is not split

  engine::MemoryPlanInputs in = est.inputs;
  in.device_memory_bytes = d.device_memory_bytes;
  in.weight_bytes = s.total() + est.draft_weight_bytes;
  in.workspace_bytes = m.activation_bytes + m.communication_bytes;
  in.kv_bytes_per_token = m.kv_bytes_per_token;
  const int64_t comm_per_token = T > 0 ? m.communication_bytes / T : 0;
  in.workspace_for_tokens = [engine_ws = est.inputs.workspace_for_tokens,
                             comm_per_token](int64_t tokens) {
    const int64_t ws = engine_ws(tokens);  // the largest int64 when it cannot be estimated
    const int64_t comm = comm_per_token * tokens;
    return ws > std::numeric_limits<int64_t>::max() - comm ? std::numeric_limits<int64_t>::max()
                                                           : ws + comm;
  };
  m.plan = engine::plan_memory(in);
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
  o << "Per device (the largest pipeline stage):\n";
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
    std::snprintf(line, sizeof line, "  %-22s %12s\n", "communication buffers",
                  bytes(m.communication_bytes).c_str());
    o << line;
  }
  o << "  KV per token: " << m.kv_bytes_per_token << " bytes (" << dtype_name(m.kv_dtype) << ", "
    << (m.kv_spec.has_v ? "K and V" : "MLA latent row")
    << (m.kv_spec.aux_dim > 0 ? " + indexer key of " + std::to_string(m.kv_spec.aux_dim) + " values"
                              : std::string());
  if (m.kv_fp8_ds_mla)
    o << "; fp8_ds_mla: " << ds_mla_row_bytes(m.kv_spec.head_dim, m.kv_spec.latent_dim)
      << " bytes latent"
      << (m.kv_spec.aux_dim > 0
              ? " + " + std::to_string(m.kv_spec.aux_dim + 4) + " bytes indexer key"
              : std::string())
      << " per layer";
  o << ")\n";
  if (!m.plan.ok()) {
    o << "Refused, as the engine would: " << m.plan.status().message() << "\n";
    return o.str();
  }
  const engine::MemoryPlan& p = *m.plan;
  o << "  budget " << bytes(p.memory_budget) << " (--gpu-memory-utilization "
    << c.cache.gpu_memory_utilization << "): KV cache " << bytes(p.kv_bytes) << " = "
    << p.num_blocks << " blocks of " << p.block_size << " = " << p.num_tokens() << " tokens\n";
  o << "  max_model_len " << c.scheduler.max_model_len << ": "
    << p.num_tokens() / std::max<int64_t>(1, c.scheduler.max_model_len)
    << " requests at full length fit at once; max_num_seqs " << c.scheduler.max_num_seqs << "\n";
  return o.str();
}

}  // namespace strata::plan
