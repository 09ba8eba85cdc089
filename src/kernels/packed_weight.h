// Matmul weights in the kernels' panel layout.
//
// A weight W is logically [n, k] (PyTorch Linear: y = x W^T). It is stored as ceil(n/16) panels of
// 16 rows; inside a panel the 16 values of one k are adjacent:
//   F32/F16/BF16:  element (row, col) at panel = row/16, offset (panel*k + col)*16 + row%16
//   Q8_0 and the GGUF block quants (Q4_0 ... Q6_K, IQ4_NL, IQ4_XS): the integer panel layout of
//                  kernels/quant_weight.h (per super-block: f16 scales, sub-block scales/mins,
//                  then unsigned q in dot-product order). k must be a multiple of the format's
//                  super-block (32 or 256). Their matmuls quantize activations to int8 per row.
//   W4G / W8G:     AWQ / GPTQ integer weights (s * (q - zp) per row and group of input
//                  columns), in the same integer panel layout (quant_weight.h); the layout,
//                  which depends on the group size, is the weight's quant_layout().
//   F8E4M3:        block-scaled FP8 (DeepSeek/Qwen FP8 checkpoints: e4m3 weights with one f32
//                  `weight_scale_inv` per block_n x block_k block). Per panel and per block of
//                  fp8_block_k() columns (the last may be shorter): 16 f32 scales (each row's
//                  block scale), then cols x 16 e4m3 bytes: value = scale[row] * e4m3. Panels are
//                  padded to 64 bytes. Kernels in kernels/fp8_matmul*.cpp.
// Rows past n in the last panel are zero. Every kernel computes each output element as one
// sequential chain of fused multiply-adds over k = 0..k-1 from the same f32 weight values, so a
// token's result never depends on the batch it is in, how many rows were computed, or the thread
// count (batch invariance; see docs/architecture.md).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "core/aligned_buffer.h"
#include "core/device_memory.h"
#include "core/dtype.h"
#include "core/status.h"
#include "kernels/quant_weight.h"

namespace strata {

constexpr int kPanelRows = 16;

class PackedWeight {
 public:
  PackedWeight() = default;
  // Packs a row-major [n, k] matrix of `src_dtype` into `storage` (F32, F16, BF16, Q8_0 or a
  // GGUF quant). A block-quantized source packed as its own type keeps the exact values; float ->
  // Q8_0 quantizes per row block of 32; other conversions into a GGUF quant are refused.
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
  // pack_rows()'s checks of the storage itself: a dtype matmul weights can be packed into from
  // float rows, whose blocks divide k.
  static Status check_storage(DType storage, int64_t k);

  // F8E4M3 block-scaled weight from parts stacked as rows (kernels/fp8_weight.cpp). An F8E4M3
  // part comes with its checkpoint scales: `scales` row-major [ceil(n / block_n),
  // ceil(k / block_k)], value = e4m3 * scale. Any other float part is quantised here, each
  // block_n x block_k block with scale = amax / 448. block_k must be a multiple of 16.
  struct Fp8Part {
    const void* data;
    DType dtype;
    int64_t n;
    const float* scales = nullptr;  // F8E4M3 parts only
  };
  static Result<PackedWeight> pack_fp8_rows(const Fp8Part* parts, int num_parts, int64_t k,
                                            int64_t block_n, int64_t block_k);

  // W4G (bits 4) or W8G (bits 8) from integer parts stacked as rows (AWQ/GPTQ checkpoints,
  // unpacked by the loader): element (r, c) of a part is f16(scales[r][c/group]) *
  // (q[r][c] - zeros[r][c/group]), stored exactly. q < 2^bits; zeros in [0, 2^bits] (GPTQ's v1
  // format can mean 2^bits). group must divide k and be a multiple of 32 (grouped_int_layout).
  struct IntPart {
    const uint8_t* q;        // [n, k]
    const uint16_t* zeros;   // [n, k / group]
    const uint16_t* scales;  // [n, k / group] f16 bits
    int64_t n;
  };
  static Result<PackedWeight> pack_int_rows(const IntPart* parts, int num_parts, int64_t k,
                                            int bits, int64_t group);

  // A copy of panels [first, first + count) as a weight of its own: rows first * 16 up to
  // min(n(), (first + count) * 16), every value and scale unchanged, so each of its output rows is
  // computed exactly as the same row of this weight (the kernels' row independence above). What a
  // rank keeps of a weight split by output rows (model/parallel.h). The panels must exist.
  PackedWeight panel_range(int64_t first, int64_t count) const;

