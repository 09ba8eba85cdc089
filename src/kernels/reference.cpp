// Reference kernels: plain loops, double accumulation, no threading. Written for clarity; the
// fast variants are checked against these.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/kernel_impl.h"
#include "kernels/mla_impl.h"

namespace strata::kernels::reference {
namespace {

void matmul(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
            ThreadPool&) {
  std::vector<float> row(w.k());
  for (int64_t n = 0; n < w.n(); ++n) {
    for (int64_t k = 0; k < w.k(); ++k) row[k] = w.at(n, k);
    for (int64_t i = 0; i < m; ++i) {
      double acc = 0;
      for (int64_t k = 0; k < w.k(); ++k) acc += static_cast<double>(x[i * ldx + k]) * row[k];
      y[i * ldy + n] = static_cast<float>(acc);
    }
  }
}

void rms_norm(const float* x, int64_t ldx, const float* weight, float eps, int64_t m, int64_t n,
              float* y, int64_t ldy, ThreadPool&) {
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(x[i * ldx + j]) * x[i * ldx + j];
    double inv = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < n; ++j)
      y[i * ldy + j] = static_cast<float>(x[i * ldx + j] * inv * weight[j]);
  }
}

void silu_mul(const float* gu, int64_t ldgu, int64_t m, int64_t f_dim, float* out, int64_t ldo,
              ThreadPool&) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < f_dim; ++j) {
      double g = gu[i * ldgu + j], u = gu[i * ldgu + f_dim + j];
      out[i * ldo + j] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
}

void rope(float* x, int64_t m, int64_t ld, int num_heads, int head_dim, int rot_dim,
          const float* cos, const float* sin, bool neox) {
  int half = rot_dim / 2;
  for (int64_t i = 0; i < m; ++i)
    for (int h = 0; h < num_heads; ++h) {
      float* v = x + i * ld + static_cast<int64_t>(h) * head_dim;
      for (int j = 0; j < half; ++j) {
        int a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
        double c = cos[i * half + j], s = sin[i * half + j];
        double x0 = v[a], x1 = v[b];
        v[a] = static_cast<float>(x0 * c - x1 * s);
        v[b] = static_cast<float>(x1 * c + x0 * s);
      }
    }
}

void kv_write(const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t m,
              const int64_t* slots, const PagedKvLayer& kv) {
  write_kv_rows(k, ldk, v, ldv, m, slots, kv);
}

void attention(const AttentionArgs& a, ThreadPool&) {
  const PagedKvLayer& kv = *a.kv;
  int64_t hd = kv.head_dim;
  int group = a.num_heads / static_cast<int>(kv.num_kv_heads);
  std::vector<float> kf(hd), vf(hd);
  for (int s = 0; s < a.num_seqs; ++s) {
    int64_t q0 = a.query_start[s], q1 = a.query_start[s + 1];
    int64_t seq_len = a.seq_lens[s];
    const int32_t* table = a.block_tables + s * a.max_blocks_per_seq;
    for (int64_t t = q0; t < q1; ++t) {
      int64_t pos = seq_len - (q1 - t);
      for (int h = 0; h < a.num_heads; ++h) {
        int g = h / group;
        const float* q = a.q + t * a.ldq + h * hd;
        std::vector<double> scores(pos + 1);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= pos; ++j) {
          int64_t slot =
              static_cast<int64_t>(table[j / kv.block_size]) * kv.block_size + j % kv.block_size;
          read_kv_row(kv, kv.k, slot, g, kv.k_scale, kf.data());
          double d = 0;
          for (int64_t e = 0; e < hd; ++e) d += static_cast<double>(q[e]) * kf[e];
          scores[j] = d * a.scale;
          mx = std::max(mx, scores[j]);
        }
        std::vector<double> acc(hd, 0.0);
        double sum = 0;
        for (int64_t j = 0; j <= pos; ++j) {
          int64_t slot =
              static_cast<int64_t>(table[j / kv.block_size]) * kv.block_size + j % kv.block_size;
          read_kv_row(kv, kv.v, slot, g, kv.v_scale, vf.data());
          double p = std::exp(scores[j] - mx);
          sum += p;
          for (int64_t e = 0; e < hd; ++e) acc[e] += p * vf[e];
        }
        float* o = a.out + t * a.ldo + h * hd;
        for (int64_t e = 0; e < hd; ++e) o[e] = static_cast<float>(acc[e] / sum);
      }
    }
  }
}

}  // namespace

void mla(const AttentionArgs& a, int64_t kv_lora_rank, ThreadPool&, int64_t row_begin,
         int64_t row_end) {
  mla_attention_reference(a, kv_lora_rank, row_begin, row_end);
}

const KernelOps kOps = {"reference",
                        matmul,
                        rms_norm,
                        silu_mul,
                        rope,
                        kv_write,
                        attention,
                        mla,
                        dsa_select_portable,
                        mla_sparse_attention_portable};

}  // namespace strata::kernels::reference
