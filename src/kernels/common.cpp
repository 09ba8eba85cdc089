#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/check.h"
#include "kernels/kernel_impl.h"

namespace strata {

int64_t attention_scratch_floats(int num_heads, int num_kv_heads, int head_dim,
                                 int64_t max_seq_len) {
  const int64_t group = num_heads / std::max(1, num_kv_heads);
  // The AVX2 kernel works on tiles of up to kAttentionTileRows query rows (ops_avx2.cpp):
  // accumulators [rows * group, head_dim] + 40 converted rows + scores [rows * group,
  // max_seq_len + 8] (a tile shrinks to fewer rows when a sequence is long; scores are capped at
  // 16 tile rows of 4096 keys, at least one row of max_seq_len: the AVX-512 prefill tile keeps
  // 16 query rows up to 4096 keys). The other variants need less.
  const int64_t rows = kernels::kAttentionTileRows;
  const int64_t len = max_seq_len + 8;
  const int64_t scores = group * std::max(len, rows * std::min<int64_t>(len, 4096 + 16));
  return rows * group * head_dim + 40 * head_dim + scores + 64;
}

namespace kernels {

void read_kv_row(const PagedKvLayer& kv, const std::byte* base, int64_t slot, int64_t kv_head,
                 float scale, float* out) {
  const std::byte* p = base + kv.offset(slot, kv_head);
  dequantize_row(kv.dtype, p, out, kv.head_dim);
  if (kv.dtype == DType::kF8E4M3) {
    const float* rs = base == kv.k ? kv.k_row_scale : kv.v_row_scale;
    if (rs != nullptr) scale *= rs[kv.row_index(slot, kv_head)];
  }
  if (scale != 1.0f)
    for (int64_t e = 0; e < kv.head_dim; ++e) out[e] *= scale;
}

void write_kv_rows(const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t m,
                   const int64_t* slots, const PagedKvLayer& kv) {
  float tmp[1024];
  STRATA_CHECK(kv.head_dim <= 1024) << "head_dim " << kv.head_dim;
  for (int64_t i = 0; i < m; ++i) {
    if (slots[i] < 0) continue;  // padding token: not cached
    for (int64_t h = 0; h < kv.num_kv_heads; ++h) {
      for (int part = 0; part < 2; ++part) {
        const float* src = (part == 0 ? k + i * ldk : v + i * ldv) + h * kv.head_dim;
        std::byte* dst = (part == 0 ? kv.k : kv.v) + kv.offset(slots[i], h);
        if (kv.dtype == DType::kF8E4M3) {
          // Scale the row into e4m3's range: value = q * row_scale * layer_scale.
          const float layer_scale = part == 0 ? kv.k_scale : kv.v_scale;
          float* row_scales = part == 0 ? kv.k_row_scale : kv.v_row_scale;
          float amax = 0;
          for (int64_t e = 0; e < kv.head_dim; ++e) amax = std::max(amax, std::fabs(src[e]));
          float rs = row_scales != nullptr && amax > 0 ? amax / (kFp8E4M3Max * layer_scale) : 1.0f;
          if (row_scales != nullptr) row_scales[kv.row_index(slots[i], h)] = rs;
          const float inv = 1.0f / (rs * layer_scale);
          for (int64_t e = 0; e < kv.head_dim; ++e) tmp[e] = src[e] * inv;
          src = tmp;
        }
        quantize_row(kv.dtype, src, dst, kv.head_dim);
      }
    }
  }
}

}  // namespace kernels

}  // namespace strata
