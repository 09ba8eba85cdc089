// The building blocks of exact tensor parallelism (model/parallel.h): weights split over the ranks
// of a tensor-parallel group by output rows only, and all-gathers that put the ranks' column
// slices of an activation back side by side. No float sum crosses ranks, so every value is the
// same dot product, in the same kernel order, as on one process (bit-identical output for any
// tensor-parallel size).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/packed_weight.h"
#include "model/layers.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/parallel.h"
#include "model/weight_source.h"

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

// The same for `parts` blocks per row: rank r's local row holds `parts` blocks of widths[r]
// values side by side; out's row holds block p of every rank at out + p * part_stride, in rank
// order. scratch: (size + 1) * T * parts * max(widths) floats.
Status gather_column_parts(Comm& comm, const float* local, int64_t ldl, int64_t T,
                           const std::vector<int64_t>& widths, int parts, float* out, int64_t ldo,
                           int64_t part_stride, float* scratch);

// Whether load_packed() reads row ranges of a model's layer weights stored as `storage` (float
// and GGUF weights; not FP8 blocks nor AWQ/GPTQ groups, which span rows: layers.h).
bool reads_row_ranges(const ModelConfig& config, const WeightSource& src,
                      std::optional<DType> storage);
// Rows [begin, end) of the [n, k] tensor `name` as a weight whose output column `offset` is row
// begin: read alone where the loader reads row ranges, else the whole tensor packed and cut to
// the panels covering them (every row's values and scales kept, PackedWeight::panel_range).
Result<RowSlice> load_rows(WeightSource& src, const ModelConfig& config, const TensorName& name,
                           int64_t n, int64_t k, int64_t begin, int64_t end, int64_t layer,
                           std::optional<DType> storage, const Fp8Quantization& fp8);
// What load_rows() holds, from the tensor's metadata.
Result<WeightPlan> plan_rows(WeightSource& src, const ModelConfig& config, const TensorName& name,
                             int64_t n, int64_t k, int64_t begin, int64_t end, int64_t layer,
                             std::optional<DType> storage, const Fp8Quantization& fp8);

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

// A SwiGLU MLP y = down(silu(gate(x)) * up(x)) split exactly over a tensor-parallel group (the
// shared experts of MoE blocks): rank r computes its rows shard_range(ffn, size, r) of gate and
// up, the ranks all-gather them into the whole [T, 2 * ffn] row of one process (gate | up), every
// rank applies the activation to the whole row as one process does (an element's rounding may
// depend on its place in a vector loop), then down is a RowSplitLinear over the whole activation.
class SplitSwiGlu {
 public:
  // <prefix>gate_proj / up_proj / down_proj.weight; par.tp_size > 1 with its group.
  static Result<SplitSwiGlu> load(WeightSource& src, const ModelConfig& config,
                                  const std::string& prefix, int64_t ffn, int64_t layer,
                                  std::optional<DType> storage, const Fp8Quantization& fp8,
                                  const ModelParallel& par);
  // The weights load() would hold (gate and up, then down), from the tensors' metadata.
  static Result<std::array<WeightPlan, 3>> plan(WeightSource& src, const ModelConfig& config,
                                                const std::string& prefix, int64_t ffn,
                                                int64_t layer, std::optional<DType> storage,
                                                const Fp8Quantization& fp8,
                                                const ModelParallel& par);

  // y[T, H] = MLP(x[T, H]). gu: [T, 2 * ffn] and act: [T, ffn] floats; scratch:
  // scratch_floats(T).
  Status forward(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                 const KernelOps& ops, ThreadPool& pool, float* gu, float* act,
                 float* scratch) const;
  int64_t scratch_floats(int64_t T) const { return scratch_floats_for(ffn_, hidden_, size_, T); }
  static int64_t scratch_floats_for(int64_t ffn, int64_t hidden, int size, int64_t T);

  int64_t bytes() const { return gate_.w.bytes() + up_.w.bytes() + down_.local().bytes(); }
  int64_t parameters() const {
    return (gate_.w.n() + up_.w.n()) * gate_.w.k() + down_.local().n() * down_.local().k();
  }
  void append_weights_in_order(std::vector<PackedWeight*>* out) {
    out->push_back(&gate_.w);
    out->push_back(&up_.w);
    out->push_back(&down_.local());
  }
  // <prefix>gate, <prefix>up (column) and <prefix>down (row), this rank's shards.
  void describe(const std::string& prefix, std::vector<LinearInfo>* out) const;

 private:
  RowSlice gate_, up_;
  RowSplitLinear down_;
  int64_t ffn_ = 0, hidden_ = 0;
  int size_ = 1;
  std::vector<int64_t> widths_;  // rows of gate (and of up) per rank
  Comm* comm_ = nullptr;
};

}  // namespace strata
