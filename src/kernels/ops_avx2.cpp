// AVX2/FMA variants of the non-matmul kernels, and the variant's op table.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/kernel_impl.h"
#include "kernels/simd_avx2.h"

namespace strata::kernels::avx2 {

void matmul(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
            ThreadPool& pool);

namespace {

// Sum of squares of x[0..n) in a fixed order (4 vector accumulators by index mod 32, then a
// scalar tail), so a row's norm never depends on anything but the row.
float sum_squares(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m256 v0 = _mm256_loadu_ps(x + j), v1 = _mm256_loadu_ps(x + j + 8);
    __m256 v2 = _mm256_loadu_ps(x + j + 16), v3 = _mm256_loadu_ps(x + j + 24);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
    a2 = _mm256_fmadd_ps(v2, v2, a2);
    a3 = _mm256_fmadd_ps(v3, v3, a3);
  }
  for (; j + 8 <= n; j += 8) {
    __m256 v = _mm256_loadu_ps(x + j);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; j < n; ++j) s += x[j] * x[j];
  return s;
}

void rms_norm(const float* x, int64_t ldx, const float* weight, float eps, int64_t m, int64_t n,
              float* y, int64_t ldy, ThreadPool& pool) {
  pool.parallel_for(m, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* xr = x + i * ldx;
      float* yr = y + i * ldy;
      const float inv = 1.0f / std::sqrt(sum_squares(xr, n) / static_cast<float>(n) + eps);
      const __m256 vinv = _mm256_set1_ps(inv);
      int64_t j = 0;
      for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(yr + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + j), vinv),
                                               _mm256_loadu_ps(weight + j)));
      for (; j < n; ++j) yr[j] = xr[j] * inv * weight[j];
    }
  });
}

void silu_mul(const float* gu, int64_t ldgu, int64_t m, int64_t f_dim, float* out, int64_t ldo,
              ThreadPool& pool) {
  const __m256 one = _mm256_set1_ps(1.0f);
  pool.parallel_for(m, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const float* g = gu + i * ldgu;
      const float* u = g + f_dim;
      float* o = out + i * ldo;
      int64_t j = 0;
      for (; j + 8 <= f_dim; j += 8) {
        __m256 gv = _mm256_loadu_ps(g + j);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
        __m256 silu = _mm256_div_ps(gv, _mm256_add_ps(one, e));
        _mm256_storeu_ps(o + j, _mm256_mul_ps(silu, _mm256_loadu_ps(u + j)));
      }
      for (; j < f_dim; ++j) o[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
    }
  });
}

void rope(float* x, int64_t m, int64_t ld, int num_heads, int head_dim, int rot_dim,
          const float* cos, const float* sin, bool neox) {
  const int half = rot_dim / 2;
  for (int64_t i = 0; i < m; ++i) {
    const float* c = cos + i * half;
    const float* s = sin + i * half;
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + i * ld + static_cast<int64_t>(h) * head_dim;
      int j = 0;
      if (neox) {
        for (; j + 8 <= half; j += 8) {
          __m256 x0 = _mm256_loadu_ps(v + j), x1 = _mm256_loadu_ps(v + j + half);
          __m256 cv = _mm256_loadu_ps(c + j), sv = _mm256_loadu_ps(s + j);
          _mm256_storeu_ps(v + j, _mm256_fmsub_ps(x0, cv, _mm256_mul_ps(x1, sv)));
          _mm256_storeu_ps(v + j + half, _mm256_fmadd_ps(x1, cv, _mm256_mul_ps(x0, sv)));
        }
      }
      for (; j < half; ++j) {
        int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
        float x0 = v[a], x1 = v[b];
        v[a] = std::fma(x0, c[j], -(x1 * s[j]));
        v[b] = std::fma(x1, c[j], x0 * s[j]);
      }
    }
  }
}

void kv_write(const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t m,
              const int64_t* slots, const PagedKvLayer& kv) {
  write_kv_rows(k, ldk, v, ldv, m, slots, kv);
}

// ---- attention -----------------------------------------------------------------------------

// Returns row (slot, kv_head) of `base` as f32: in place for an f32 cache, else converted to tmp.
const float* kv_row_f32(const PagedKvLayer& kv, const std::byte* base, int64_t slot, int64_t g,
                        float scale, float* tmp) {
  const std::byte* p = base + kv.offset(slot, g);
  const int64_t hd = kv.head_dim;
  if (kv.dtype == DType::kF32 && scale == 1.0f) return reinterpret_cast<const float*>(p);
  if ((kv.dtype == DType::kBF16 || kv.dtype == DType::kF16) && hd % 8 == 0) {
    const __m256 sv = _mm256_set1_ps(scale);
    for (int64_t e = 0; e < hd; e += 8) {
      __m256 v = kv.dtype == DType::kBF16 ? load_bf16x8(p + e * 2) : load_f16x8(p + e * 2);
      _mm256_storeu_ps(tmp + e, _mm256_mul_ps(v, sv));
    }
    return tmp;
  }
  read_kv_row(kv, base, slot, g, scale, tmp);
  return tmp;
}

// Dot products of q (head_dim floats) with 8 key rows; result lane r = q . k[r].
// Each lane is one FMA chain over the head dims in order, then hsum8 — the same for every key.
inline __m256 dot8(const float* q, const float* const* k, int64_t hd) {
  alignas(32) float out[8];
  __m256 acc[8];
  for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= hd; e += 8) {
    __m256 qv = _mm256_loadu_ps(q + e);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[r] + e), acc[r]);
  }
  for (int r = 0; r < 8; ++r) {
    float s = hsum8(acc[r]);
    for (int64_t t = e; t < hd; ++t) s += q[t] * k[r][t];
    out[r] = s;
  }
  return _mm256_load_ps(out);
}

