// Row-wide float helpers for the sampler, vectorized: SSE2 everywhere (portable), AVX2 or
// AVX-512 (F, BW, VL, DQ) when the CPU has them, chosen at run time. Every variant gives
// bit-identical results, so seeded sampling picks the same tokens on every x86-64 machine.
// exp_approx (exp_approx.h) is the fast exp; std::exp is its reference in the tests.
#pragma once

#include <cstdint>
#include <string_view>

#include "sampling/exp_approx.h"

namespace strata::sampling {

// Largest value of x: [n]; NaN is ignored; -inf when n == 0 or nothing is larger.
float max_value(const float* x, int64_t n);

// out[i] = x[i] >= threshold ? exp_approx((x[i] - m) * inv_t) : 0   (NaN gives 0).
// x, out: [n]
void exp_weights(const float* x, int64_t n, float m, float inv_t, float threshold, float* out);

// exp_weights block by block: block_sums[b] = sum_range(out, b * block, (b + 1) * block)
// (clipped to n). block_sums: [ceil(n / block)]
void exp_weights_blocks(const float* x, int64_t n, float m, float inv_t, float threshold,
                        float* out, int64_t block, double* block_sums);

// out[c] = max_value of x[c * chunk, min(n, (c + 1) * chunk)). out: [ceil(n / chunk)]
void chunk_max(const float* x, int64_t n, int64_t chunk, float* out);

// sum_i exp_approx(x[i] - m) over the finite x[i] (NaN and -inf add nothing), in double.
double sum_exp(const float* x, int64_t n, float m);

// Number of i with x[i] >= v (NaN never counts).
int64_t count_at_least(const float* x, int64_t n, float v);

// Smallest finite value of x: [n] (NaN and -inf ignored); +inf when there is none.
float min_finite(const float* x, int64_t n);

// The histogram bucket of each token: int((x[i] - lo) * scale) clamped to [0, num_buckets - 1]
// when w[i] > 0, else num_buckets (a spare bucket for the dropped tokens). Monotone in x[i].
// Precondition: num_buckets < 65535.
void bucket_indices(const float* x, const float* w, int64_t n, float lo, float scale,
                    int32_t num_buckets, uint16_t* out);

// The same bucket for every token (NaN and -inf land in bucket 0).
void bucket_indices_all(const float* x, int64_t n, float lo, float scale, int32_t num_buckets,
                        uint16_t* out);

// Keeps w[i] where x[i] > v, or x[i] == v and i <= last_tie; zeroes it elsewhere.
void keep_at_or_above(const float* x, int64_t n, float v, int64_t last_tie, float* w);

// sum of w[begin, end) in double with a fixed association (four interleaved partial sums).
double sum_range(const float* w, int64_t begin, int64_t end);

// The builds of the loops above, slowest first. All give bit-identical results; they differ in
// speed only.
enum class VectorMathVariant { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };
// "portable", "avx2", "avx512" (for logs and `strata bench sampler`).
const char* vector_math_variant_name(VectorMathVariant v);
// Whether this CPU runs `v` (cpuid; portable always).
bool vector_math_supported(VectorMathVariant v);
// The variant in use: the fastest one this CPU supports that is no faster than the cap.
VectorMathVariant vector_math_variant();
// Caps the variant (process-wide; kAvx512, the default, is no cap). Tests use it to run each
// variant; the engine passes its --kernels choice (vector_math_variant_for_kernels), so
// `--kernels avx2` also keeps the sampler on AVX2 and `--kernels portable` on SSE2.
void vector_math_limit(VectorMathVariant max);
// The cap matching a kernel variant name (kernels/backend.h): reference and portable -> portable,
// avx2 -> avx2, anything else (auto, avx512, avx512_bf16, ...) -> no cap.
VectorMathVariant vector_math_variant_for_kernels(std::string_view kernels);

}  // namespace strata::sampling
