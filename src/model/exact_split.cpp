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

bool reads_row_ranges(const ModelConfig& c, const WeightSource& src, std::optional<DType> lin) {
  return !c.fp8 && lin != DType::kF8E4M3 && src.int_quant() == nullptr;
}

Result<RowSlice> load_rows(WeightSource& src, const ModelConfig& c, const TensorName& name,
                           int64_t n, int64_t k, int64_t begin, int64_t end, int64_t layer,
                           std::optional<DType> lin, const Fp8Quantization& fp8) {
  if (reads_row_ranges(c, src, lin)) {
    STRATA_ASSIGN_OR_RETURN(PackedWeight w,
                            load_packed(src, {{name, n, begin, end}}, k, layer, lin, fp8));
    return RowSlice{std::move(w), 0};
  }
  STRATA_ASSIGN_OR_RETURN(PackedWeight whole, load_packed(src, {{name, n}}, k, layer, lin, fp8));
  return slice_rows(whole, begin, end);
}

Result<WeightPlan> plan_rows(WeightSource& src, const ModelConfig& c, const TensorName& name,
                             int64_t n, int64_t k, int64_t begin, int64_t end, int64_t layer,
                             std::optional<DType> lin, const Fp8Quantization& fp8) {
  if (reads_row_ranges(c, src, lin))
    return plan_packed(src, {{name, n, begin, end}}, k, layer, lin, fp8);
  STRATA_ASSIGN_OR_RETURN(WeightPlan p, plan_packed(src, {{name, n}}, k, layer, lin, fp8));
  const int64_t all = (p.n + kPanelRows - 1) / kPanelRows;
  p.bytes = all == 0 ? 0 : p.bytes / all * slice_rows_panels(begin, end);
  return p;
}

