// Reference MLA attention, written for clarity: double accumulation, no threading. The absorbed
// form checks the fast variants; the expanded form rebuilds per-head keys and values from the
// latents (DeepSeek's "naive" mode) and checks that the absorbed form computes the same thing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/fp8_ds_mla.h"
#include "kernels/kernel_impl.h"
#include "kernels/mla_impl.h"

namespace strata {
namespace kernels {

void mla_attention_reference(const AttentionArgs& a, int64_t r, int64_t row_begin,
                             int64_t row_end) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t D = kv.head_dim;
  for (int s = 0; s < a.num_seqs; ++s) {
    const int64_t q0 = a.query_start[s], q1 = a.query_start[s + 1];
    for (int64_t t = std::max(q0, row_begin); t < std::min(q1, row_end); ++t) {
      const int64_t pos = a.seq_lens[s] - (q1 - t);
      // The context's rows, read once per query token.
      std::vector<std::vector<float>> rows(pos + 1, std::vector<float>(D));
      for (int64_t j = 0; j <= pos; ++j) read_mla_row(kv, mla_slot(a, s, j), rows[j].data());
      for (int h = 0; h < a.num_heads; ++h) {
        const float* q = a.q + (t - row_begin) * a.ldq + h * D;
        std::vector<double> scores(pos + 1);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= pos; ++j) {
          double d = 0;
          for (int64_t e = 0; e < D; ++e) d += static_cast<double>(q[e]) * rows[j][e];
          scores[j] = d * a.scale;
          mx = std::max(mx, scores[j]);
        }
        std::vector<double> acc(r, 0.0);
        double sum = 0;
        for (int64_t j = 0; j <= pos; ++j) {
          const double p = std::exp(scores[j] - mx);
          sum += p;
          for (int64_t e = 0; e < r; ++e) acc[e] += p * rows[j][e];
        }
        float* o = a.out + (t - row_begin) * a.ldo + h * r;
        for (int64_t e = 0; e < r; ++e) o[e] = static_cast<float>(acc[e] / sum);
      }
    }
  }
}

}  // namespace kernels

void mla_attention_expanded_reference(const AttentionArgs& a, int64_t r,
                                      std::span<const PackedWeight> w_uk_t,
                                      std::span<const PackedWeight> w_uv) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t D = kv.head_dim, rope = D - r;
  STRATA_CHECK(static_cast<int>(w_uk_t.size()) == a.num_heads &&
               static_cast<int>(w_uv.size()) == a.num_heads)
      << "one W_UK and one W_UV per head";
  const int64_t nope = w_uk_t[0].k(), v_dim = w_uv[0].n();
  const int64_t qk = nope + rope;
  std::vector<float> row(D);
  for (int s = 0; s < a.num_seqs; ++s) {
    const int64_t q0 = a.query_start[s], q1 = a.query_start[s + 1];
    const int64_t ctx = a.seq_lens[s];
    // Expand the whole context once: per head, key [k_nope | k_pe] and value.
    std::vector<std::vector<double>> keys(a.num_heads, std::vector<double>(ctx * qk));
    std::vector<std::vector<double>> values(a.num_heads, std::vector<double>(ctx * v_dim));
    for (int64_t j = 0; j < ctx; ++j) {
      read_mla_row(kv, kernels::mla_slot(a, s, j), row.data());
      for (int h = 0; h < a.num_heads; ++h) {
        double* key = keys[h].data() + j * qk;
        for (int64_t e = 0; e < nope; ++e) {
          double d = 0;
          for (int64_t i = 0; i < r; ++i) d += static_cast<double>(row[i]) * w_uk_t[h].at(i, e);
          key[e] = d;
        }
        for (int64_t e = 0; e < rope; ++e) key[nope + e] = row[r + e];
        double* val = values[h].data() + j * v_dim;
        for (int64_t e = 0; e < v_dim; ++e) {
          double d = 0;
          for (int64_t i = 0; i < r; ++i) d += static_cast<double>(row[i]) * w_uv[h].at(e, i);
          val[e] = d;
        }
      }
    }
    for (int64_t t = q0; t < q1; ++t) {
      const int64_t pos = ctx - (q1 - t);
      for (int h = 0; h < a.num_heads; ++h) {
        const float* q = a.q + t * a.ldq + h * qk;
        std::vector<double> scores(pos + 1);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= pos; ++j) {
          double d = 0;
          for (int64_t e = 0; e < qk; ++e) d += static_cast<double>(q[e]) * keys[h][j * qk + e];
          scores[j] = d * a.scale;
          mx = std::max(mx, scores[j]);
        }
        std::vector<double> acc(v_dim, 0.0);
        double sum = 0;
        for (int64_t j = 0; j <= pos; ++j) {
          const double p = std::exp(scores[j] - mx);
          sum += p;
          for (int64_t e = 0; e < v_dim; ++e) acc[e] += p * values[h][j * v_dim + e];
        }
        float* o = a.out + t * a.ldo + h * v_dim;
        for (int64_t e = 0; e < v_dim; ++e) o[e] = static_cast<float>(acc[e] / sum);
      }
    }
  }
}

}  // namespace strata

namespace strata {

// fp8_ds_mla rows, one value at a time (core/fp8_ds_mla.h).
void ds_mla_quantize_row_reference(const float* row, int64_t row_dim, int64_t latent,
                                   std::byte* dst) {
  const int64_t groups = ds_mla_scale_count(latent);
  for (int64_t g = 0; g < groups; ++g) {
    float amax = 0;
    for (int64_t e = g * kDsMlaGroup; e < latent && e < (g + 1) * kDsMlaGroup; ++e)
      amax = std::max(amax, std::fabs(row[e]));
    const float scale = amax == 0 ? 1.0f : amax / kFp8E4M3Max;
    std::memcpy(dst + latent + 4 * g, &scale, 4);
    for (int64_t e = g * kDsMlaGroup; e < latent && e < (g + 1) * kDsMlaGroup; ++e)
      dst[e] = static_cast<std::byte>(f32_to_fp8_e4m3_reference(row[e] / scale));
  }
  for (int64_t e = latent; e < row_dim; ++e) {
    const uint16_t b = f32_to_bf16(row[e]);
    std::memcpy(dst + latent + 4 * groups + 2 * (e - latent), &b, 2);
  }
}

void ds_mla_dequantize_row_reference(const std::byte* src, int64_t row_dim, int64_t latent,
                                     float scale, float* out) {
  const int64_t groups = ds_mla_scale_count(latent);
  for (int64_t e = 0; e < latent; ++e) {
    float gs;
    std::memcpy(&gs, src + latent + 4 * (e / kDsMlaGroup), 4);
    out[e] = fp8_e4m3_to_f32_reference(static_cast<uint8_t>(src[e])) * (gs * scale);
  }
  for (int64_t e = latent; e < row_dim; ++e) {
    uint16_t b;
    std::memcpy(&b, src + latent + 4 * groups + 2 * (e - latent), 2);
    out[e] = bf16_to_f32(b) * scale;
  }
}

}  // namespace strata
