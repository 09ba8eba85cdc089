#include "sampling/vector_math.h"

#include <atomic>
#include <string_view>

#include "sampling/vector_math_kernels.h"

namespace strata::sampling {

#if defined(__x86_64__)
// The declarations of one build of vector_math_kernels.h (vector_math_avx2.cpp,
// vector_math_avx512.cpp).
#define STRATA_VM_DECLARE                                                                         \
  float max_value(const float* x, int64_t n);                                                     \
  void exp_weights(const float* x, int64_t n, float m, float inv_t, float threshold, float* out); \
  double sum_exp(const float* x, int64_t n, float m);                                             \
  void exp_weights_blocks(const float* x, int64_t n, float m, float inv_t, float threshold,       \
                          float* out, int64_t block, double* block_sums);                         \
  void chunk_max(const float* x, int64_t n, int64_t chunk, float* out);                           \
  int64_t count_at_least(const float* x, int64_t n, float v);                                     \
  float min_finite(const float* x, int64_t n);                                                    \
  void bucket_indices_all(const float* x, int64_t n, float lo, float scale, int32_t num_buckets,  \
                          uint16_t* out);                                                         \
  void bucket_indices(const float* x, const float* w, int64_t n, float lo, float scale,           \
                      int32_t num_buckets, uint16_t* out);                                        \
  void keep_at_or_above(const float* x, int64_t n, float v, int64_t last_tie, float* w);          \
  double sum_range(const float* w, int64_t begin, int64_t end);

namespace avx2 {
STRATA_VM_DECLARE
}  // namespace avx2
namespace avx512 {
STRATA_VM_DECLARE
}  // namespace avx512
#undef STRATA_VM_DECLARE
#endif

namespace {

// The cap set by vector_math_limit() (a VectorMathVariant).
std::atomic<int> g_limit{static_cast<int>(VectorMathVariant::kAvx512)};

bool cpu_has_avx2() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__)
  static const bool has = cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return has;
#else
  return false;
#endif
}

}  // namespace

const char* vector_math_variant_name(VectorMathVariant v) {
  switch (v) {
    case VectorMathVariant::kPortable:
      return "portable";
    case VectorMathVariant::kAvx2:
      return "avx2";
    case VectorMathVariant::kAvx512:
      return "avx512";
  }
  return "?";
}

bool vector_math_supported(VectorMathVariant v) {
  switch (v) {
    case VectorMathVariant::kPortable:
      return true;
    case VectorMathVariant::kAvx2:
      return cpu_has_avx2();
    case VectorMathVariant::kAvx512:
      return cpu_has_avx512();
  }
  return false;
}

VectorMathVariant vector_math_variant() {
  const int limit = g_limit.load(std::memory_order_relaxed);
  if (limit >= static_cast<int>(VectorMathVariant::kAvx512) && cpu_has_avx512())
    return VectorMathVariant::kAvx512;
  if (limit >= static_cast<int>(VectorMathVariant::kAvx2) && cpu_has_avx2())
    return VectorMathVariant::kAvx2;
  return VectorMathVariant::kPortable;
}

void vector_math_limit(VectorMathVariant max) {
  g_limit.store(static_cast<int>(max), std::memory_order_relaxed);
}

VectorMathVariant vector_math_variant_for_kernels(std::string_view kernels) {
  if (kernels == "reference" || kernels == "portable") return VectorMathVariant::kPortable;
  if (kernels == "avx2") return VectorMathVariant::kAvx2;
  return VectorMathVariant::kAvx512;
}

#if defined(__x86_64__)
#define STRATA_VM_DISPATCH(call)       \
  switch (vector_math_variant()) {     \
    case VectorMathVariant::kAvx512:   \
      return avx512::call;             \
    case VectorMathVariant::kAvx2:     \
      return avx2::call;               \
    case VectorMathVariant::kPortable: \
      break;                           \
  }
#else
#define STRATA_VM_DISPATCH(call)
#endif

float max_value(const float* x, int64_t n) {
  STRATA_VM_DISPATCH(max_value(x, n));
  return vk::max_value(x, n);
}

void exp_weights(const float* x, int64_t n, float m, float inv_t, float threshold, float* out) {
  STRATA_VM_DISPATCH(exp_weights(x, n, m, inv_t, threshold, out));
  vk::exp_weights(x, n, m, inv_t, threshold, out);
}

void exp_weights_blocks(const float* x, int64_t n, float m, float inv_t, float threshold,
                        float* out, int64_t block, double* block_sums) {
  STRATA_VM_DISPATCH(exp_weights_blocks(x, n, m, inv_t, threshold, out, block, block_sums));
  vk::exp_weights_blocks(x, n, m, inv_t, threshold, out, block, block_sums);
}

void chunk_max(const float* x, int64_t n, int64_t chunk, float* out) {
  STRATA_VM_DISPATCH(chunk_max(x, n, chunk, out));
  vk::chunk_max(x, n, chunk, out);
}

double sum_exp(const float* x, int64_t n, float m) {
  STRATA_VM_DISPATCH(sum_exp(x, n, m));
  return vk::sum_exp(x, n, m);
}

int64_t count_at_least(const float* x, int64_t n, float v) {
  STRATA_VM_DISPATCH(count_at_least(x, n, v));
  return vk::count_at_least(x, n, v);
}

float min_finite(const float* x, int64_t n) {
  STRATA_VM_DISPATCH(min_finite(x, n));
  return vk::min_finite(x, n);
}

void bucket_indices_all(const float* x, int64_t n, float lo, float scale, int32_t num_buckets,
                        uint16_t* out) {
  STRATA_VM_DISPATCH(bucket_indices_all(x, n, lo, scale, num_buckets, out));
  vk::bucket_indices_all(x, n, lo, scale, num_buckets, out);
}

void bucket_indices(const float* x, const float* w, int64_t n, float lo, float scale,
                    int32_t num_buckets, uint16_t* out) {
  STRATA_VM_DISPATCH(bucket_indices(x, w, n, lo, scale, num_buckets, out));
  vk::bucket_indices(x, w, n, lo, scale, num_buckets, out);
}

void keep_at_or_above(const float* x, int64_t n, float v, int64_t last_tie, float* w) {
  STRATA_VM_DISPATCH(keep_at_or_above(x, n, v, last_tie, w));
  vk::keep_at_or_above(x, n, v, last_tie, w);
}

double sum_range(const float* w, int64_t begin, int64_t end) {
  STRATA_VM_DISPATCH(sum_range(w, begin, end));
  return vk::sum_range(w, begin, end);
}

#undef STRATA_VM_DISPATCH

}  // namespace strata::sampling
