// Reference dequantization of GGUF (ggml) quantized blocks: each block type's bytes read field by
// field and turned into floats with the format's formula, one value at a time. The fast kernels
// never call this per token (they repack the blocks at load, kernels/quant_weight.cpp); it serves
// embeddings, tests and conversions. Layouts (little-endian, "d"/"dmin" are f16):
//   Q4_0   d, qs[16]           x = d * (nibble - 8); byte j holds values j (low) and j+16 (high)
//   Q4_1   d, m, qs[16]        x = d * nibble + m
//   Q5_0   d, qh[4], qs[16]    5th bit of value j is bit j of qh (as a little-endian u32)
//   Q5_1   d, m, qh[4], qs[16] x = d * q5 + m
//   IQ4_NL d, qs[16]           x = d * kIq4Values[nibble]
//   Q2_K   scales[16], qs[64], d, dmin: 16 groups of 16; scale byte = 4-bit scale | 4-bit min << 4;
//          x = d * sc * q2 - dmin * m
//   Q3_K   hmask[32], qs[64], scales[12], d: 16 groups of 16 with 6-bit scales (biased by 32);
//          x = d * (sc - 32) * (q2 + 4 * hbit - 4)
//   Q4_K   d, dmin, scales[12], qs[128]: 8 groups of 32 with 6-bit scales and mins;
//          x = d * sc * q4 - dmin * m
//   Q5_K   d, dmin, scales[12], qh[32], qs[128]: as Q4_K with a 5th bit from qh
//   Q6_K   ql[128], qh[64], scales[16] (int8), d: 16 groups of 16; x = d * sc * (q6 - 32)
//   IQ4_XS d, scales_h (u16), scales_l[4], qs[128]: 8 groups of 32 with 6-bit scales (biased by
//          32); x = d * (sc - 32) * kIq4Values[nibble]
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace strata {
namespace {

const int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// The 6-bit scale and min of group j (0..7) from the 12 packed bytes of Q4_K / Q5_K.
void k4_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The 16 6-bit scales (0..63, before the bias of 32) of Q3_K from its 12 packed bytes: the low
// four bits of scales 0..7 are the low nibbles of bytes 0..7, of scales 8..15 their high nibbles;
// the top two bits of scale i are byte 8 + i%4 at shift 2*(i/4).
void q3_scales(const uint8_t* s, int* out) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
    const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = low | (high << 4);
  }
}

void block_q4_0(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((b[2 + j] & 0xF) - 8);
    y[j + 16] = d * static_cast<float>((b[2 + j] >> 4) - 8);
  }
}

void block_q4_1(const uint8_t* b, float* y) {
  const float d = half(b), m = half(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(b[4 + j] & 0xF) + m;
    y[j + 16] = d * static_cast<float>(b[4 + j] >> 4) + m;
  }
}

void block_q5(const uint8_t* b, bool with_min, float* y) {
  const float d = half(b), m = with_min ? half(b + 2) : 0.0f;
  const uint8_t* qh_bytes = b + (with_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const uint8_t* qs = qh_bytes + 4;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0xF) | (((qh >> j) & 1) << 4);
    const int hi = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    if (with_min) {
      y[j] = d * static_cast<float>(lo) + m;
      y[j + 16] = d * static_cast<float>(hi) + m;
    } else {
      y[j] = d * static_cast<float>(lo - 16);
      y[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

void block_iq4_nl(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4Values[b[2 + j] & 0xF]);
    y[j + 16] = d * static_cast<float>(kIq4Values[b[2 + j] >> 4]);
  }
}

// Value i (0..255) of a K-quant super-block is in 128-value half h = i / 128; inside it, 2-bit
// fields come from byte (i % 32) of that half's 32 bytes at shift 2 * ((i % 128) / 32).
void block_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = half(b + 80), dmin = half(b + 82);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, shift = 2 * ((i % 128) / 32);
    const int q = (qs[h * 32 + i % 32] >> shift) & 3;
    const uint8_t s = scales[i / 16];
    y[i] =
        d * static_cast<float>(s & 0xF) * static_cast<float>(q) - dmin * static_cast<float>(s >> 4);
  }
}

