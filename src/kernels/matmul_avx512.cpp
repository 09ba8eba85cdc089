// AVX-512 matmul over packed weight panels (kernels/packed_weight.h) for F32, F16 and BF16
// weights. One panel of 16 rows is one 512-bit register per k, so the arithmetic is the AVX2
// variant's (every output element one chain of FMAs over k in order, from zero, on the exact f32
// weight values): results are bit-identical to the avx2 and portable variants, whichever path and
// batch computed them. Block-quantized weights go to the VNNI kernel (quant_matmul_avx512vnni.cpp)
// and FP8 to the AVX2 kernels (avx512_matmul_any in fp8_matmul.cpp).
//  - small m (decode): stream the panels, NP panels at a time so NP * MR independent FMA chains
//    hide the FMA latency, converting weights in registers. The software prefetch is a plain
//    (T0) one 4 KiB ahead: on the Intel Xeon (Sapphire/Granite Rapids class) we measured a
//    non-temporal prefetch, which the AVX2 variant uses for Zen, streaming at a quarter of the
//    speed (6.6 against 24.9 GB/s for one thread on a 49 MB BF16 weight).
//  - larger m (prefill): per thread, convert a [kKc x 32] block of two panels to f32 in L1, then a
//    12x32 register-blocked micro-kernel (24 accumulators) runs over the rows; rows are blocked
//    by kMc so the x block stays in L2.
// GCC 12 warns about the undefined source operands of its own AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/aligned_buffer.h"
#include "kernels/kernel_impl.h"

namespace strata::kernels::avx512 {
namespace {

constexpr int64_t kKc = 256;
constexpr int64_t kMc = 144;
constexpr int64_t kMaxGemvRows = 4;
// The gemm micro-kernel: kMr rows x kNp panels, kMr * kNp accumulators (12x2, 8x3 and 6x4 measured
// alike on the Xeon, 270-295 GFLOP/s for 2 threads against a 478 GFLOP/s FMA peak).
constexpr int kMr = 12;  // rows of the gemm micro-kernel
constexpr int kNp = 2;   // panels (16 columns each) of the gemm micro-kernel

float* thread_scratch(int64_t floats) {
  thread_local AlignedBuffer buf;
  if (buf.size() < static_cast<size_t>(floats) * 4) buf.resize(static_cast<size_t>(floats) * 4);
  return buf.as<float>();
}

// The 16 weights of column k of a panel, as f32.
template <DType D>
inline __m512 load_w16(const std::byte* pan, int64_t k) {
  if constexpr (D == DType::kF32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(pan) + k * kPanelRows);
  } else if constexpr (D == DType::kBF16) {
    const __m256i v = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(pan) + k * kPanelRows));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
  } else {
    static_assert(D == DType::kF16);
    const __m256i v = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(pan) + k * kPanelRows));
    return _mm512_cvtph_ps(v);
  }
}

inline void store16(float* y, __m512 v, int64_t cols) {
  if (cols == kPanelRows) {
    _mm512_storeu_ps(y, v);
  } else {
    _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << cols) - 1), v);
  }
}

// ---- small m: stream NP panels at a time
// ---------------------------------------------------------

template <DType D, int MR, int NP>
void gemv_panels(const float* x, int64_t ldx, const PackedWeight& w, int64_t p, float* y,
                 int64_t ldy) {
  const int64_t K = w.k();
  const std::byte* pan[NP];
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) pan[q] = w.panel(p + q);
  __m512 acc[MR][NP];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) acc[i][q] = _mm512_setzero_ps();
  constexpr int64_t kStep = kPanelRows * (D == DType::kF32 ? 4 : 2);  // bytes of one k
  constexpr int64_t kAhead = 4096;  // software prefetch distance, bytes
  for (int64_t k = 0; k < K; ++k) {
    if ((k * kStep) % 64 == 0) {
#pragma GCC unroll 4
      for (int q = 0; q < NP; ++q)
        _mm_prefetch(reinterpret_cast<const char*>(pan[q] + k * kStep + kAhead), _MM_HINT_T0);
    }
    __m512 wv[NP];
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) wv[q] = load_w16<D>(pan[q], k);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const __m512 xb = _mm512_set1_ps(x[i * ldx + k]);
#pragma GCC unroll 4
      for (int q = 0; q < NP; ++q) acc[i][q] = _mm512_fmadd_ps(xb, wv[q], acc[i][q]);
    }
  }
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) {
    const int64_t cols = std::min<int64_t>(kPanelRows, w.n() - (p + q) * kPanelRows);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) store16(y + i * ldy + (p + q) * kPanelRows, acc[i][q], cols);
  }
}

