// Portable FP8 matmul (plain C++, the same blocking as the portable matmul) and the op tables that
// dispatch F8E4M3 weights to the FP8 kernels.
#include <algorithm>
#include <array>
#include <cstring>

#include "core/aligned_buffer.h"
#include "kernels/backend.h"
#include "kernels/dsv4.h"
#include "kernels/fp8_matmul.h"
#include "kernels/kernel_impl.h"
#include "kernels/mla_impl.h"
#include "kernels/quant_weight.h"

namespace strata::kernels {
namespace {

float* thread_scratch(int64_t floats) {
  thread_local AlignedBuffer buf;
  if (buf.size() < static_cast<size_t>(floats) * 4) buf.resize(static_cast<size_t>(floats) * 4);
  return buf.as<float>();
}

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t;
    for (int i = 0; i < 256; ++i) t[i] = fp8_e4m3_to_f32(static_cast<uint8_t>(i));
    return t;
  }();
  return table;
}

// Columns [0, K) of panel p as f32 [K][16]: e4m3 * row scale.
void fp8_panel_to_f32(const PackedWeight& w, int64_t p, float* dst) {
  const auto& table = e4m3_table();
  const std::byte* pan = w.panel(p);
  const int64_t K = w.k(), bk = w.fp8_block_k();
  for (int64_t b = 0; b < w.fp8_num_blocks(); ++b) {
    const std::byte* blk = pan + w.fp8_block_offset(b);
    float scale[kPanelRows];
    std::memcpy(scale, blk, sizeof(scale));
    const auto* q = reinterpret_cast<const uint8_t*>(blk + PackedWeight::kFp8ScaleBytes);
    const int64_t c0 = b * bk, c1 = std::min(K, c0 + bk);
    for (int64_t c = c0; c < c1; ++c)
      for (int j = 0; j < kPanelRows; ++j)
        dst[c * kPanelRows + j] = table[q[(c - c0) * kPanelRows + j]] * scale[j];
  }
}

void portable_matmul_any(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                         int64_t ldy, ThreadPool& pool) {
  if (w.dtype() == DType::kF8E4M3) return fp8_matmul_portable(x, m, ldx, w, y, ldy, pool);
  portable::kOps.matmul(x, m, ldx, w, y, ldy, pool);
}

void avx2_matmul_any(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                     int64_t ldy, ThreadPool& pool) {
  if (w.dtype() == DType::kF8E4M3) return fp8_matmul_avx2(x, m, ldx, w, y, ldy, pool);
  avx2::kOps.matmul(x, m, ldx, w, y, ldy, pool);
}

void avx512_matmul_any(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                       int64_t ldy, ThreadPool& pool) {
  if (avx512::matmul_supports(w.dtype())) return avx512::matmul(x, m, ldx, w, y, ldy, pool);
  if (is_block_quant(w.dtype()) && cpu_features().avx512_vnni)
    return quant_matmul_avx512vnni(x, m, ldx, w, y, ldy, pool);
  avx2_matmul_any(x, m, ldx, w, y, ldy, pool);
}

}  // namespace

void fp8_matmul_portable(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                         int64_t ldy, ThreadPool& pool) {
  const int64_t K = w.k(), N = w.n();
  pool.parallel_for(w.num_panels(), 1, [&](int64_t p0, int64_t p1) {
    float* wbuf = thread_scratch(K * kPanelRows);
    for (int64_t p = p0; p < p1; ++p) {
      fp8_panel_to_f32(w, p, wbuf);
      const int64_t cols = std::min<int64_t>(kPanelRows, N - p * kPanelRows);
      for (int64_t i = 0; i < m; ++i) {
        float acc[kPanelRows] = {};
        const float* xr = x + i * ldx;
        for (int64_t k = 0; k < K; ++k) {
          const float xv = xr[k];
          const float* wk = wbuf + k * kPanelRows;
          for (int j = 0; j < kPanelRows; ++j) acc[j] += xv * wk[j];
        }
        std::memcpy(y + i * ldy + p * kPanelRows, acc, cols * sizeof(float));
      }
    }
  });
}

const KernelOps& portable_ops_with_fp8() {
  static const KernelOps ops = [] {
    KernelOps o = portable::kOps;
    o.matmul = portable_matmul_any;
    return o;
  }();
  return ops;
}

// Built here, in a file compiled without AVX-512 flags: this runs at first use on any CPU.
const KernelOps& avx512_ops() {
  static const KernelOps ops = [] {
    KernelOps o = avx2::kOps;
    o.name = "avx512";
    o.matmul = avx512_matmul_any;
    o.attention = avx512::attention;
    o.dsa_select = dsa_select_avx512;
    o.mxfp4_matmul = mxfp4_matmul_avx512;
    o.dsv4_indexer_scores = dsv4_indexer_scores_avx512;
    o.dsv4_attention = dsv4_attention_avx512;
    o.dsv4_unpack_fp8_row = dsv4_unpack_fp8_row_avx512;
    avx512::fill_elementwise_ops(&o);
    return o;
  }();
  return ops;
}

const KernelOps& avx2_ops_with_fp8() {
  static const KernelOps ops = [] {
    KernelOps o = avx2::kOps;
    o.matmul = avx2_matmul_any;
    return o;
  }();
  return ops;
}

}  // namespace strata::kernels
