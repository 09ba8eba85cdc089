// Block-scaled FP8 weights as DeepSeek-V3/R1 (and Qwen3 FP8) checkpoints ship them: each linear
// weight [n, k] is stored as e4m3 values plus one f32 scale per block_n x block_k block (HF name
// `<name>.weight_scale_inv`, usually 128 x 128 blocks; edge blocks are partial), and
//   W[i, j] = e4m3(q[i, j]) * scale[i / block_n, j / block_k].
// In memory they stay FP8 (PackedWeight storage F8E4M3, kernels/packed_weight.h) and the matmul
// kernels dequantise on the fly (kernels/fp8_matmul*.cpp, reached through KernelOps::matmul).
#pragma once

#include <cstdint>

namespace strata {

// Number of scale blocks covering n values.
inline int64_t fp8_block_count(int64_t n, int64_t block) {
  return (n + block - 1) / block;
}

// Quantises a row-major [n, k] matrix: q [n, k] e4m3 bytes and scales row-major
// [ceil(n / block_n), ceil(k / block_k)] with scale = amax / 448 per block (1 for an all-zero
// block), q = round_to_e4m3(w / scale).
void quantize_fp8_blocks(const float* w, int64_t n, int64_t k, int64_t block_n, int64_t block_k,
                         uint8_t* q, float* scales);

// w[i, j] = e4m3(q[i, j]) * scales[i / block_n, j / block_k] (f32 product), row-major [n, k].
void dequantize_fp8_blocks(const uint8_t* q, const float* scales, int64_t n, int64_t k,
                           int64_t block_n, int64_t block_k, float* w);

}  // namespace strata
