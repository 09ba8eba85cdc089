// Block-quantized weights: the generic form of each GGUF block, packing into panels, activation
// quantization and the plain integer matmul (see quant_weight.h).
#include "kernels/quant_weight.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/check.h"
#include "kernels/packed_weight.h"

namespace strata {
namespace {

const int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};

uint16_t u16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

void set_d(DecodedBlock* o, uint16_t d, uint16_t dmin) {
  o->d_bits = d;
  o->dmin_bits = dmin;
  o->d = f16_to_f32(d);
  o->dmin = f16_to_f32(dmin);
}

// Q4_K / Q5_K: 6-bit scale and min of group j from the 12 packed bytes.
void k4_scale_min(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

}  // namespace

bool is_block_quant(DType t) {
  return t == DType::kQ8_0 || dtype_is_gguf_quant(t) || t == DType::kW4G || t == DType::kW8G;
}

bool grouped_int_layout(int bits, int64_t group, int64_t k, QuantLayout* out) {
  if ((bits != 4 && bits != 8) || group <= 0 || k % group != 0) return false;
  int super = 0;
  for (int s : {128, 64, 32}) {
    if (group % s == 0) {
      super = s;
      break;
    }
  }
  if (super == 0) return false;
  *out = {super, super, bits, bits == 8 ? 128 : 0, true, true};
  out->group = 1;
  return true;
}

QuantLayout quant_layout(DType t, int64_t k) {
  QuantLayout l;
  switch (t) {
    case DType::kQ8_0:
      l = {32, 32, 8, 128, false, false};
      break;
    case DType::kQ4_0:
      l = {32, 32, 4, 8, false, false};
      break;
    case DType::kQ4_1:
      l = {32, 32, 4, 0, false, true};
      break;
    case DType::kQ5_0:
      l = {32, 32, 5, 16, false, false};
      break;
    case DType::kQ5_1:
      l = {32, 32, 5, 0, false, true};
      break;
    case DType::kIQ4_NL:
      l = {32, 32, 8, 128, false, false};
      break;
    case DType::kQ2_K:
      l = {256, 16, 4, 0, true, true};
      break;
    case DType::kQ3_K:
      l = {256, 16, 4, 4, true, false};
      break;
    case DType::kQ4_K:
      l = {256, 32, 4, 0, true, true};
      break;
    case DType::kQ5_K:
      l = {256, 32, 5, 0, true, true};
      break;
    case DType::kQ6_K:
      l = {256, 16, 6, 32, true, false};
      break;
    case DType::kIQ4_XS:
      l = {256, 32, 8, 128, true, false};
      break;
    default:
      STRATA_CHECK(false) << "quant_layout: " << dtype_name(t) << " is not block-quantized";
  }
  l.group = (l.super == 32 && k % 64 == 0) ? 2 : 1;
  return l;
}

void decode_quant_block(DType t, const void* block, DecodedBlock* o) {
  const auto* b = static_cast<const uint8_t*>(block);
  std::fill(std::begin(o->sc), std::end(o->sc), int8_t{1});
  std::fill(std::begin(o->m), std::end(o->m), uint8_t{1});
  switch (t) {
    case DType::kQ8_0:
      set_d(o, u16(b), 0);
      for (int i = 0; i < 32; ++i)
        o->q[i] = static_cast<uint8_t>(static_cast<int8_t>(b[2 + i]) + 128);
      return;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kIQ4_NL: {
      const bool with_min = t == DType::kQ4_1;
      // Q4_1: x = d*q + m, so dmin = -m (the f16 sign bit flipped: exact).
      set_d(o, u16(b), with_min ? static_cast<uint16_t>(u16(b + 2) ^ 0x8000u) : 0);
      const uint8_t* qs = b + (with_min ? 4 : 2);
      for (int j = 0; j < 16; ++j) {
        int lo = qs[j] & 0xF, hi = qs[j] >> 4;
        if (t == DType::kIQ4_NL) {
          lo = kIq4Values[lo] + 128;
          hi = kIq4Values[hi] + 128;
        }
        o->q[j] = static_cast<uint8_t>(lo);
        o->q[j + 16] = static_cast<uint8_t>(hi);
      }
      return;
    }
    case DType::kQ5_0:
    case DType::kQ5_1: {
      const bool with_min = t == DType::kQ5_1;
      set_d(o, u16(b), with_min ? static_cast<uint16_t>(u16(b + 2) ^ 0x8000u) : 0);
      const uint8_t* p = b + (with_min ? 4 : 2);
      uint32_t qh;
      std::memcpy(&qh, p, 4);
      const uint8_t* qs = p + 4;
      for (int j = 0; j < 16; ++j) {
        o->q[j] = static_cast<uint8_t>((qs[j] & 0xF) | (((qh >> j) & 1) << 4));
        o->q[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
      }
      return;
    }
    case DType::kQ2_K: {
      set_d(o, u16(b + 80), u16(b + 82));
      for (int j = 0; j < 16; ++j) {
        o->sc[j] = static_cast<int8_t>(b[j] & 0xF);
        o->m[j] = static_cast<uint8_t>(b[j] >> 4);
      }
      const uint8_t* qs = b + 16;
      for (int i = 0; i < 256; ++i)
        o->q[i] = (qs[(i / 128) * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3;
      return;
    }
    case DType::kQ3_K: {
      set_d(o, u16(b + 108), 0);
      const uint8_t* s = b + 96;
      for (int i = 0; i < 16; ++i) {
        const int low = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
        const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        o->sc[i] = static_cast<int8_t>((low | (high << 4)) - 32);
      }
      const uint8_t* hmask = b;
      const uint8_t* qs = b + 32;
      for (int i = 0; i < 256; ++i) {
        const int low = (qs[(i / 128) * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3;
        const int hbit = (hmask[i % 32] >> (i / 32)) & 1;
        o->q[i] = static_cast<uint8_t>(low | (hbit << 2));  // value low + 4*hbit - 4: z = 4
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      set_d(o, u16(b), u16(b + 2));
      const uint8_t* scales = b + 4;
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        k4_scale_min(j, scales, &sc, &m);
        o->sc[j] = static_cast<int8_t>(sc);
        o->m[j] = static_cast<uint8_t>(m);
      }
      const bool five = t == DType::kQ5_K;
      const uint8_t* qh = b + 16;
      const uint8_t* qs = b + (five ? 48 : 16);
      for (int i = 0; i < 256; ++i) {
        const uint8_t byte = qs[(i / 64) * 32 + i % 32];
        int q = (i / 32) % 2 == 0 ? (byte & 0xF) : (byte >> 4);
        if (five) q |= ((qh[i % 32] >> (i / 32)) & 1) << 4;
        o->q[i] = static_cast<uint8_t>(q);
      }
      return;
    }
    case DType::kQ6_K: {
      set_d(o, u16(b + 208), 0);
      for (int j = 0; j < 16; ++j) o->sc[j] = static_cast<int8_t>(b[192 + j]);
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      for (int i = 0; i < 256; ++i) {
        const int h = i / 128, l = i % 32, g = (i % 128) / 32;
        const uint8_t lb = ql[h * 64 + l + 32 * (g % 2)];
        const int low = g < 2 ? (lb & 0xF) : (lb >> 4);
        const int high = (qh[h * 32 + l] >> (2 * g)) & 3;
        o->q[i] = static_cast<uint8_t>(low | (high << 4));
      }
      return;
    }
    case DType::kIQ4_XS: {
      set_d(o, u16(b), 0);
      const uint16_t scales_h = u16(b + 2);
      const uint8_t* scales_l = b + 4;
      const uint8_t* qs = b + 8;
      for (int g = 0; g < 8; ++g) {
        const int ls =
            ((scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((scales_h >> (2 * g)) & 3) << 4);
        o->sc[g] = static_cast<int8_t>(ls - 32);
        for (int j = 0; j < 16; ++j) {
          o->q[g * 32 + j] = static_cast<uint8_t>(kIq4Values[qs[g * 16 + j] & 0xF] + 128);
          o->q[g * 32 + j + 16] = static_cast<uint8_t>(kIq4Values[qs[g * 16 + j] >> 4] + 128);
        }
      }
      return;
    }
    default:
      STRATA_CHECK(false) << "decode_quant_block: " << dtype_name(t);
  }
}

namespace kernels {

QuantizedActivations quantize_activations(const float* x, int64_t m, int64_t ldx, int64_t k,
                                          int super, int sub) {
  thread_local AlignedBuffer buf;
  const int64_t nsb = k / super, nsub = super / sub;
  const size_t xq_bytes = (static_cast<size_t>(m * k) + 63) / 64 * 64;
  const size_t dx_bytes = (static_cast<size_t>(m * nsb) * 4 + 63) / 64 * 64;
  const size_t need = xq_bytes + dx_bytes + static_cast<size_t>(m * nsb * nsub) * 4 + 64;
  if (buf.size() < need) buf.resize(need);
  QuantizedActivations a;
  a.m = m;
  a.k = k;
  a.super = super;
  a.sub = sub;
  a.xq = reinterpret_cast<int8_t*>(buf.data());
  a.dx = reinterpret_cast<float*>(buf.data() + xq_bytes);
  a.xs = reinterpret_cast<int32_t*>(buf.data() + xq_bytes + dx_bytes);
  for (int64_t i = 0; i < m; ++i) {
    const float* xr = x + i * ldx;
    for (int64_t s = 0; s < nsb; ++s) {
      const float* v = xr + s * super;
      float amax = 0;
      for (int c = 0; c < super; ++c) amax = std::max(amax, std::fabs(v[c]));
      const float d = amax / 127.0f;
      const float id = amax > 0 ? 127.0f / amax : 0.0f;
      a.dx[i * nsb + s] = d;
      int8_t* q = a.xq + i * k + s * super;
      for (int c = 0; c < super; ++c) q[c] = static_cast<int8_t>(std::nearbyint(v[c] * id));
      for (int64_t j = 0; j < nsub; ++j) {
        int32_t sum = 0;
        for (int c = 0; c < sub; ++c) sum += q[j * sub + c];
        a.xs[(i * nsb + s) * nsub + j] = sum;
      }
    }
  }
  return a;
}

void quant_matmul_reference(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                            int64_t ldy, ThreadPool& pool) {
  const QuantLayout& L = w.quant_layout();
  const int64_t K = w.k(), N = w.n(), nsb = K / L.super, nsub = L.num_sub();
  const QuantizedActivations a = quantize_activations(x, m, ldx, K, L.super, L.sub);
  pool.parallel_for(w.num_panels(), 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const auto* pan = reinterpret_cast<const uint8_t*>(w.panel(p));
      const int rows = static_cast<int>(std::min<int64_t>(kPanelRows, N - p * kPanelRows));
      for (int64_t i = 0; i < m; ++i) {
        for (int r = 0; r < rows; ++r) {
          float acc = 0;
          for (int64_t s = 0; s < nsb; ++s) {
            const int64_t unit = s / L.group, g = s % L.group;
            const uint8_t* u = pan + unit * L.unit_bytes();
            const float d = f16_to_f32(u16(u + (g * 16 + r) * 2));
            const float dmin =
                L.has_min ? f16_to_f32(u16(u + L.group * 32 + (g * 16 + r) * 2)) : 0.0f;
            const uint8_t* sb = u + L.header_bytes() + g * (L.scale_bytes() + L.quant_bytes());
            const auto* sc = reinterpret_cast<const int8_t*>(sb);
            const uint8_t* mins = sb + nsub * 16;
            const uint8_t* quants = sb + L.scale_bytes();
            const int8_t* xq = a.xq + i * K + s * L.super;
            const int32_t* xs = a.xs + (i * nsb + s) * nsub;
            int32_t T = 0, M = 0;
            for (int64_t j = 0; j < nsub; ++j) {
              const uint8_t* qs = quants + j * L.sub_quant_bytes();
              int32_t isum = 0;
              for (int cc = 0; cc < L.sub; ++cc)
                isum += quant_get(qs, L, r, cc) * xq[j * L.sub + cc];
              const int32_t scj = L.has_sc ? sc[j * 16 + r] : 1;
              T += scj * (isum - L.zero * xs[j]);
              if (L.has_min) M += (L.has_sc ? mins[j * 16 + r] : 1) * xs[j];
            }
            float t = d * static_cast<float>(T);
            if (L.has_min) t = std::fma(-dmin, static_cast<float>(M), t);
            acc = std::fma(a.dx[i * nsb + s], t, acc);
          }
          y[i * ldy + p * kPanelRows + r] = acc;
        }
      }
    }
  });
}

}  // namespace kernels
}  // namespace strata