int sequence_of_row(const AttentionArgs& a, int64_t t) {
  const int32_t* end = a.query_start + a.num_seqs + 1;
  return static_cast<int>(std::upper_bound(a.query_start, end, t) - a.query_start) - 1;
}

// All query heads of kv head g for query row t of sequence s.
void attend_one(const AttentionArgs& a, int s, int64_t t, int g, float* scratch) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t hd = kv.head_dim;
  const int group = a.num_heads / static_cast<int>(kv.num_kv_heads);
  const int64_t q1 = a.query_start[s + 1];
  const int64_t pos = a.seq_lens[s] - (q1 - t);
  const int64_t ctx = pos + 1;
  const int64_t ctx8 = (ctx + 7) / 8 * 8;
  const int32_t* table = a.block_tables + s * a.max_blocks_per_seq;
  const int64_t stride = ctx8;               // per-head score row, padded to whole vectors
  float* scores = scratch;                   // [group][ctx8]
  float* acc = scratch + group * (ctx + 8);  // [group][hd]
  float* rows = acc + group * hd;            // 8 converted key rows + 1 value row
  auto slot_of = [&](int64_t j) {
    return static_cast<int64_t>(table[j / kv.block_size]) * kv.block_size + j % kv.block_size;
  };
  const __m256 vscale = _mm256_set1_ps(a.scale);
  // Scores, 8 keys at a time (the tail repeats the last key; its lanes are masked below).
  for (int64_t j0 = 0; j0 < ctx; j0 += 8) {
    const float* krow[8];
    for (int r = 0; r < 8; ++r) {
      int64_t j = std::min(j0 + r, ctx - 1);
      krow[r] = kv_row_f32(kv, kv.k, slot_of(j), g, kv.k_scale, rows + r * hd);
    }
    for (int h = 0; h < group; ++h) {
      const float* q = a.q + t * a.ldq + (static_cast<int64_t>(g) * group + h) * hd;
      _mm256_storeu_ps(scores + h * stride + j0, _mm256_mul_ps(dot8(q, krow, hd), vscale));
    }
  }
  // Softmax numerators and sums (lane = key index mod 8, then a fixed reduction).
  float sums[64];
  STRATA_CHECK(group <= 64) << "GQA group of " << group;
  for (int h = 0; h < group; ++h) {
    float* sc = scores + h * stride;
    for (int64_t j = ctx; j < ctx8; ++j) sc[j] = -INFINITY;
    float mx = -INFINITY;
    for (int64_t j = 0; j < ctx; ++j) mx = std::max(mx, sc[j]);
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 vs = _mm256_setzero_ps();
    for (int64_t j = 0; j < ctx8; j += 8) {
      __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + j), vmx));
      _mm256_storeu_ps(sc + j, e);
      vs = _mm256_add_ps(vs, e);
    }
    sums[h] = hsum8(vs);
    std::memset(acc + h * hd, 0, hd * sizeof(float));
  }
  // Weighted values, key by key in order.
  float* vtmp = rows + 8 * hd;
  for (int64_t j = 0; j < ctx; ++j) {
    const float* vr = kv_row_f32(kv, kv.v, slot_of(j), g, kv.v_scale, vtmp);
    for (int h = 0; h < group; ++h) {
      const __m256 p = _mm256_set1_ps(scores[h * stride + j]);
      float* ac = acc + h * hd;
      int64_t e = 0;
      for (; e + 8 <= hd; e += 8)
        _mm256_storeu_ps(ac + e,
                         _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + e), _mm256_loadu_ps(ac + e)));
      for (; e < hd; ++e) ac[e] = std::fma(scores[h * stride + j], vr[e], ac[e]);
    }
  }
  for (int h = 0; h < group; ++h) {
    float* o = a.out + t * a.ldo + (static_cast<int64_t>(g) * group + h) * hd;
    const float inv = 1.0f / sums[h];
    for (int64_t e = 0; e < hd; ++e) o[e] = acc[h * hd + e] * inv;
  }
}

void attention(const AttentionArgs& a, ThreadPool& pool) {
  const int nkv = static_cast<int>(a.kv->num_kv_heads);
  const int64_t items = int64_t{a.query_start[a.num_seqs]} * nkv;
  pool.parallel_for(items, 1, [&](int64_t i0, int64_t i1) {
    float* scratch = a.scratch + ThreadPool::current_thread_index() * a.scratch_floats_per_thread;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = item / nkv;
      attend_one(a, sequence_of_row(a, t), t, static_cast<int>(item % nkv), scratch);
    }
  });
}

}  // namespace

const KernelOps kOps = {"avx2", matmul, rms_norm, silu_mul, rope, kv_write, attention};

}  // namespace strata::kernels::avx2

namespace strata::kernels::avx2 {

// Streams p[0..n) (n a multiple of 32) through four vector accumulators.
float sum_floats(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  return hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

}  // namespace strata::kernels::avx2

namespace strata::kernels::avx2 {

// Twelve independent FMA chains with distinct values (so no two can be merged), `iterations`
// steps each. Returns the FLOPs performed.
double fma_chains(int64_t iterations, const float* seeds) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_loadu_ps(seeds + 8 * i);
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);  // converges, no overflow
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  volatile float sink = hsum8(s);
  (void)sink;
  return static_cast<double>(iterations) * 12 * 16;
}

}  // namespace strata::kernels::avx2
