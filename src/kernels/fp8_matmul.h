// Internal to kernels/: matmul over F8E4M3 block-scaled packed weights (kernels/fp8.h), and the
// variant op tables whose matmul sends F8E4M3 weights here and everything else to the variant's
// own matmul (kernel_ops() returns these).
#pragma once

#include "kernels/ops.h"

namespace strata::kernels {

// y[m, n] = sum_k x[m, k] * W[n, k] for an F8E4M3 weight. Every output element is one chain of
// multiply-adds over k in order from zero, with the weight value e4m3 * scale computed in f32 (the
// same value PackedWeight::at() gives), so results do not depend on m or the thread count.
void fp8_matmul_portable(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                         int64_t ldy, ThreadPool& pool);
void fp8_matmul_avx2(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                     int64_t ldy, ThreadPool& pool);

const KernelOps& portable_ops_with_fp8();
const KernelOps& avx2_ops_with_fp8();
// AVX-512 matmul for F32/F16/BF16 weights, the AVX2 kernels for the rest of the table.
const KernelOps& avx512_ops();

}  // namespace strata::kernels
