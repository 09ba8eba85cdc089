// DeepSeek-V4's hot loops (DeepseekV4ForCausalLM, model/deepseek_v4.cpp): the MXFP4 routed-expert
// matmul, the lightning indexer's scores over fp8 keys and the sparse attention of one token over
// its gathered rows (sliding window + compressed rows, one shared K=V head, learned sinks).
//
// Each has a plain version (the arithmetic the model had, written for clarity; the reference and
// portable tables run it) and AVX2 / AVX-512 variants picked through KernelOps (null: plain).
// The AVX2 variants keep the AVX-512 lane layout (16 lanes as two 8-lane halves) and the same
// operations per lane, so avx2 and avx512 give bit-identical results; against the plain version
// they differ only in the order of the sums (and FMA rounding, and the exp polynomial), within
// the bounds the parity tests state (tests/kernels/dsv4_test.cpp). Every result depends only on
// its own row / token / head and never on the batch, the thread count or the split of the work.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/ops.h"

namespace strata {

// y [m, n] = x [m, k] @ W^T with W [n, k] in MXFP4: packed [n, k / 2] bytes (element 2j in the
// low nibble of byte j, 2j + 1 in the high one; e2m1: sign bit 3, {0, .5, 1, 1.5, 2, 3, 4, 6})
// and scales [n, k / 32] e8m0 bytes (2^(e - 127), 0xff NaN). k % 32 == 0. Rows of W split over
// `pool` (may be null). Plain: per row and group of 32 a sequential f32 dot of the decoded
// weights and x, times the scale, added to the row's sum. SIMD: per group, lane l (of 16) is
// fma(w[2l+1], x[2l+1], w[2l] * x[2l]) times the scale added into lane l's sum; the 16 lanes then
// sum as (l + (l + 8)) and hsum8's fixed order.
void mxfp4_matmul(const KernelOps& ops, const float* x, const uint8_t* packed,
                  const uint8_t* scales, int64_t m, int64_t n, int64_t k, float* y,
                  ThreadPool* pool);

// Lightning-indexer scores of one query over n compressed keys:
//   scores[j] = sum_h max(0, q_h . k_j) * w[h] * scale
// q [heads, dim], w [heads]; rows[j] points at key j as the engine's fp8 indexer cache holds it:
// dim e4m3 bytes then one f32 scale (k = e4m3 * scale). Plain: per head a sequential dot, the
// heads summed in order. SIMD: heads in the lanes, per head one FMA chain over the dims (the
// plain dot's order, FMA-rounded), the heads then summed lane-wise (head h in lane h % 16) and
// across the lanes.
// With a pool (may be null), called outside a parallel region, the keys split over its threads
// in chunks of 256 (a key's score is the same whichever chunk computes it).
void dsv4_indexer_scores(const KernelOps& ops, const float* q, const float* w, int heads,
                         int64_t dim, float scale, const uint8_t* const* rows, int64_t n,
                         float* scores, ThreadPool* pool = nullptr);

// Attention of one token over n rows kv [n, dim] that are both keys and values, per head h:
//   logit_j = scale * q_h . kv_j,  out_h = sum_j e^(logit_j - mx) kv_j / (e^(sink_h - mx) +
//   sum_j e^(logit_j - mx)),  mx = max(sink_h, logit_j)
// q, out [heads, dim]. The SIMD variants need dim % 16 == 0 (else the plain one runs): per (head,
// row) the dot as 16 lane chains over the dims summed as in mxfp4_matmul, exp by the exp8/exp16
// polynomial, the denominator's terms lane-wise (row j in lane j % 16), each output value one FMA
// chain over the rows.
// With a pool (may be null), called outside a parallel region, the heads split over its threads in
// blocks of 4 (a head's output does not depend on the other heads).
void dsv4_attention(const KernelOps& ops, const float* q, int heads, int64_t dim, const float* kv,
                    int64_t n, const float* sinks, float scale, float* out,
                    ThreadPool* pool = nullptr);

// One K=V row of V4's fp8 KV layout (model/deepseek_v4_ops.h Fp8KvBlockLayout) to f32:
// out[i] = e4m3(data[i]) * 2^(scales[i / 64] - 127) for i < nope, then the rope bf16 values at
// data + nope. nope % 64 == 0. Every variant gives the same bits (exact products).
void dsv4_unpack_fp8_row(const KernelOps& ops, const uint8_t* data, const uint8_t* scales,
                         int64_t nope, int64_t rope, float* out);

namespace kernels {
void mxfp4_matmul_plain(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t m,
                        int64_t n, int64_t k, float* y, ThreadPool* pool);
void mxfp4_matmul_avx2(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t m,
                       int64_t n, int64_t k, float* y, ThreadPool* pool);
void mxfp4_matmul_avx512(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t m,
                         int64_t n, int64_t k, float* y, ThreadPool* pool);
void dsv4_indexer_scores_plain(const float* q, const float* w, int heads, int64_t dim, float scale,
                               const uint8_t* const* rows, int64_t n, float* scores);
void dsv4_indexer_scores_avx2(const float* q, const float* w, int heads, int64_t dim, float scale,
                              const uint8_t* const* rows, int64_t n, float* scores);
void dsv4_indexer_scores_avx512(const float* q, const float* w, int heads, int64_t dim, float scale,
                                const uint8_t* const* rows, int64_t n, float* scores);
void dsv4_attention_plain(const float* q, int heads, int64_t dim, const float* kv, int64_t n,
                          const float* sinks, float scale, float* out);
void dsv4_attention_avx2(const float* q, int heads, int64_t dim, const float* kv, int64_t n,
                         const float* sinks, float scale, float* out);
void dsv4_attention_avx512(const float* q, int heads, int64_t dim, const float* kv, int64_t n,
                           const float* sinks, float scale, float* out);

void dsv4_unpack_fp8_row_plain(const uint8_t* data, const uint8_t* scales, int64_t nope,
                               int64_t rope, float* out);
void dsv4_unpack_fp8_row_avx2(const uint8_t* data, const uint8_t* scales, int64_t nope,
                              int64_t rope, float* out);
void dsv4_unpack_fp8_row_avx512(const uint8_t* data, const uint8_t* scales, int64_t nope,
                                int64_t rope, float* out);

// 2^(e - 127) for every e8m0 byte (0xff: NaN), as floats (e = 0 gives the subnormal 2^-127).
const float* e8m0_float_table();
// x [m, k] -> [m, k] with each group of 32 values reordered as its 16 even-indexed values then
// its 16 odd-indexed ones (the SIMD variants' layout).
void mxfp4_deinterleave_x(const float* x, int64_t m, int64_t k, float* out);
}  // namespace kernels

}  // namespace strata
