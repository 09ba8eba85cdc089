// Hardware files: what the planner knows about one device (a GPU, or a CPU socket) and the links
// between devices. Plain JSON, one file per device; the shipped ones live in hardware/ at the
// repository root and are compiled into the binary. docs/plan.md describes every field.
//
//   {"name": "h200", "kind": "gpu", "memory_bytes": 150754820096,
//    "memory_bandwidth_bytes_per_s": 4.8e12,
//    "peak_flops": {"bf16": 989.4e12, "fp8": 1978.9e12, ...},      dense, not sparse
//    "devices_per_node": 8,
//    "intra_node_link": {"bandwidth_bytes_per_s": 450e9, "latency_s": 3e-6},   per direction
//    "inter_node_link": {"bandwidth_bytes_per_s": 50e9, "latency_s": 5e-6},
//    "step_overhead_s": 1e-4,
//    "efficiency": {"flops": 0.6, "memory_bandwidth": 0.8, "link_bandwidth": 0.8},
//    "placeholder": false, "sources": {"memory_bytes": "...", ...}}
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::plan {

enum class DeviceKind : uint8_t { kGpu, kCpu };
const char* device_kind_name(DeviceKind k);

// The number formats a matmul can run in, each with its own peak rate.
enum class ComputeType : uint8_t { kBF16, kFP16, kFP8, kINT8, kFP32 };
const char* compute_type_name(ComputeType t);  // "bf16", "fp16", "fp8", "int8", "fp32"

struct LinkSpec {
  std::string name;                  // free text, e.g. "NVLink 4 through NVSwitch"
  double bandwidth_bytes_per_s = 0;  // one direction, per device
  double latency_s = 0;              // per message / collective step
};

// Achievable fractions of the peaks (assumptions unless calibrated), each in (0, 1].
struct Efficiency {
  double flops = 0.6;
  double memory_bandwidth = 0.8;
  double link_bandwidth = 0.8;
};

// How a step's compute time and memory time combine: kMax, the roofline (a GPU overlaps loads
// with math), or kSum (a CPU core mostly waits for memory or computes, measured by --calibrate).
enum class Roofline : uint8_t { kMax, kSum };

struct HardwareSpec {
  std::string name;
  std::string description;
  DeviceKind kind = DeviceKind::kGpu;
  int64_t memory_bytes = 0;                 // per device, as the driver / OS reports it
  double memory_bandwidth_bytes_per_s = 0;  // per device
  // Dense peak FLOP/s (ops/s for int8) per compute type; absent: not supported by the device.
  std::map<ComputeType, double> peak_flops;
  int64_t devices_per_node = 1;
  LinkSpec intra_node_link;
  LinkSpec inter_node_link;
  double step_overhead_s = 0;  // fixed time per engine step (launches, host work)
  // Per sampled sequence and step (logits processing, sampling, detokenization, streaming).
  double per_sequence_s = 0;
  // The serving host's time to admit one request (HTTP, tokenization, hand-off), one after
  // another (plan/simulator.h). Default 1e-4: this engine's server admits a burst of requests
  // 20-100 us apart (step traces on the 2-core development machine).
  double request_admission_s = 1e-4;
  // The rate of attention's FLOPs (scores and weighted values) when it differs from the matmul
  // rate of the activations' type; 0: that rate. Efficiency applies as to peak_flops.
  double attention_flops_per_s = 0;
  Roofline roofline = Roofline::kMax;
  Efficiency efficiency;
  // True for a file of estimates that `strata plan --calibrate` is meant to replace.
  bool placeholder = false;
  // Where each figure comes from, keyed by field path ("peak_flops.bf16", "intra_node_link.
  // latency_s", ...). Optional in user files; every shipped file has one per figure.
  std::map<std::string, std::string> sources;
  // Where the spec was loaded from: "built-in h200" or the file's path.
  std::string origin;

  // Peak rate for matmuls in `t`. A type the device lacks runs as the next one it has, the way
  // kernels fall back (fp8 and int8 weights are widened to bf16, then fp16, then fp32).
  double peak_flops_for(ComputeType t) const;
};

// Parses and validates one hardware file's text. `origin` names it in errors ("hardware file
// 'h200.json': ..."). Errors (kInvalidArgument) name the field: missing, wrong type, not a
// positive number, unknown field (typos are not ignored), efficiency outside (0, 1].
Result<HardwareSpec> parse_hardware_json(const std::string& text, const std::string& origin);

// The JSON text of a spec (every field, sources included), parse_hardware_json()'s inverse:
// parsing it gives back an equal spec (origin aside).
std::string hardware_to_json(const HardwareSpec& hw);

// A built-in name ("h200", see builtin_hardware_names()) or a path to a JSON file (anything
// containing '/' or ending in ".json"). kNotFound for an unknown name, listing the built-in ones.
Result<HardwareSpec> load_hardware(const std::string& name_or_path);

// The names of the shipped hardware files, sorted.
std::vector<std::string> builtin_hardware_names();

// `--hardware DEVICE[xCOUNT]`: "h200x8" -> {"h200", 8}, "l20x24", "my-gpu.json" -> count 1,
// "./gpus/a.jsonx4" -> {"./gpus/a.json", 4}. The count is a decimal integer >= 1 after the last
// 'x'; "h200x0", "h200x" and an empty device are kInvalidArgument.
struct HardwareArg {
  std::string device;  // a built-in name or a path, for load_hardware()
  int64_t count = 1;
};
Result<HardwareArg> parse_hardware_arg(const std::string& text);

}  // namespace strata::plan
