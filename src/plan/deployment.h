// A deployment's memory per device, from the same figures and the same function the engine uses
// at start: the model's weights and activation workspace (model/memory_estimate.h: what the
// loader would allocate, without loading), the KV bytes per token of the model's KV spec, and
// engine::plan_memory() for the division of the budget and its refusals. With tensor, pipeline
// and expert parallelism (which the engine does not run yet: issue 16) each device holds its
// share of each tensor class, as vLLM shards them; with one device the figures are the engine's.
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
  WeightBytesByClass weights;        // the largest pipeline stage's share on one device
  int64_t activation_bytes = 0;      // the model's workspace and the logits buffers
  int64_t communication_bytes = 0;   // TP all-reduce, PP send and EP all-to-all buffers
  KvSpec kv_spec;                    // the whole model's
  DType kv_dtype = DType::kBF16;
  bool kv_fp8_ds_mla = false;      // the fp8_ds_mla layout (core/fp8_ds_mla.h)
  int64_t kv_bytes_per_token = 0;  // on one device
  // The engine's plan, or its refusal.
  Result<engine::MemoryPlan> plan = engine::MemoryPlan();
};

Result<DeviceMemory> plan_device_memory(const Deployment& d);

// The report `strata plan` prints.
std::string format_memory_report(const Deployment& d, const DeviceMemory& m);

}  // namespace strata::plan