template <DType D, int MR>
void gemv_typed(const float* x, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
                ThreadPool& pool) {
  // Enough independent chains per step to cover the FMA latency: MR * NP >= 4.
  constexpr int NP = MR >= 4 ? 1 : (MR == 1 ? 4 : 2);
  pool.parallel_for(w.num_panels(), NP, [&](int64_t p0, int64_t p1) {
    int64_t p = p0;
    for (; p + NP <= p1; p += NP) gemv_panels<D, MR, NP>(x, ldx, w, p, y, ldy);
    for (; p < p1; ++p) gemv_panels<D, MR, 1>(x, ldx, w, p, y, ldy);
  });
}

template <int MR>
void gemv(const float* x, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
          ThreadPool& pool) {
  switch (w.dtype()) {
    case DType::kF32:
      return gemv_typed<DType::kF32, MR>(x, ldx, w, y, ldy, pool);
    case DType::kBF16:
      return gemv_typed<DType::kBF16, MR>(x, ldx, w, y, ldy, pool);
    case DType::kF16:
      return gemv_typed<DType::kF16, MR>(x, ldx, w, y, ldy, pool);
    default:
      return;
  }
}

// ---- larger m: convert two panels' k-block to f32, then a 12x32 micro-kernel --------------------

template <DType D>
void panel_block_to_f32(const PackedWeight& w, int64_t p, int64_t k0, int64_t k1, float* dst,
                        int64_t ld) {
  const std::byte* pan = w.panel(p);
  for (int64_t k = k0; k < k1; ++k) _mm512_store_ps(dst + (k - k0) * ld, load_w16<D>(pan, k));
}

// c[MR][16 * NP] (row stride ldc) = (first ? 0 : c) + x[MR][kc] * wb[kc][16 * NP] (row stride
// 16 * NP).
template <int MR, int NP>
inline void ukernel(const float* x, int64_t ldx, const float* wb, int64_t kc, float* c, int64_t ldc,
                    bool first) {
  constexpr int64_t ldw = kPanelRows * NP;
  __m512 acc[MR][NP];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q)
      acc[i][q] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(c + i * ldc + q * kPanelRows);
  for (int64_t k = 0; k < kc; ++k) {
    __m512 wv[NP];
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) wv[q] = _mm512_load_ps(wb + k * ldw + q * kPanelRows);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512 b = _mm512_set1_ps(x[i * ldx + k]);
#pragma GCC unroll 4
      for (int q = 0; q < NP; ++q) acc[i][q] = _mm512_fmadd_ps(b, wv[q], acc[i][q]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) _mm512_storeu_ps(c + i * ldc + q * kPanelRows, acc[i][q]);
}

// The last rows (fewer than kMr) of a row block: one micro-kernel of exactly R rows.
template <int NP, int R>
inline void ukernel_tail(int64_t rows, const float* x, int64_t ldx, const float* wb, int64_t kc,
                         float* c, int64_t ldc, bool first) {
  if constexpr (R > 0) {
    if (rows == R) return ukernel<R, NP>(x, ldx, wb, kc, c, ldc, first);
    ukernel_tail<NP, R - 1>(rows, x, ldx, wb, kc, c, ldc, first);
  }
}

template <int NP>
void ukernel_rows(int64_t rows, const float* x, int64_t ldx, const float* wb, int64_t kc, float* c,
                  int64_t ldc, bool first) {
  int64_t i = 0;
  for (; i + kMr <= rows; i += kMr)
    ukernel<kMr, NP>(x + i * ldx, ldx, wb, kc, c + i * ldc, ldc, first);
  ukernel_tail<NP, kMr - 1>(rows - i, x + i * ldx, ldx, wb, kc, c + i * ldc, ldc, first);
}

