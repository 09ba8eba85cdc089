// The building blocks of exact tensor parallelism (model/parallel.h): weights split over the ranks
// of a tensor-parallel group by output rows only, and all-gathers that put the ranks' column
// slices of an activation back side by side. No float sum crosses ranks, so every value is the
// same dot product, in the same kernel order, as on one process (bit-identical output for any
// tensor-parallel size).
#pragma once

#include <cstdint>
#include <vector>

#include "core/comm.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/packed_weight.h"
#include "model/parallel.h"

namespace strata {

// Rows [begin, end) of `w`, kept as the whole panels that cover them (PackedWeight::panel_range):
// row begin is output column `offset` of a matmul with the result.
struct RowSlice {
  PackedWeight w;
  int64_t offset = 0;
};
RowSlice slice_rows(const PackedWeight& w, int64_t begin, int64_t end);

// out[T, sum of widths] = the ranks' blocks side by side, rank order: every rank passes its own
// block `local` [T, widths[rank]] (row stride ldl); widths[r] is rank r's width (known to every
// rank). `scratch` holds (size + 1) * T * max(widths) floats. `local` may point into the first
// T * max(widths) floats of scratch with ldl == max(widths) (then nothing is copied there).
Status gather_columns(Comm& comm, const float* local, int64_t ldl, int64_t T,
                      const std::vector<int64_t>& widths, float* out, int64_t ldo, float* scratch);
inline int64_t gather_columns_scratch(int size, int64_t T, int64_t max_width) {
  return (size + 1) * T * max_width;
}

// Panels of 16 rows that slice_rows(w, begin, end) keeps, and those rank `rank` of `size` keeps of
// an n-row weight split by RowSplitLinear (with the most any rank keeps): for plans that mirror
// the loaded bytes (memory_estimate.h), panels times the weight's bytes per panel.
int64_t slice_rows_panels(int64_t begin, int64_t end);
ShardRange row_split_panels(int64_t n, int size, int rank);
int64_t row_split_max_rows(int64_t n, int size);

// A linear layer split over a tensor-parallel group by output rows, in whole 16-row panels:
// rank r holds panels shard_range(panels, size, r). forward() computes this rank's rows over the
// full input and all-gathers every rank's rows into the full output. One process (no group):
// the whole weight, one matmul.
class RowSplitLinear {
 public:
  RowSplitLinear() = default;
  // Keeps this rank's panels of `full` (all of it when par.tp_size == 1).
  static RowSplitLinear split(PackedWeight full, const ModelParallel& par);
  // The same from this rank's panels already cut (rows row_split_panels(n, ...) of an n-row
  // weight).
  static RowSplitLinear from_shard(PackedWeight mine, int64_t n, const ModelParallel& par);

  // out[T, n()] = x[T, k] W^T. `scratch`: scratch_floats(T) floats (none for one process).
  Status forward(const float* x, int64_t T, int64_t ldx, float* out, int64_t ldo,
                 const KernelOps& ops, ThreadPool& pool, float* scratch) const;
  int64_t scratch_floats(int64_t T) const {
    return comm_ ? gather_columns_scratch(comm_->size(), T, max_rows_) : 0;
  }

  const PackedWeight& local() const { return w_; }
  PackedWeight& local() { return w_; }
  int64_t n() const { return n_; }  // rows of the whole weight
  bool empty() const { return n_ == 0; }

 private:
  PackedWeight w_;
  int64_t n_ = 0, max_rows_ = 0;
  std::vector<int64_t> rows_;  // per rank
  Comm* comm_ = nullptr;       // null: one process
};

}  // namespace strata
