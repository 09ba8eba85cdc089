// DeepSeek-V4 kernels (kernels/dsv4.h): dispatch and the plain versions.
#include "kernels/dsv4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"

namespace strata {
namespace kernels {
namespace {

constexpr int kGroup = 32;
constexpr float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

}  // namespace

const float* e8m0_float_table() {
  static const auto table = [] {
    std::vector<float> t(256);
    for (int e = 0; e < 255; ++e) t[e] = static_cast<float>(std::ldexp(1.0, e - 127));
    t[255] = std::numeric_limits<float>::quiet_NaN();
    return t;
  }();
  return table.data();
}

void mxfp4_deinterleave_x(const float* x, int64_t m, int64_t k, float* out) {
  for (int64_t r = 0; r < m; ++r)
    for (int64_t g = 0; g < k; g += kGroup) {
      const float* src = x + r * k + g;
      float* dst = out + r * k + g;
      for (int j = 0; j < kGroup / 2; ++j) {
        dst[j] = src[2 * j];
        dst[kGroup / 2 + j] = src[2 * j + 1];
      }
    }
}

void mxfp4_matmul_plain(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t m,
                        int64_t n, int64_t k, float* y, ThreadPool* pool) {
  const int64_t groups = k / kGroup;
  const float* e8m0 = e8m0_float_table();
  auto rows = [&](int64_t b, int64_t e) {
    float wg[kGroup];
    std::vector<float> acc(m);
    for (int64_t i = b; i < e; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      const uint8_t* row = packed + i * (k / 2);
      for (int64_t g = 0; g < groups; ++g) {
        const float s = e8m0[scales[i * groups + g]];
        const uint8_t* bytes = row + g * (kGroup / 2);
        for (int j = 0; j < kGroup / 2; ++j) {
          wg[2 * j] = kE2m1[bytes[j] & 0x0f];
          wg[2 * j + 1] = kE2m1[bytes[j] >> 4];
        }
        for (int64_t r = 0; r < m; ++r) {
          const float* xr = x + r * k + g * kGroup;
          float dot = 0;
          for (int j = 0; j < kGroup; ++j) dot += wg[j] * xr[j];
          acc[r] += dot * s;
        }
      }
      for (int64_t r = 0; r < m; ++r) y[r * n + i] = acc[r];
    }
  };
  if (pool == nullptr || n < 2)
    rows(0, n);
  else
    pool->parallel_for(n, 1, rows);
}

void dsv4_indexer_scores_plain(const float* q, const float* w, int heads, int64_t dim, float scale,
                               const uint8_t* const* rows, int64_t n, float* scores) {
  std::vector<float> key(dim);
  for (int64_t j = 0; j < n; ++j) {
    float rs;
    std::memcpy(&rs, rows[j] + dim, 4);
    for (int64_t i = 0; i < dim; ++i) key[i] = fp8_e4m3_to_f32(rows[j][i]) * rs;
    float sc = 0;
    for (int h = 0; h < heads; ++h) {
      float dot = 0;
      for (int64_t i = 0; i < dim; ++i) dot += q[h * dim + i] * key[i];
      sc += std::max(dot, 0.0f) * w[h] * scale;
    }
    scores[j] = sc;
  }
}

void dsv4_attention_plain(const float* q, int heads, int64_t dim, const float* kv, int64_t n,
                          const float* sinks, float scale, float* out) {
  std::vector<float> logit(n);
  for (int h = 0; h < heads; ++h) {
    const float* qh = q + h * dim;
    float mx = sinks[h];
    for (int64_t k = 0; k < n; ++k) {
      const float* kr = kv + k * dim;
      float dot = 0;
      for (int64_t i = 0; i < dim; ++i) dot += qh[i] * kr[i];
      logit[k] = dot * scale;
      mx = std::max(mx, logit[k]);
    }
    float den = std::exp(sinks[h] - mx);
    float* oh = out + h * dim;
    std::fill(oh, oh + dim, 0.0f);
    for (int64_t k = 0; k < n; ++k) {
      const float pk = std::exp(logit[k] - mx);
      den += pk;
      const float* kr = kv + k * dim;
      for (int64_t i = 0; i < dim; ++i) oh[i] += pk * kr[i];
    }
    for (int64_t i = 0; i < dim; ++i) oh[i] /= den;
  }
}

void dsv4_unpack_fp8_row_plain(const uint8_t* data, const uint8_t* scales, int64_t nope,
                               int64_t rope, float* out) {
  const float* e8m0 = e8m0_float_table();
  for (int64_t g = 0; g < nope / 64; ++g) {
    const float s = e8m0[scales[g]];
    for (int i = 0; i < 64; ++i) out[g * 64 + i] = fp8_e4m3_to_f32(data[g * 64 + i]) * s;
  }
  for (int64_t i = 0; i < rope; ++i) {
    uint16_t b;
    std::memcpy(&b, data + nope + 2 * i, 2);
    out[nope + i] = bf16_to_f32(b);
  }
}

}  // namespace kernels

void dsv4_unpack_fp8_row(const KernelOps& ops, const uint8_t* data, const uint8_t* scales,
                         int64_t nope, int64_t rope, float* out) {
  (ops.dsv4_unpack_fp8_row != nullptr
       ? ops.dsv4_unpack_fp8_row
       : kernels::dsv4_unpack_fp8_row_plain)(data, scales, nope, rope, out);
}

void mxfp4_matmul(const KernelOps& ops, const float* x, const uint8_t* packed,
                  const uint8_t* scales, int64_t m, int64_t n, int64_t k, float* y,
                  ThreadPool* pool) {
  (ops.mxfp4_matmul != nullptr ? ops.mxfp4_matmul : kernels::mxfp4_matmul_plain)(x, packed, scales,
                                                                                 m, n, k, y, pool);
}

void dsv4_indexer_scores(const KernelOps& ops, const float* q, const float* w, int heads,
                         int64_t dim, float scale, const uint8_t* const* rows, int64_t n,
                         float* scores, ThreadPool* pool) {
  auto fn = ops.dsv4_indexer_scores != nullptr ? ops.dsv4_indexer_scores
                                               : kernels::dsv4_indexer_scores_plain;
  if (pool == nullptr) return fn(q, w, heads, dim, scale, rows, n, scores);
  pool->parallel_for(n, 256, [&](int64_t b, int64_t e) {
    fn(q, w, heads, dim, scale, rows + b, e - b, scores + b);
  });
}

void dsv4_attention(const KernelOps& ops, const float* q, int heads, int64_t dim, const float* kv,
                    int64_t n, const float* sinks, float scale, float* out, ThreadPool* pool) {
  auto fn = ops.dsv4_attention != nullptr && dim % 16 == 0 ? ops.dsv4_attention
                                                           : kernels::dsv4_attention_plain;
  if (pool == nullptr) return fn(q, heads, dim, kv, n, sinks, scale, out);
  pool->parallel_for(heads, 4, [&](int64_t b, int64_t e) {
    fn(q + b * dim, static_cast<int>(e - b), dim, kv, n, sinks + b, scale, out + b * dim);
  });
}

}  // namespace strata