Status gather_columns(Comm& comm, const float* local, int64_t ldl, int64_t T,
                      const std::vector<int64_t>& widths, float* out, int64_t ldo, float* scratch) {
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

Status gather_column_parts(Comm& comm, const float* local, int64_t ldl, int64_t T,
                           const std::vector<int64_t>& widths, int parts, float* out, int64_t ldo,
                           int64_t part_stride, float* scratch) {
  const int size = comm.size();
  const int64_t w = *std::max_element(widths.begin(), widths.end()), row = parts * w;
  float* send = scratch;
  float* recv = scratch + T * row;
  const int64_t mine = widths[comm.rank()];
  for (int64_t t = 0; t < T; ++t)
    for (int p = 0; p < parts; ++p)
      std::memcpy(send + t * row + p * w, local + t * ldl + p * mine,
                  static_cast<size_t>(mine) * sizeof(float));
  STRATA_RETURN_IF_ERROR(all_gather_floats(comm, send, T * row, recv));
  int64_t col = 0;
  for (int r = 0; r < size; ++r) {
    const float* block = recv + r * T * row;
    for (int64_t t = 0; t < T; ++t)
      for (int p = 0; p < parts; ++p)
        std::memcpy(out + t * ldo + p * part_stride + col, block + t * row + p * w,
                    static_cast<size_t>(widths[r]) * sizeof(float));
    col += widths[r];
  }
  return ok_status();
}

namespace {

std::string mlp_name(const std::string& prefix, const char* what) {
  return prefix + what + ".weight";
}

}  // namespace

Result<SplitSwiGlu> SplitSwiGlu::load(WeightSource& src, const ModelConfig& c,
                                      const std::string& prefix, int64_t ffn, int64_t layer,
                                      std::optional<DType> storage, const Fp8Quantization& fp8,
                                      const ModelParallel& par) {
  STRATA_CHECK(par.tp_size > 1 && par.tp != nullptr) << "a split MLP without its group";
  const int64_t H = c.hidden_size;
  const std::string g = mlp_name(prefix, "gate_proj"), u = mlp_name(prefix, "up_proj"),
                    d = mlp_name(prefix, "down_proj");
  SplitSwiGlu m;
  m.ffn_ = ffn;
  m.hidden_ = H;
  m.size_ = par.tp_size;
  m.comm_ = par.tp;
  for (int r = 0; r < par.tp_size; ++r)
    m.widths_.push_back(shard_range(ffn, par.tp_size, r).size());
  const ShardRange f = shard_range(ffn, par.tp_size, par.tp_rank);
  STRATA_ASSIGN_OR_RETURN(m.gate_, load_rows(src, c, TensorName{g.c_str(), ""}, ffn, H, f.begin,
                                             f.end, layer, storage, fp8));
  STRATA_ASSIGN_OR_RETURN(m.up_, load_rows(src, c, TensorName{u.c_str(), ""}, ffn, H, f.begin,
                                           f.end, layer, storage, fp8));
  const ShardRange p = row_split_panels(H, par.tp_size, par.tp_rank);
  STRATA_ASSIGN_OR_RETURN(
      RowSlice down,
      load_rows(src, c, TensorName{d.c_str(), ""}, H, ffn, std::min(H, p.begin * kPanelRows),
                std::min(H, p.end * kPanelRows), layer, storage, fp8));
  m.down_ = RowSplitLinear::from_shard(std::move(down.w), H, par);
  return m;
}

Result<std::array<WeightPlan, 3>> SplitSwiGlu::plan(WeightSource& src, const ModelConfig& c,
                                                    const std::string& prefix, int64_t ffn,
                                                    int64_t layer, std::optional<DType> storage,
                                                    const Fp8Quantization& fp8,
                                                    const ModelParallel& par) {
  const int64_t H = c.hidden_size;
  const std::string g = mlp_name(prefix, "gate_proj"), u = mlp_name(prefix, "up_proj"),
                    d = mlp_name(prefix, "down_proj");
  const ShardRange f = shard_range(ffn, par.tp_size, par.tp_rank);
  const ShardRange p = row_split_panels(H, par.tp_size, par.tp_rank);
  std::array<WeightPlan, 3> out;
  STRATA_ASSIGN_OR_RETURN(out[0], plan_rows(src, c, TensorName{g.c_str(), ""}, ffn, H, f.begin,
                                            f.end, layer, storage, fp8));
  STRATA_ASSIGN_OR_RETURN(out[1], plan_rows(src, c, TensorName{u.c_str(), ""}, ffn, H, f.begin,
                                            f.end, layer, storage, fp8));
  STRATA_ASSIGN_OR_RETURN(out[2], plan_rows(src, c, TensorName{d.c_str(), ""}, H, ffn,
                                            std::min(H, p.begin * kPanelRows),
                                            std::min(H, p.end * kPanelRows), layer, storage, fp8));
  return out;
}

int64_t SplitSwiGlu::scratch_floats_for(int64_t ffn, int64_t hidden, int size, int64_t T) {
  const int64_t w = shard_range(ffn, size, 0).size();  // the widest shard
  // The gathers (gate | up, then down's rows), then the local gate and up outputs (covering
  // panels: at most w + 30 columns each).
  return std::max(gather_columns_scratch(size, T, 2 * w),
                  gather_columns_scratch(size, T, row_split_max_rows(hidden, size))) +
         2 * T * (w + 2 * kPanelRows);
}

Status SplitSwiGlu::forward(const float* x, int64_t ldx, int64_t T, float* y, int64_t ldy,
                            const KernelOps& ops, ThreadPool& pool, float* gu, float* act,
                            float* scratch) const {
  const int64_t w = widths_[comm_->rank()];
  const int64_t gather =
      std::max(gather_columns_scratch(size_, T, 2 * widths_[0]),
               gather_columns_scratch(size_, T, row_split_max_rows(hidden_, size_)));
  float* g = scratch + gather;
  float* u = g + T * gate_.w.n();
  float* local = gu;  // [T, 2 * w] this rank's gate | up, before the whole row overwrites it
  if (T > 0 && w > 0) {
    ops.matmul(x, T, ldx, gate_.w, g, gate_.w.n(), pool);
    ops.matmul(x, T, ldx, up_.w, u, up_.w.n(), pool);
  }
  // gu doubles as the local block: rank-local rows are copied out to the send block first.
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(local + t * 2 * w, g + t * gate_.w.n() + gate_.offset, w * sizeof(float));
    std::memcpy(local + t * 2 * w + w, u + t * up_.w.n() + up_.offset, w * sizeof(float));
  }
  STRATA_RETURN_IF_ERROR(
      gather_column_parts(*comm_, local, 2 * w, T, widths_, 2, gu, 2 * ffn_, ffn_, scratch));
  ops.silu_mul(gu, 2 * ffn_, T, ffn_, act, ffn_, pool);
  return down_.forward(act, T, ffn_, y, ldy, ops, pool, scratch);
}

void SplitSwiGlu::describe(const std::string& prefix, std::vector<LinearInfo>* out) const {
  auto add = [&](const std::string& name, const PackedWeight& w, Sharding s) {
    out->push_back({prefix + name, w.n(), w.k(), w.dtype(), s, w.bytes()});
  };
  add("gate", gate_.w, Sharding::kColumn);
  add("up", up_.w, Sharding::kColumn);
  add("down", down_.local(), Sharding::kRow);
}

}  // namespace strata
