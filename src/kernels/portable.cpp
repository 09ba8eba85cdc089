// Portable fast kernels: the same blocking, threading and reduction order as the AVX2 variant,
// in plain C++ (the compiler vectorises what it can). Used on CPUs without AVX2/FMA/F16C.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/check.h"
#include "kernels/kernel_impl.h"
#include "kernels/mla_impl.h"
#include "kernels/quant_weight.h"

namespace strata::kernels::portable {
namespace {

// Grows a per-thread buffer once; later calls reuse it (no allocation in steady state).
float* thread_scratch(int64_t floats) {
  thread_local AlignedBuffer buf;
  if (buf.size() < static_cast<size_t>(floats) * 4) buf.resize(static_cast<size_t>(floats) * 4);
  return buf.as<float>();
}

// Converts columns [k0, k1) of panel p to f32 [k1 - k0][16].
void panel_to_f32(const PackedWeight& w, int64_t p, int64_t k0, int64_t k1, float* dst) {
  const std::byte* pan = w.panel(p);
  int64_t es = dtype_block_bytes(w.dtype());
  dequantize_row(w.dtype(), pan + k0 * kPanelRows * es, dst, (k1 - k0) * kPanelRows);
}

void matmul(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
            ThreadPool& pool) {
  if (is_block_quant(w.dtype())) return quant_matmul_reference(x, m, ldx, w, y, ldy, pool);
  const int64_t K = w.k(), N = w.n();
  pool.parallel_for(w.num_panels(), 1, [&](int64_t p0, int64_t p1) {
    float* wbuf = thread_scratch(K * kPanelRows);
    for (int64_t p = p0; p < p1; ++p) {
      panel_to_f32(w, p, 0, K, wbuf);
      int64_t cols = std::min<int64_t>(kPanelRows, N - p * kPanelRows);
      for (int64_t i = 0; i < m; ++i) {
        float acc[kPanelRows] = {};
        const float* xr = x + i * ldx;
        for (int64_t k = 0; k < K; ++k) {
          float xv = xr[k];
          const float* wk = wbuf + k * kPanelRows;
          for (int j = 0; j < kPanelRows; ++j) acc[j] += xv * wk[j];
        }
        std::memcpy(y + i * ldy + p * kPanelRows, acc, cols * sizeof(float));
      }
    }
  });
}

void rms_norm(const float* x, int64_t ldx, const float* weight, float eps, int64_t m, int64_t n,
              float* y, int64_t ldy, ThreadPool& pool) {
  pool.parallel_for(m, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      float ss = 0;
      for (int64_t j = 0; j < n; ++j) ss += x[i * ldx + j] * x[i * ldx + j];
      float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
      for (int64_t j = 0; j < n; ++j) y[i * ldy + j] = x[i * ldx + j] * inv * weight[j];
    }
  });
}

void silu_mul(const float* gu, int64_t ldgu, int64_t m, int64_t f_dim, float* out, int64_t ldo,
              ThreadPool& pool) {
  pool.parallel_for(m, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = 0; j < f_dim; ++j) {
        float g = gu[i * ldgu + j], u = gu[i * ldgu + f_dim + j];
        out[i * ldo + j] = g / (1.0f + std::exp(-g)) * u;
      }
  });
}

void rope(float* x, int64_t m, int64_t ld, int num_heads, int head_dim, int rot_dim,
          const float* cos, const float* sin, bool neox) {
  int half = rot_dim / 2;
  for (int64_t i = 0; i < m; ++i)
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + i * ld + static_cast<int64_t>(h) * head_dim;
      const float* c = cos + i * half;
      const float* s = sin + i * half;
      for (int j = 0; j < half; ++j) {
        int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
        float x0 = v[a], x1 = v[b];
        v[a] = x0 * c[j] - x1 * s[j];
        v[b] = x1 * c[j] + x0 * s[j];
      }
    }
}

void kv_write(const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t m,
              const int64_t* slots, const PagedKvLayer& kv) {
  write_kv_rows(k, ldk, v, ldv, m, slots, kv);
}

int sequence_of_row(const AttentionArgs& a, int64_t t) {
  const int32_t* end = a.query_start + a.num_seqs + 1;
  return static_cast<int>(std::upper_bound(a.query_start, end, t) - a.query_start) - 1;
}

// One work item: all query heads of kv head g for query row t of sequence s.
void attend_one(const AttentionArgs& a, int s, int64_t t, int g, float* scratch) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t hd = kv.head_dim;
  const int group = a.num_heads / static_cast<int>(kv.num_kv_heads);
  const int64_t q1 = a.query_start[s + 1];
  const int64_t pos = a.seq_lens[s] - (q1 - t);
  const int64_t ctx = pos + 1;
  const int32_t* table = a.block_tables + s * a.max_blocks_per_seq;
  float* scores = scratch;                   // [group][ctx + 8]
  float* acc = scratch + group * (ctx + 8);  // [group][hd]
  float* row = acc + group * hd;             // [hd]
  for (int64_t j = 0; j < ctx; ++j) {
    int64_t slot =
        static_cast<int64_t>(table[j / kv.block_size]) * kv.block_size + j % kv.block_size;
    read_kv_row(kv, kv.k, slot, g, kv.k_scale, row);
    for (int h = 0; h < group; ++h) {
      const float* q = a.q + t * a.ldq + (g * group + h) * hd;
      float d = 0;
      for (int64_t e = 0; e < hd; ++e) d += q[e] * row[e];
      scores[h * (ctx + 8) + j] = d * a.scale;
    }
  }
  std::vector<float> sums(group);
  for (int h = 0; h < group; ++h) {
    float* sc = scores + h * (ctx + 8);
    float mx = -INFINITY;
    for (int64_t j = 0; j < ctx; ++j) mx = std::max(mx, sc[j]);
    float sum = 0;
    for (int64_t j = 0; j < ctx; ++j) {
      sc[j] = std::exp(sc[j] - mx);
      sum += sc[j];
    }
    sums[h] = sum;
    std::fill(acc + h * hd, acc + (h + 1) * hd, 0.0f);
  }
  for (int64_t j = 0; j < ctx; ++j) {
    int64_t slot =
        static_cast<int64_t>(table[j / kv.block_size]) * kv.block_size + j % kv.block_size;
    read_kv_row(kv, kv.v, slot, g, kv.v_scale, row);
    for (int h = 0; h < group; ++h) {
      float p = scores[h * (ctx + 8) + j];
      float* ac = acc + h * hd;
      for (int64_t e = 0; e < hd; ++e) ac[e] += p * row[e];
    }
  }
  for (int h = 0; h < group; ++h) {
    float* o = a.out + t * a.ldo + (g * group + h) * hd;
    float inv = 1.0f / sums[h];
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

const KernelOps kOps = {"portable",
                        matmul,
                        rms_norm,
                        silu_mul,
                        rope,
                        kv_write,
                        attention,
                        mla_attention_portable,
                        dsa_select_portable,
                        mla_sparse_attention_portable};

}  // namespace strata::kernels::portable