  DType dtype() const { return dtype_; }
  // Block-quantized weights (is_block_quant(dtype())): the panel layout of this weight.
  const QuantLayout& quant_layout() const { return layout_; }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t num_panels() const { return (n_ + kPanelRows - 1) / kPanelRows; }
  // Bytes of one panel (all k).
  int64_t panel_bytes() const { return panel_bytes_for(dtype_, k_, fp8_block_k_, layout_); }
  // The packed size of a weight without building it (memory estimates share these with the
  // weights themselves): one panel of rows of k values stored as `storage`, with F8E4M3's column
  // block `fp8_block_k`, or a block-quantized storage's `layout` (quant_layout(storage, k), or
  // grouped_int_layout() for W4G/W8G); and all ceil(n / 16) panels of a [n, k] weight.
  static int64_t panel_bytes_for(DType storage, int64_t k, int64_t fp8_block_k,
                                 const QuantLayout& layout) {
    if (storage == DType::kF8E4M3) {
      const int64_t blocks = (k + fp8_block_k - 1) / fp8_block_k;
      return (blocks * kFp8ScaleBytes + k * kPanelRows + 63) / 64 * 64;
    }
    if (is_block_quant(storage)) return k / layout.unit_cols() * layout.unit_bytes();
    return k * kPanelRows * dtype_block_bytes(storage);
  }
  static int64_t bytes_for(DType storage, int64_t n, int64_t k, int64_t fp8_block_k,
                           const QuantLayout& layout) {
    return (n + kPanelRows - 1) / kPanelRows * panel_bytes_for(storage, k, fp8_block_k, layout);
  }
  // The same for every storage but W4G/W8G (whose layout depends on the group size); k must
  // suit the storage's blocks, as pack() requires.
  static int64_t bytes_for(DType storage, int64_t n, int64_t k, int64_t fp8_block_k = 128) {
    return bytes_for(storage, n, k, fp8_block_k,
                     is_block_quant(storage) ? strata::quant_layout(storage, k) : QuantLayout{});
  }
  // F8E4M3: columns per scale block, the number of column blocks, and the byte offset of column
  // block b inside a panel (its 16 scales, then its bytes).
  static constexpr int64_t kFp8ScaleBytes = kPanelRows * 4;
  int64_t fp8_block_k() const { return fp8_block_k_; }
  int64_t fp8_num_blocks() const { return (k_ + fp8_block_k_ - 1) / fp8_block_k_; }
  int64_t fp8_block_offset(int64_t b) const {
    return b * (kFp8ScaleBytes + fp8_block_k_ * kPanelRows);
  }
  const std::byte* panel(int64_t p) const { return data() + p * panel_bytes(); }
  // Bytes a matmul streams per token when reading every weight once.
  int64_t bytes() const { return num_panels() * panel_bytes(); }
  // The f32 value of element (row, col); for references and tests.
  float at(int64_t row, int64_t col) const;
  bool empty() const { return n_ == 0; }

  // Moves the data of `weights` into one shared allocation, back to back in the given order (the
  // order a forward pass reads them), each weight's values unchanged. Decode streams every weight
  // once per token, and on the development machine weights read in ascending address order
  // stream ~6-10% faster than the same weights in separate allocations (which the allocator
  // places at descending addresses), and ~5% faster again on transparent huge pages, which the
  // CPU backend's allocator asks for. Empty weights are skipped. Pages of the new allocation are
  // touched as each weight is copied and each old buffer is freed right after, so the peak is the
  // total plus one weight. The allocation comes from `allocator` (the backend's, where the kernels
  // that read the weights run). Errors when it cannot be allocated (nothing moved then).
  static Status place_in_order(std::span<PackedWeight* const> weights,
                               DeviceAllocator& allocator = host_allocator());
  // Whether the data lives in a shared allocation made by place_in_order().
  bool placed() const { return arena_ != nullptr; }

 private:
  const std::byte* data() const { return arena_ ? arena_data_ : data_.data(); }

  DType dtype_ = DType::kF32;
  int64_t n_ = 0, k_ = 0;
  int64_t fp8_block_k_ = 1;  // F8E4M3 only
  bool quant_ = false;       // block-quantized (quant_weight.h layout)
  QuantLayout layout_;       // block-quantized only
  AlignedBuffer data_;       // own data (empty once placed)
  std::shared_ptr<const DeviceBuffer> arena_;
  const std::byte* arena_data_ = nullptr;  // this weight's bytes inside *arena_
};

}  // namespace strata
