// The AVX-512 build of vector_math_kernels.h (compiled with -mavx512f/bw/vl/dq; called only when
// the CPU has them, see vector_math.cpp). The same loops as the SSE2 and AVX2 builds, with FP
// contraction off and a fixed association, so the results are bit-identical to theirs: the wider
// registers (and mask registers for the selects) change the speed only.
#if defined(__x86_64__)

#include "sampling/vector_math_kernels.h"

namespace strata::sampling::avx512 {

float max_value(const float* x, int64_t n) {
  return vk::max_value(x, n);
}
void exp_weights(const float* x, int64_t n, float m, float inv_t, float threshold, float* out) {
  vk::exp_weights(x, n, m, inv_t, threshold, out);
}
double sum_exp(const float* x, int64_t n, float m) {
  return vk::sum_exp(x, n, m);
}
void exp_weights_blocks(const float* x, int64_t n, float m, float inv_t, float threshold,
                        float* out, int64_t block, double* block_sums) {
  vk::exp_weights_blocks(x, n, m, inv_t, threshold, out, block, block_sums);
}
void chunk_max(const float* x, int64_t n, int64_t chunk, float* out) {
  vk::chunk_max(x, n, chunk, out);
}
int64_t count_at_least(const float* x, int64_t n, float v) {
  return vk::count_at_least(x, n, v);
}
float min_finite(const float* x, int64_t n) {
  return vk::min_finite(x, n);
}
void bucket_indices_all(const float* x, int64_t n, float lo, float scale, int32_t num_buckets,
                        uint16_t* out) {
  vk::bucket_indices_all(x, n, lo, scale, num_buckets, out);
}
void bucket_indices(const float* x, const float* w, int64_t n, float lo, float scale,
                    int32_t num_buckets, uint16_t* out) {
  vk::bucket_indices(x, w, n, lo, scale, num_buckets, out);
}
void keep_at_or_above(const float* x, int64_t n, float v, int64_t last_tie, float* w) {
  vk::keep_at_or_above(x, n, v, last_tie, w);
}
double sum_range(const float* w, int64_t begin, int64_t end) {
  return vk::sum_range(w, begin, end);
}

}  // namespace strata::sampling::avx512

#endif
