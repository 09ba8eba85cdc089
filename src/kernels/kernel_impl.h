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
// A tile of nq query rows of sequence s (from row t0) and kv heads [g0, g0 + ng) for another
// kernel; returns false when it cannot take the tile (the AVX2 tile runs it then). The scratch
// holds acc_floats, then rows_floats, then score_floats floats.
using WideTileFn = bool (*)(const AttentionArgs& a, int s, int64_t t0, int nq, int g0, int ng,
                            float* scratch, int64_t acc_floats, int64_t rows_floats,
                            int64_t score_floats);
// The AVX2 attention's tiling and threads, with the tiles given to `wide` first.
void attention_with(const AttentionArgs& a, ThreadPool& pool, WideTileFn wide);
// Row indices of keys [j0, j0 + n) of kv head g along a block table; those rows as f32 (pointers
// into an unscaled f32 cache, else converted into buf), as the AVX2 attention reads them.
void kv_rows_of(const PagedKvLayer& kv, const int32_t* table, int64_t g, int64_t j0, int64_t n,
                int64_t* out);
void kv_rows_f32(const PagedKvLayer& kv, const std::byte* base, const float* row_scales,
                 const int64_t* rows, int64_t n, float scale, float* buf, const float** out);
}  // namespace avx2
namespace avx512 {
// ops_avx512.cpp: RMSNorm, SiLU-and-multiply and RoPE, bit-identical to the AVX2 ones.
void fill_elementwise_ops(KernelOps* ops);
// attention_avx512.cpp: prefill tiles with their query slots in the lanes (AVX2's arithmetic).
void attention(const AttentionArgs& a, ThreadPool& pool);
// matmul_avx512.cpp (compiled with AVX-512 F/BW/VL/DQ): the weight types it handles.
bool matmul_supports(DType d);
void matmul(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
            ThreadPool& pool);
}  // namespace avx512

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
