// Internal to kernels/: the variant tables and helpers they share.
#pragma once

#include "kernels/ops.h"

namespace strata::kernels {

namespace reference {
extern const KernelOps kOps;
}
namespace portable {
extern const KernelOps kOps;
}
namespace avx2 {
extern const KernelOps kOps;
}
namespace avx512 {
// matmul_avx512.cpp (compiled with AVX-512 F/BW/VL/DQ): the weight types it handles.
bool matmul_supports(DType d);
void matmul(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
            ThreadPool& pool);
}

// Query rows per tile of the AVX2 attention kernel (fewer when a sequence's scores would not fit
// the scratch); attention_scratch_floats() sizes the scratch for it.
inline constexpr int kAttentionTileRows = 16;

// Converts one cached row (slot, kv_head) of `base` (kv.k or kv.v) to f32, times `scale`.
void read_kv_row(const PagedKvLayer& kv, const std::byte* base, int64_t slot, int64_t kv_head,
                 float scale, float* out);
// Stores k/v rows at their slots (quantizing to the cache dtype; fp8 stores value / scale).
void write_kv_rows(const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t m,
                   const int64_t* slots, const PagedKvLayer& kv);

}  // namespace strata::kernels