void block_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  int sc[16];
  q3_scales(b + 96, sc);
  const float d = half(b + 108);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, shift = 2 * ((i % 128) / 32);
    const int low = (qs[h * 32 + i % 32] >> shift) & 3;
    const int hbit = (hmask[i % 32] >> (i / 32)) & 1;
    y[i] = d * static_cast<float>(sc[i / 16] - 32) * static_cast<float>(low + 4 * hbit - 4);
  }
}

void block_q4_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int i = 0; i < 256; ++i) {
    int sc, m;
    k4_scale_min(i / 32, scales, &sc, &m);
    const uint8_t byte = qs[(i / 64) * 32 + i % 32];
    const int q = (i / 32) % 2 == 0 ? (byte & 0xF) : (byte >> 4);
    y[i] = d * static_cast<float>(sc) * static_cast<float>(q) - dmin * static_cast<float>(m);
  }
}

void block_q5_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int i = 0; i < 256; ++i) {
    int sc, m;
    k4_scale_min(i / 32, scales, &sc, &m);
    const uint8_t byte = qs[(i / 64) * 32 + i % 32];
    const int low = (i / 32) % 2 == 0 ? (byte & 0xF) : (byte >> 4);
    const int q = low | (((qh[i % 32] >> (i / 32)) & 1) << 4);
    y[i] = d * static_cast<float>(sc) * static_cast<float>(q) - dmin * static_cast<float>(m);
  }
}

// Q6_K: in each 128-value half, value l + 32 * g (g = 0..3) takes its low nibble from ql byte
// (l + 32 * (g % 2)) (low nibble for g < 2, high for g >= 2) and its top two bits from qh byte l
// at shift 2 * g.
void block_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, l = i % 32, g = (i % 128) / 32;
    const uint8_t lb = ql[h * 64 + l + 32 * (g % 2)];
    const int low = g < 2 ? (lb & 0xF) : (lb >> 4);
    const int high = (qh[h * 32 + l] >> (2 * g)) & 3;
    y[i] = d * static_cast<float>(sc[i / 16]) * static_cast<float>((low | (high << 4)) - 32);
  }
}

void block_iq4_xs(const uint8_t* b, float* y) {
  const float d = half(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  for (int g = 0; g < 8; ++g) {
    const int ls = ((scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((scales_h >> (2 * g)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[g * 32 + j] = dl * static_cast<float>(kIq4Values[qs[g * 16 + j] & 0xF]);
      y[g * 32 + j + 16] = dl * static_cast<float>(kIq4Values[qs[g * 16 + j] >> 4]);
    }
  }
}

}  // namespace

void dequantize_gguf_row(DType t, const void* src, float* dst, int64_t n) {
  const int64_t be = dtype_block_elems(t), bb = dtype_block_bytes(t);
  STRATA_CHECK(dtype_is_gguf_quant(t) && n % be == 0)
      << "dequantize_gguf_row: " << dtype_name(t) << " row of " << n << " elements";
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n / be; ++i, b += bb, dst += be) {
    switch (t) {
      case DType::kQ4_0:
        block_q4_0(b, dst);
        break;
      case DType::kQ4_1:
        block_q4_1(b, dst);
        break;
      case DType::kQ5_0:
        block_q5(b, false, dst);
        break;
      case DType::kQ5_1:
        block_q5(b, true, dst);
        break;
      case DType::kIQ4_NL:
        block_iq4_nl(b, dst);
        break;
      case DType::kQ2_K:
        block_q2_k(b, dst);
        break;
      case DType::kQ3_K:
        block_q3_k(b, dst);
        break;
      case DType::kQ4_K:
        block_q4_k(b, dst);
        break;
      case DType::kQ5_K:
        block_q5_k(b, dst);
        break;
      case DType::kQ6_K:
        block_q6_k(b, dst);
        break;
      case DType::kIQ4_XS:
        block_iq4_xs(b, dst);
        break;
      default:
        break;
    }
  }
}

}  // namespace strata
