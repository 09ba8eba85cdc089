// The loop bodies behind vector_math.h, compiled three times: by vector_math.cpp for any x86-64
// (SSE2), by vector_math_avx2.cpp with AVX2 and by vector_math_avx512.cpp with AVX-512. Every
// build disables FP contraction, and every loop keeps a fixed association (the reductions' lane
// counts below are part of the result, so a wider build keeps them), so the three give
// bit-identical results (checked in vector_math_test.cpp): a seeded request samples the same
// tokens on every machine.
//
// Internal linkage (static) and no standard-library templates, so nothing compiled with AVX2 or
// AVX-512 can leak into code that runs without it. Include only from those three files.
#pragma once

#include <cstdint>

#include "sampling/exp_approx.h"

namespace strata::sampling::vk {

constexpr int64_t kLanes = 8;
constexpr int64_t kChunk = 256;
constexpr float kInf = __builtin_huge_valf();

static float max_value(const float* x, int64_t n) {
  // Eight independent lanes so the loop vectorizes; `v > m ? v : m` never picks NaN.
  float lane[kLanes];
  for (int64_t j = 0; j < kLanes; ++j) lane[j] = -kInf;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float m = -kInf;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int64_t j = 0; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
  return m;
}

static void exp_weights(const float* x, int64_t n, float m, float inv_t, float threshold,
                        float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float e = exp_approx((x[i] - m) * inv_t);
    out[i] = x[i] >= threshold ? e : 0.0f;
  }
}

static double sum_range(const float* w, int64_t begin, int64_t end);

// exp_weights over [0, n) one block at a time, with each block's sum taken while it is hot.
static void exp_weights_blocks(const float* x, int64_t n, float m, float inv_t, float threshold,
                               float* out, int64_t block, double* block_sums) {
  for (int64_t b = 0, begin = 0; begin < n; ++b, begin += block) {
    const int64_t end = begin + block < n ? begin + block : n;
    exp_weights(x + begin, end - begin, m, inv_t, threshold, out + begin);
    block_sums[b] = sum_range(out, begin, end);
  }
}

// max over each chunk of `chunk` values: out[c] = max(x[c * chunk, ...]) (NaN ignored).
static void chunk_max(const float* x, int64_t n, int64_t chunk, float* out) {
  for (int64_t c = 0, begin = 0; begin < n; ++c, begin += chunk) {
    const int64_t end = begin + chunk < n ? begin + chunk : n;
    out[c] = max_value(x + begin, end - begin);
  }
}

static double sum_range(const float* w, int64_t begin, int64_t end) {
  double a[4] = {0.0, 0.0, 0.0, 0.0};
  int64_t i = begin;
  for (; i + 4 <= end; i += 4) {
    for (int j = 0; j < 4; ++j) a[j] += static_cast<double>(w[i + j]);
  }
  for (; i < end; ++i) a[0] += static_cast<double>(w[i]);
  return (a[0] + a[1]) + (a[2] + a[3]);
}

static double sum_exp(const float* x, int64_t n, float m) {
  float buf[kChunk];
  double total = 0.0;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t len = n - begin < kChunk ? n - begin : kChunk;
    for (int64_t j = 0; j < len; ++j) {
      const float v = x[begin + j];
      const float e = exp_approx(v - m);
      buf[j] = v > -kInf ? e : 0.0f;
    }
    total += sum_range(buf, 0, len);
  }
  return total;
}

static int64_t count_at_least(const float* x, int64_t n, float v) {
  int32_t lane[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t total = 0;
  int64_t i = 0;
  // Blocks short enough that the 32-bit lanes cannot overflow.
  while (i + kLanes <= n) {
    const int64_t stop = n - i > (int64_t{1} << 30) ? i + (int64_t{1} << 30) : n;
    for (; i + kLanes <= stop; i += kLanes) {
      for (int64_t j = 0; j < kLanes; ++j) lane[j] += x[i + j] >= v ? 1 : 0;
    }
    for (int64_t j = 0; j < kLanes; ++j) {
      total += lane[j];
      lane[j] = 0;
    }
  }
  for (; i < n; ++i) total += x[i] >= v ? 1 : 0;
  return total;
}

static float min_finite(const float* x, int64_t n) {
  float lane[kLanes];
  for (int64_t j = 0; j < kLanes; ++j) lane[j] = kInf;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) {
      const float v = x[i + j];
      lane[j] = v < lane[j] && v > -kInf ? v : lane[j];
    }
  }
  float m = kInf;
  for (; i < n; ++i) m = x[i] < m && x[i] > -kInf ? x[i] : m;
  for (int64_t j = 0; j < kLanes; ++j) m = lane[j] < m ? lane[j] : m;
  return m;
}

// int((v - lo) * scale) clamped to [0, top]; NaN and -inf give 0.
static inline int32_t bucket_of(float v, float lo, float scale, float top) {
  float b = (v - lo) * scale;
  b = b > 0.0f ? b : 0.0f;  // NaN -> 0
  b = b < top ? b : top;
  return static_cast<int32_t>(b);
}

static void bucket_indices(const float* x, const float* w, int64_t n, float lo, float scale,
                           int32_t num_buckets, uint16_t* out) {
  const float top = static_cast<float>(num_buckets - 1);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t idx = bucket_of(x[i], lo, scale, top);
    out[i] = static_cast<uint16_t>(w[i] > 0.0f ? idx : num_buckets);
  }
}

static void bucket_indices_all(const float* x, int64_t n, float lo, float scale,
                               int32_t num_buckets, uint16_t* out) {
  const float top = static_cast<float>(num_buckets - 1);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint16_t>(bucket_of(x[i], lo, scale, top));
}

static void keep_at_or_above(const float* x, int64_t n, float v, int64_t last_tie, float* w) {
  const int64_t split = last_tie + 1 < n ? last_tie + 1 : n;
  for (int64_t i = 0; i < split; ++i) w[i] = x[i] >= v ? w[i] : 0.0f;
  for (int64_t i = split; i < n; ++i) w[i] = x[i] > v ? w[i] : 0.0f;
}

}  // namespace strata::sampling::vk
