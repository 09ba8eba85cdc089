// FP8 block-scaled weights: quantisation helpers and packing into the F8E4M3 panel layout
// (kernels/packed_weight.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "kernels/fp8.h"
#include "kernels/packed_weight.h"

namespace strata {

void quantize_fp8_blocks(const float* w, int64_t n, int64_t k, int64_t block_n, int64_t block_k,
                         uint8_t* q, float* scales) {
  const int64_t nbk = fp8_block_count(k, block_k);
  for (int64_t rb = 0; rb < fp8_block_count(n, block_n); ++rb) {
    const int64_t r0 = rb * block_n, r1 = std::min(n, r0 + block_n);
    for (int64_t cb = 0; cb < nbk; ++cb) {
      const int64_t c0 = cb * block_k, c1 = std::min(k, c0 + block_k);
      float amax = 0;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * k + c]));
      const float scale = amax > 0 ? amax / kFp8E4M3Max : 1.0f;
      scales[rb * nbk + cb] = scale;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) q[r * k + c] = f32_to_fp8_e4m3(w[r * k + c] / scale);
    }
  }
}

void dequantize_fp8_blocks(const uint8_t* q, const float* scales, int64_t n, int64_t k,
                           int64_t block_n, int64_t block_k, float* w) {
  const int64_t nbk = fp8_block_count(k, block_k);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      w[r * k + c] = fp8_e4m3_to_f32(q[r * k + c]) * scales[(r / block_n) * nbk + c / block_k];
}

Result<PackedWeight> PackedWeight::pack_fp8_rows(const Fp8Part* parts, int num_parts, int64_t k,
                                                 int64_t block_n, int64_t block_k) {
  if (block_n <= 0 || block_k <= 0 || block_k % kPanelRows != 0)
    return unimplemented("FP8 weight blocks of " + std::to_string(block_n) + " x " +
                         std::to_string(block_k) +
                         " are not supported (the column block must be a multiple of 16)");
  if (k <= 0) return invalid_argument("FP8 weight with no columns");
  PackedWeight w;
  w.dtype_ = DType::kF8E4M3;
  w.k_ = k;
  w.fp8_block_k_ = block_k;
  for (int i = 0; i < num_parts; ++i) {
    const DType d = parts[i].dtype;
    if (d == DType::kF8E4M3 && parts[i].scales == nullptr)
      return invalid_argument("FP8 weight part without its block scales");
    if (d != DType::kF8E4M3 && (!dtype_is_float(d) || d == DType::kF64))
      return unimplemented(std::string("cannot use a ") + dtype_name(d) + " tensor as a weight");
    if (d == DType::kQ8_0 && k % 32 != 0) return invalid_argument("Q8_0 rows must hold 32k values");
    w.n_ += parts[i].n;
  }
  w.data_.resize(static_cast<size_t>(w.num_panels() * w.panel_bytes()));
  std::memset(w.data_.data(), 0, w.data_.size());
  const int64_t nbk = fp8_block_count(k, block_k);
  std::vector<float> block_vals;
  std::vector<uint8_t> block_q;
  std::vector<float> block_scales;
  int64_t row0 = 0;  // first row of the current part in the packed weight
  for (int i = 0; i < num_parts; ++i) {
    const Fp8Part& part = parts[i];
    const uint8_t* q = nullptr;
    const float* scales = part.scales;
    if (part.dtype == DType::kF8E4M3) {
      q = static_cast<const uint8_t*>(part.data);
    } else {
      // Quantise this part block row by block row.
      block_vals.resize(static_cast<size_t>(part.n * k));
      const int64_t row_bytes = dtype_bytes(part.dtype, k);
      for (int64_t r = 0; r < part.n; ++r)
        dequantize_row(part.dtype, static_cast<const std::byte*>(part.data) + r * row_bytes,
                       block_vals.data() + r * k, k);
      block_q.resize(block_vals.size());
      block_scales.resize(static_cast<size_t>(fp8_block_count(part.n, block_n) * nbk));
      quantize_fp8_blocks(block_vals.data(), part.n, k, block_n, block_k, block_q.data(),
                          block_scales.data());
      q = block_q.data();
      scales = block_scales.data();
    }
    for (int64_t j = 0; j < part.n; ++j) {
      const int64_t r = row0 + j, p = r / kPanelRows, lane = r % kPanelRows;
      std::byte* pan = w.data_.data() + p * w.panel_bytes();
      for (int64_t b = 0; b < nbk; ++b) {
        std::byte* blk = pan + w.fp8_block_offset(b);
        const float s = scales[(j / block_n) * nbk + b];
        std::memcpy(blk + lane * 4, &s, 4);
        const int64_t c0 = b * block_k, c1 = std::min(k, c0 + block_k);
        auto* dst = reinterpret_cast<uint8_t*>(blk + kFp8ScaleBytes);
        for (int64_t c = c0; c < c1; ++c) dst[(c - c0) * kPanelRows + lane] = q[j * k + c];
      }
    }
    row0 += part.n;
  }
  return w;
}

}  // namespace strata
