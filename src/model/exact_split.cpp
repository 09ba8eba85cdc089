#include "model/exact_split.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace strata {

RowSlice slice_rows(const PackedWeight& w, int64_t begin, int64_t end) {
  STRATA_CHECK(0 <= begin && begin <= end && end <= w.n())
      << "rows [" << begin << ", " << end << ") of a weight of " << w.n();
  const int64_t first = begin / kPanelRows, last = (end + kPanelRows - 1) / kPanelRows;
  return {w.panel_range(first, last - first), begin - first * kPanelRows};
}

int64_t slice_rows_panels(int64_t begin, int64_t end) {
  return (end + kPanelRows - 1) / kPanelRows - begin / kPanelRows;
}

ShardRange row_split_panels(int64_t n, int size, int rank) {
  return shard_range((n + kPanelRows - 1) / kPanelRows, size, rank);
}

int64_t row_split_max_rows(int64_t n, int size) {
  int64_t most = 0;
  for (int r = 0; r < size; ++r) {
    const ShardRange p = row_split_panels(n, size, r);
    most = std::max(most, std::min(n, p.end * kPanelRows) - std::min(n, p.begin * kPanelRows));
  }
  return most;
}

Status gather_columns(Comm& comm, const float* local, int64_t ldl, int64_t T,
                      const std::vector<int64_t>& widths, float* out, int64_t ldo,
                      float* scratch) {
  const int size = comm.size();
  STRATA_CHECK(static_cast<int>(widths.size()) == size) << "widths for every rank";
  const int64_t w = *std::max_element(widths.begin(), widths.end());
  float* send = scratch;
  float* recv = scratch + T * w;
  const int64_t mine = widths[comm.rank()];
  if (local != send || ldl != w)
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(send + t * w, local + t * ldl, static_cast<size_t>(mine) * sizeof(float));
  // The padding past a rank's width travels but is never read.
  STRATA_RETURN_IF_ERROR(all_gather_floats(comm, send, T * w, recv));
  int64_t col = 0;
  for (int r = 0; r < size; ++r) {
    const float* block = recv + r * T * w;
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(out + t * ldo + col, block + t * w, static_cast<size_t>(widths[r]) * 4);
    col += widths[r];
  }
  return ok_status();
}

RowSplitLinear RowSplitLinear::split(PackedWeight full, const ModelParallel& par) {
  if (par.tp_size <= 1 || par.tp == nullptr) {
    RowSplitLinear s;
    s.n_ = full.n();
    s.max_rows_ = s.n_;
    s.rows_ = {s.n_};
    s.w_ = std::move(full);
    return s;
  }
  const ShardRange mine = row_split_panels(full.n(), par.tp_size, par.tp_rank);
  return from_shard(full.panel_range(mine.begin, mine.size()), full.n(), par);
}

RowSplitLinear RowSplitLinear::from_shard(PackedWeight mine, int64_t n, const ModelParallel& par) {
  STRATA_CHECK(par.tp_size > 1 && par.tp != nullptr) << "a shard without its group";
  RowSplitLinear s;
  s.n_ = n;
  s.comm_ = par.tp;
  for (int r = 0; r < par.tp_size; ++r) {
    const ShardRange p = row_split_panels(n, par.tp_size, r);
    const int64_t rows = std::min(n, p.end * kPanelRows) - std::min(n, p.begin * kPanelRows);
    s.rows_.push_back(rows);
    s.max_rows_ = std::max(s.max_rows_, rows);
  }
  STRATA_CHECK(mine.n() == s.rows_[par.tp_rank])
      << "a shard of " << mine.n() << " rows for " << s.rows_[par.tp_rank];
  s.w_ = std::move(mine);
  return s;
}

Status RowSplitLinear::forward(const float* x, int64_t T, int64_t ldx, float* out, int64_t ldo,
                               const KernelOps& ops, ThreadPool& pool, float* scratch) const {
  if (comm_ == nullptr) {
    ops.matmul(x, T, ldx, w_, out, ldo, pool);
    return ok_status();
  }
  // This rank's rows straight into the all-gather's send block.
  if (!w_.empty()) ops.matmul(x, T, ldx, w_, scratch, max_rows_, pool);
  return gather_columns(*comm_, scratch, max_rows_, T, rows_, out, ldo, scratch);
}

}  // namespace strata
