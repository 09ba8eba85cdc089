// A deployment's memory per device, from the same figures and the same function the engine uses
// at start: the model's weights and activation workspace (model/memory_estimate.h: what the
// loader would allocate, without loading), the KV bytes per token of the model's KV spec, and
// engine::plan_memory() for the division of the budget and its refusals. With tensor and pipeline
// parallelism the figures are the engine's estimate for the device's place (LoadOptions::parallel:
// tensor-parallel rank 0, the largest shard, of each pipeline stage; the tightest stage is
// reported), the same figures a rank started there plans with. Only where the engine cannot split
// an architecture yet (kUnimplemented) are the whole model's classes divided as the engine would
// split them (model/parallel.h), with an estimated all-gather scratch.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine_config.h"
#include "engine/memory_plan.h"
#include "model/memory_estimate.h"
#include "plan/cost_model.h"
#include "plan/hardware.h"

namespace strata::plan {

struct Deployment {
  engine::EngineConfig engine;  // resolve_engine_config() applied
  ModelConfig model;
  HardwareSpec hardware;
  int64_t num_devices = 1;
  // The memory of one device: hardware.memory_bytes, or this machine's RAM for --hardware local.
  int64_t device_memory_bytes = 0;
  ParallelConfig parallel;
  int threads = 1;  // compute threads of a CPU worker (its activation workspace depends on them)
};

// One device's share.
struct DeviceMemory {
  WeightBytesByClass model_weights;  // the whole model (all devices)
  WeightBytesByClass weights;        // the reported device's share
  int stage = 0;                     // the reported device's pipeline stage
  int64_t stage_layers = 0;          // its layers
  // The model's workspace and the logits buffers; from the engine's per-rank estimate, the
  // tensor-parallel all-gather scratch included.
  int64_t activation_bytes = 0;
  // Only in the divided fallback: the estimated all-gather scratch, beside activation_bytes.
  // 0 otherwise (the engine's estimate counts it in activation_bytes; the pipeline sends and
  // receives straight from the hidden states, no buffer).
  int64_t communication_bytes = 0;
  KvSpec kv_spec;  // the whole model's
  DType kv_dtype = DType::kBF16;
  bool kv_fp8_ds_mla = false;      // the fp8_ds_mla layout (core/fp8_ds_mla.h)
  int64_t kv_bytes_per_token = 0;  // on the reported device (its layers, its KV heads)
  // The engine's plan, or its refusal.
  Result<engine::MemoryPlan> plan = engine::MemoryPlan();
};

Result<DeviceMemory> plan_device_memory(const Deployment& d);

// The report `strata plan` prints.
std::string format_memory_report(const Deployment& d, const DeviceMemory& m);

}  // namespace strata::plan