// ukernel_rows for a group of np <= NP panels.
template <int NP>
inline void ukernel_group(int np, int64_t rows, const float* x, int64_t ldx, const float* wb,
                          int64_t kc, float* c, int64_t ldc, bool first) {
  if constexpr (NP > 0) {
    if (np == NP) return ukernel_rows<NP>(rows, x, ldx, wb, kc, c, ldc, first);
    ukernel_group<NP - 1>(np, rows, x, ldx, wb, kc, c, ldc, first);
  }
}

template <DType D>
void gemm_typed(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                int64_t ldy, ThreadPool& pool) {
  const int64_t K = w.k(), N = w.n();
  constexpr int64_t kCols = kNp * kPanelRows;
  const int64_t groups = (w.num_panels() + kNp - 1) / kNp;
  pool.parallel_for(groups, 1, [&](int64_t g0, int64_t g1) {
    float* wb = thread_scratch(kKc * kCols + kMc * kCols);
    float* edge = wb + kKc * kCols;  // [kMc][kCols] for a last group narrower than kCols
    for (int64_t m0 = 0; m0 < m; m0 += kMc) {
      const int64_t mb = std::min(kMc, m - m0);
      for (int64_t k0 = 0; k0 < K; k0 += kKc) {
        const int64_t k1 = std::min(K, k0 + kKc);
        const bool first = k0 == 0;
        for (int64_t g = g0; g < g1; ++g) {
          const int64_t p = g * kNp;
          const int np = static_cast<int>(std::min<int64_t>(kNp, w.num_panels() - p));
          const int64_t col0 = p * kPanelRows;
          const int64_t cols = std::min<int64_t>(np * kPanelRows, N - col0);
          const bool full = cols == kCols;
          float* c = full ? y + m0 * ldy + col0 : edge;
          const int64_t ldc = full ? ldy : kCols;
          for (int q = 0; q < np; ++q)
            panel_block_to_f32<D>(w, p + q, k0, k1, wb + q * kPanelRows, np * kPanelRows);
          const float* xb = x + m0 * ldx + k0;
          ukernel_group<kNp>(np, mb, xb, ldx, wb, k1 - k0, c, ldc, first);
          if (!full && k1 == K) {
            for (int64_t i = 0; i < mb; ++i)
              std::memcpy(y + (m0 + i) * ldy + col0, edge + i * kCols, cols * 4);
          }
        }
      }
    }
  });
}

void gemm(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
          ThreadPool& pool) {
  switch (w.dtype()) {
    case DType::kF32:
      return gemm_typed<DType::kF32>(x, m, ldx, w, y, ldy, pool);
    case DType::kBF16:
      return gemm_typed<DType::kBF16>(x, m, ldx, w, y, ldy, pool);
    case DType::kF16:
      return gemm_typed<DType::kF16>(x, m, ldx, w, y, ldy, pool);
    default:
      return;
  }
}

}  // namespace

bool matmul_supports(DType d) {
  return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16;
}

void matmul(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
            ThreadPool& pool) {
  if (m <= 0) return;
  if (m > kMaxGemvRows) return gemm(x, m, ldx, w, y, ldy, pool);
  switch (m) {
    case 1:
      return gemv<1>(x, ldx, w, y, ldy, pool);
    case 2:
      return gemv<2>(x, ldx, w, y, ldy, pool);
    case 3:
      return gemv<3>(x, ldx, w, y, ldy, pool);
    default:
      return gemv<4>(x, ldx, w, y, ldy, pool);
  }
}

}  // namespace strata::kernels::avx512

namespace strata::kernels::avx512 {

// Twelve independent 16-lane FMA chains with distinct values, `iterations` steps each (the
// machine's f32 FMA peak for bench latency). seeds: 12 * 16 floats. Returns the FLOPs performed.
double fma_chains(int64_t iterations, const float* seeds) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_loadu_ps(seeds + 16 * i);
  const __m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f);  // converges, no overflow
  for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return static_cast<double>(iterations) * 12 * 32;
}

}  // namespace strata::kernels::avx512
