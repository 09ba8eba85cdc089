// `strata plan --calibrate`: this machine's figures for the cost model, measured through the real
// engine. measure_steps() runs a grid of batches (prefills of growing size, chunked prefills at
// growing context, decodes of growing batch at two contexts) through an Engine and times every
// step as the engine's step trace does (schedule, forward, sampling, output processing);
// fit_step_times() fits the cost model's step time to them
//
//   t = step_overhead_s + per_sequence_s * sampled sequences + matmul FLOPs / matmul rate
//       + attention FLOPs / attention rate + bytes / memory bandwidth
//
// (the "sum" roofline: on a CPU the cores mostly compute or wait for memory, not both) by
// non-negative least squares on relative error; calibrated_hardware() writes those figures into a
// hardware file. The FLOP and byte counts are the cost model's own (CostModel::step_cost), so
// the fitted rates are effective ones for the kernels this model's types run: calibrate with the
// model (and --dtype, --quantization, --threads) to be planned.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "plan/cost_model.h"
#include "plan/hardware.h"

namespace strata::engine {
class Engine;
}

namespace strata::plan {

// One executed step: its batch and its wall time.
struct CalibrationPoint {
  std::vector<SequenceWork> batch;
  double seconds = 0;
};

struct CalibrationOptions {
  // Phases run from the cheapest; a phase starts only while the time spent is below this (a slow
  // model measures fewer of the large batches).
  double budget_s = 120;
  int passes = 2;  // the grid runs this many times (first pass after a warm-up)
  uint64_t seed = 0;
};

// Runs the grid through `engine` (idle: no requests of its own), one point per executed step.
// Limits come from the engine's config: prefills up to --max-num-batched-tokens, batches up to
// --max-num-seqs, contexts below --max-model-len. `progress` (optional) gets one line per phase.
Result<std::vector<CalibrationPoint>> measure_steps(
    engine::Engine& engine, const CalibrationOptions& options,
    const std::function<void(const std::string&)>& progress = {});

struct CalibrationFit {
  // Seconds per unit of each term (>= 0): the step, a sampled sequence, a matmul FLOP, an
  // attention FLOP, a byte.
  double step_overhead_s = 0;
  double per_sequence_s = 0;
  double per_matmul_flop_s = 0;
  double per_attention_flop_s = 0;
  double per_byte_s = 0;
  int64_t num_points = 0;   // points fitted (after dropping outliers)
  int64_t num_dropped = 0;  // points dropped as outliers (the worst 5 % of the first fit)
  double median_error = 0;  // |predicted / measured - 1| over the fitted points
  double p90_error = 0;
  double max_error = 0;

  double predict(const StepCost& c) const;
};

// Fits the points' step times with `model`'s FLOP and byte counts (its hardware is not used).
// Errors (kInvalidArgument): fewer than 8 points, or a point with a non-positive time.
Result<CalibrationFit> fit_step_times(const CostModel& model,
                                      std::span<const CalibrationPoint> points);

// `base` (memory, links) with the fitted figures: `matmul_type`'s rate, the attention rate, the
// memory bandwidth, the step and per-sequence overheads, the "sum" roofline, efficiencies of 1
// (the figures are achieved rates). A term the fit set to zero gets a rate of 1e18 (its time is
// inside the other terms). `what` says what was measured ("llama-134m, bf16, 2 threads, ...")
// and goes into every source.
HardwareSpec calibrated_hardware(const HardwareSpec& base, const CalibrationFit& fit,
                                 ComputeType matmul_type, const std::string& what);

}  // namespace strata::plan
