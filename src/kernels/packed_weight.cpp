#include "kernels/packed_weight.h"

#include <cstring>
#include <vector>

#include "core/check.h"

namespace strata {

Result<PackedWeight> PackedWeight::pack(const void* src, DType src_dtype, int64_t n, int64_t k,
                                        DType storage) {
  Part part{src, src_dtype, n};
  return pack_rows(&part, 1, k, storage);
}

Result<PackedWeight> PackedWeight::pack_rows(const Part* parts, int num_parts, int64_t k,
                                             DType storage) {
  if (storage == DType::kF8E4M3) {  // quantised here with DeepSeek's 128 x 128 blocks
    std::vector<Fp8Part> fp8;
    for (int i = 0; i < num_parts; ++i) {
      if (parts[i].dtype == DType::kF8E4M3)
        return invalid_argument("FP8 weights need their block scales (use pack_fp8_rows)");
      fp8.push_back({parts[i].data, parts[i].dtype, parts[i].n, nullptr});
    }
    return pack_fp8_rows(fp8.data(), num_parts, k, 128, 128);
  }
  if (storage != DType::kF32 && storage != DType::kF16 && storage != DType::kBF16 &&
      storage != DType::kQ8_0)
    return unimplemented(std::string("matmul weights cannot be stored as ") + dtype_name(storage));
  if (storage == DType::kQ8_0 && k % 32 != 0)
    return invalid_argument("Q8_0 weights need rows of a multiple of 32 values, got " +
                            std::to_string(k));
  PackedWeight w;
  w.dtype_ = storage;
  w.k_ = k;
  for (int i = 0; i < num_parts; ++i) {
    DType d = parts[i].dtype;
    if (!dtype_is_float(d) || d == DType::kF64)
      return unimplemented(std::string("cannot use a ") + dtype_name(d) + " tensor as a weight");
    if (d == DType::kQ8_0 && k % 32 != 0) return invalid_argument("Q8_0 rows must hold 32k values");
    w.n_ += parts[i].n;
  }
  w.data_.resize(static_cast<size_t>(w.num_panels() * w.panel_bytes()));
  std::vector<float> row(k);
  std::vector<std::byte> converted(k * 4);
  int64_t r = 0;
  for (int i = 0; i < num_parts; ++i) {
    DType sd = parts[i].dtype;
    int64_t row_bytes = dtype_bytes(sd, k);
    for (int64_t j = 0; j < parts[i].n; ++j, ++r) {
      const std::byte* src_row = static_cast<const std::byte*>(parts[i].data) + j * row_bytes;
      int64_t p = r / kPanelRows, lane = r % kPanelRows;
      std::byte* panel = w.data_.data() + p * w.panel_bytes();
      if (storage == DType::kQ8_0) {
        std::vector<BlockQ8_0> blocks(k / 32);
        if (sd == DType::kQ8_0) {
          std::memcpy(blocks.data(), src_row, row_bytes);
        } else {
          dequantize_row(sd, src_row, row.data(), k);
          quantize_row(DType::kQ8_0, row.data(), blocks.data(), k);
        }
        for (int64_t b = 0; b < k / 32; ++b) {
          std::byte* blk = panel + b * kQ8PanelBlockBytes;
          std::memcpy(blk + lane * 2, &blocks[b].d, 2);
          auto* qs = reinterpret_cast<int8_t*>(blk + kPanelRows * 2);
          for (int c = 0; c < 32; ++c) qs[c * kPanelRows + lane] = blocks[b].qs[c];
        }
        continue;
      }
      int64_t es = dtype_block_bytes(storage);
      const std::byte* conv = src_row;
      if (sd != storage) {
        dequantize_row(sd, src_row, row.data(), k);
        quantize_row(storage, row.data(), converted.data(), k);
        conv = converted.data();
      }
      std::byte* dst = panel + lane * es;
      if (es == 2) {
        for (int64_t c = 0; c < k; ++c) std::memcpy(dst + c * kPanelRows * 2, conv + c * 2, 2);
      } else {
        for (int64_t c = 0; c < k; ++c) std::memcpy(dst + c * kPanelRows * 4, conv + c * 4, 4);
      }
    }
  }
  return w;
}

float PackedWeight::at(int64_t row, int64_t col) const {
  STRATA_DCHECK(row < n_ && col < k_);
  int64_t p = row / kPanelRows, lane = row % kPanelRows;
  const std::byte* pan = panel(p);
  if (dtype_ == DType::kF8E4M3) {
    const std::byte* blk = pan + fp8_block_offset(col / fp8_block_k_);
    float scale;
    std::memcpy(&scale, blk + lane * 4, 4);
    const auto q =
        static_cast<uint8_t>(blk[kFp8ScaleBytes + (col % fp8_block_k_) * kPanelRows + lane]);
    return fp8_e4m3_to_f32(q) * scale;
  }
  if (dtype_ == DType::kQ8_0) {
    const std::byte* blk = pan + (col / 32) * kQ8PanelBlockBytes;
    uint16_t d;
    std::memcpy(&d, blk + lane * 2, 2);
    auto* qs = reinterpret_cast<const int8_t*>(blk + kPanelRows * 2);
    return f16_to_f32(d) * static_cast<float>(qs[(col % 32) * kPanelRows + lane]);
  }
  float v;
  dequantize_row(dtype_, pan + (col * kPanelRows + lane) * dtype_block_bytes(dtype_), &v, 1);
  return v;
}

Status PackedWeight::place_in_order(std::span<PackedWeight* const> weights,
                                    DeviceAllocator& allocator) {
  constexpr size_t kAlign = AlignedBuffer::kAlignment;
  size_t total = 0;
  for (const PackedWeight* w : weights)
    if (!w->empty()) total += (static_cast<size_t>(w->bytes()) + kAlign - 1) / kAlign * kAlign;
  if (total == 0) return ok_status();
  STRATA_ASSIGN_OR_RETURN(DeviceBuffer buffer, allocator.allocate(total, MemoryUse::kWeights));
  auto arena = std::make_shared<DeviceBuffer>(std::move(buffer));
  size_t offset = 0;
  for (PackedWeight* w : weights) {
    if (w->empty()) continue;
    const size_t n = static_cast<size_t>(w->bytes()), padded = (n + kAlign - 1) / kAlign * kAlign;
    std::byte* dst = arena->data() + offset;
    std::memcpy(dst, w->data(), n);
    std::memset(dst + n, 0, padded - n);
    w->data_ = AlignedBuffer();
    w->arena_ = arena;
    w->arena_data_ = dst;
    offset += padded;
  }
  return ok_status();
}

}  // namespace strata
