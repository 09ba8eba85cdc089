// Matmul weights in the kernels' panel layout.
//
// A weight W is logically [n, k] (PyTorch Linear: y = x W^T). It is stored as ceil(n/16) panels of
// 16 rows; inside a panel the 16 values of one k are adjacent:
//   F32/F16/BF16:  element (row, col) at panel = row/16, offset (panel*k + col)*16 + row%16
//   Q8_0:          per panel and per 32-column block: 16 f16 scales, then 32x16 int8 (col-major
//                  within the block as above): value = scale[row] * q. k must be a multiple of 32.
// Rows past n in the last panel are zero. Every kernel computes each output element as one
// sequential chain of fused multiply-adds over k = 0..k-1 from the same f32 weight values, so a
// token's result never depends on the batch it is in, how many rows were computed, or the thread
// count (batch invariance; see docs/architecture.md).
#pragma once

#include <cstdint>

#include "core/aligned_buffer.h"
#include "core/dtype.h"
#include "core/status.h"

namespace strata {

constexpr int kPanelRows = 16;
constexpr int kQ8PanelBlockBytes = kPanelRows * 2 + 32 * kPanelRows;  // 544

class PackedWeight {
 public:
  PackedWeight() = default;
  // Packs a row-major [n, k] matrix of `src_dtype` into `storage` (F32, F16, BF16 or Q8_0).
  // Q8_0 -> Q8_0 keeps the exact blocks; float -> Q8_0 quantizes per row block of 32.
  static Result<PackedWeight> pack(const void* src, DType src_dtype, int64_t n, int64_t k,
                                   DType storage);
  // Appends rows: packs several row-major matrices with the same k on top of each other (fused
  // QKV or gate/up projections). Every part must have the same k.
  struct Part {
    const void* data;
    DType dtype;
    int64_t n;
  };
  static Result<PackedWeight> pack_rows(const Part* parts, int num_parts, int64_t k, DType storage);

  DType dtype() const { return dtype_; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t num_panels() const { return (n_ + kPanelRows - 1) / kPanelRows; }
  // Bytes of one panel (all k).
  int64_t panel_bytes() const {
    return dtype_ == DType::kQ8_0 ? (k_ / 32) * kQ8PanelBlockBytes
                                  : k_ * kPanelRows * dtype_block_bytes(dtype_);
  }
  const std::byte* panel(int64_t p) const { return data_.data() + p * panel_bytes(); }
  // Bytes a matmul streams per token when reading every weight once.
  int64_t bytes() const { return num_panels() * panel_bytes(); }
  // The f32 value of element (row, col); for references and tests.
  float at(int64_t row, int64_t col) const;
  bool empty() const { return n_ == 0; }

 private:
  DType dtype_ = DType::kF32;
  int64_t n_ = 0, k_ = 0;
  AlignedBuffer data_;
};

}  // namespace strata
