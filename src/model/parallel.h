// Where one rank sits in a tensor x pipeline (x expert) parallel deployment, as the model sees it:
// which slice of each sharded weight it loads and computes, which layers it runs, and the groups it
// talks to (core/comm.h). World rank = pp_rank * tp_size + tp_rank (tensor parallel innermost, as
// vLLM lays ranks out), so the ranks of one stage are neighbours (one host in the usual layout).
//
// Tensor parallelism here is exact: greedy output is bit-identical for any TP, PP and MPI library,
// because no float sum ever crosses ranks. A linear layer that Megatron splits row-parallel (O,
// down) is split here by its output rows as well, after an all-gather of its input; every output
// value is then the same dot product over the full input, in the same kernel order, as on one
// process. Communication per layer: all-gathers of the attention output, the MLP intermediate and
// the two hidden-state halves, instead of two all-reduces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/status.h"

namespace strata {

// [begin, end) of item `rank` when `n` items are split over `size` ranks as evenly as possible
// (the first n % size ranks get one more).
struct ShardRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
inline ShardRange shard_range(int64_t n, int size, int rank) {
  const int64_t base = n / size, extra = n % size;
  const int64_t begin = rank * base + (rank < extra ? rank : extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

struct ModelParallel {
  int tp_size = 1, tp_rank = 0;
  int pp_size = 1, pp_rank = 0;
  bool expert_parallel = false;  // routed experts split over the TP ranks (whole experts)
  // The layers this rank's stage runs: [first_layer, end_layer). end_layer = -1: to the last.
  int64_t first_layer = 0, end_layer = -1;
  // The ranks of this stage (size tp_size, rank tp_rank); null when tp_size == 1.
  Comm* tp = nullptr;
  // The ranks with this tp_rank, one per stage (size pp_size, rank pp_rank); null when pp_size
  // == 1.
  Comm* pp = nullptr;

  bool is_first_stage() const { return pp_rank == 0; }
  bool is_last_stage() const { return pp_rank == pp_size - 1; }
  int world_rank() const { return pp_rank * tp_size + tp_rank; }
  bool trivial() const { return tp_size == 1 && pp_size == 1; }
};

// The layer ranges of `pp_size` stages over `num_layers` layers: `partition` (the
// STRATA_PP_LAYER_PARTITION value, comma-separated layer counts, one per stage, summing to
// num_layers, each >= 1) or, when empty, an even split whose remainder goes one layer each to the
// stages before the last, counting back from it (the last stage also holds the output head, the
// first the embedding): 61 layers over 3 stages are 20, 21, 20. Errors name what is wrong.
Result<std::vector<ShardRange>> pipeline_layer_ranges(int64_t num_layers, int pp_size,
                                                      const std::string& partition);

}  // namespace strata
