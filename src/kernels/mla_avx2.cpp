// AVX2/FMA MLA attention (absorbed form, kernels/mla.h). One work item is a query row and a fixed
// block of kMlaHeadBlock heads; every head of the block reads the same cached rows (multi-query),
// converted to f32 once per item and pass. Scores take 8 keys at a time, each lane one FMA chain
// over the row in order; softmax sums and the weighted latent sums run key by key in order. So a
// (token, head) result never depends on the batch, the chunking or the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/kernel_impl.h"
#include "kernels/mla_impl.h"
#include "kernels/simd_avx2.h"

namespace strata::kernels {
namespace {

using avx2::hsum8;
using avx2::load_bf16x8;
using avx2::load_f16x8;
using avx2::softmax_numerators;

// Row `slot` of the latent cache as f32 (times the cache scale): in place for an f32 cache with
// scale 1, else converted into tmp.
const float* row_f32(const PagedKvLayer& kv, int64_t slot, float* tmp) {
  if (kv.ds_mla_latent > 0) {
    read_mla_row(kv, slot, tmp);
    return tmp;
  }
  const std::byte* p = kv.k + kv.offset(slot, 0);
  const int64_t D = kv.head_dim;
  const float scale = kv.k_scale;
  if (kv.dtype == DType::kF32 && scale == 1.0f) return reinterpret_cast<const float*>(p);
  if ((kv.dtype == DType::kBF16 || kv.dtype == DType::kF16) && D % 8 == 0) {
    const __m256 sv = _mm256_set1_ps(scale);
    for (int64_t e = 0; e < D; e += 8) {
      __m256 v = kv.dtype == DType::kBF16 ? load_bf16x8(p + e * 2) : load_f16x8(p + e * 2);
      _mm256_storeu_ps(tmp + e, _mm256_mul_ps(v, sv));
    }
    return tmp;
  }
  read_kv_row(kv, kv.k, slot, 0, scale, tmp);
  return tmp;
}

// Lane r = q . k[r] over D values: one FMA chain per lane, then hsum8, then the scalar tail.
inline __m256 dot8(const float* q, const float* const* k, int64_t D) {
  alignas(32) float out[8];
  __m256 acc[8];
  for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
  int64_t e = 0;
  for (; e + 8 <= D; e += 8) {
    const __m256 qv = _mm256_loadu_ps(q + e);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) acc[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[r] + e), acc[r]);
  }
  for (int r = 0; r < 8; ++r) {
    float s = hsum8(acc[r]);
    for (int64_t i = e; i < D; ++i) s += q[i] * k[r][i];
    out[r] = s;
  }
  return _mm256_load_ps(out);
}

void attend_heads(const AttentionArgs& a, int64_t r, int s, int64_t t, int64_t row_begin, int h0,
                  int nb, float* scratch) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t D = kv.head_dim;
  const int64_t q1 = a.query_start[s + 1];
  const int64_t ctx = a.seq_lens[s] - (q1 - t) + 1;
  const int64_t ctx8 = (ctx + 7) / 8 * 8;
  float* scores = scratch;                          // [nb][ctx8] (room for ctx + 8 each)
  float* acc = scores + kMlaHeadBlock * (ctx + 8);  // [nb][r]
  float* rows = acc + kMlaHeadBlock * r;            // 8 converted key rows + 1 value row
  const __m256 vscale = _mm256_set1_ps(a.scale);
  for (int64_t j0 = 0; j0 < ctx; j0 += 8) {
    const float* krow[8];
    for (int i = 0; i < 8; ++i) {
      const int64_t j = std::min(j0 + i, ctx - 1);  // the tail repeats the last key (masked)
      krow[i] = row_f32(kv, mla_slot(a, s, j), rows + i * D);
    }
    for (int h = 0; h < nb; ++h) {
      const float* q = a.q + (t - row_begin) * a.ldq + (h0 + h) * D;
      _mm256_storeu_ps(scores + h * ctx8 + j0, _mm256_mul_ps(dot8(q, krow, D), vscale));
    }
  }
  float sums[kMlaHeadBlock];
  for (int h = 0; h < nb; ++h) {
    sums[h] = softmax_numerators(scores + h * ctx8, ctx, ctx8);
    std::memset(acc + h * r, 0, r * sizeof(float));
  }
  float* vtmp = rows + 8 * D;
  for (int64_t j = 0; j < ctx; ++j) {
    const float* vr = row_f32(kv, mla_slot(a, s, j), vtmp);
    for (int h = 0; h < nb; ++h) {
      const float pj = scores[h * ctx8 + j];
      const __m256 p = _mm256_set1_ps(pj);
      float* ac = acc + h * r;
      int64_t e = 0;
      for (; e + 8 <= r; e += 8)
        _mm256_storeu_ps(ac + e,
                         _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + e), _mm256_loadu_ps(ac + e)));
      for (; e < r; ++e) ac[e] = std::fma(pj, vr[e], ac[e]);
    }
  }
  for (int h = 0; h < nb; ++h) {
    float* o = a.out + (t - row_begin) * a.ldo + (h0 + h) * r;
    const float inv = 1.0f / sums[h];
    for (int64_t e = 0; e < r; ++e) o[e] = acc[h * r + e] * inv;
  }
}

}  // namespace

void mla_attention_avx2(const AttentionArgs& a, int64_t r, ThreadPool& pool, int64_t row_begin,
                        int64_t row_end) {
  const int blocks = (a.num_heads + kMlaHeadBlock - 1) / kMlaHeadBlock;
  const int64_t items = (row_end - row_begin) * blocks;
  pool.parallel_for(items, 1, [&](int64_t i0, int64_t i1) {
    float* scratch = a.scratch + ThreadPool::current_thread_index() * a.scratch_floats_per_thread;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = row_begin + item / blocks;
      const int h0 = static_cast<int>(item % blocks) * kMlaHeadBlock;
      attend_heads(a, r, mla_sequence_of_row(a, t), t, row_begin, h0,
                   std::min(kMlaHeadBlock, a.num_heads - h0), scratch);
    }
  });
}

}  // namespace strata::kernels
