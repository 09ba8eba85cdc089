#include "core/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "core/check.h"

namespace strata {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kF8E4M3:
      return "f8_e4m3";
    case DType::kQ8_0:
      return "q8_0";
    case DType::kI8:
      return "i8";
    case DType::kU8:
      return "u8";
    case DType::kI16:
      return "i16";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kF64:
      return "f64";
    case DType::kBool:
      return "bool";
    case DType::kQ4_0:
      return "q4_0";
    case DType::kQ4_1:
      return "q4_1";
    case DType::kQ5_0:
      return "q5_0";
    case DType::kQ5_1:
      return "q5_1";
    case DType::kQ2_K:
      return "q2_k";
    case DType::kQ3_K:
      return "q3_k";
    case DType::kQ4_K:
      return "q4_k";
    case DType::kQ5_K:
      return "q5_k";
    case DType::kQ6_K:
      return "q6_k";
    case DType::kIQ4_NL:
      return "iq4_nl";
    case DType::kIQ4_XS:
      return "iq4_xs";
    case DType::kW4G:
      return "w4g";
    case DType::kW8G:
      return "w8g";
  }
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "f32" || n == "float32" || n == "float" || n == "fp32")
    *out = DType::kF32;
  else if (n == "f16" || n == "float16" || n == "half" || n == "fp16")
    *out = DType::kF16;
  else if (n == "bf16" || n == "bfloat16")
    *out = DType::kBF16;
  else if (n == "f8_e4m3" || n == "f8_e4m3fn" || n == "fp8" || n == "fp8_e4m3" || n == "e4m3")
    *out = DType::kF8E4M3;
  else if (n == "q8_0")
    *out = DType::kQ8_0;
  else if (n == "i8" || n == "int8")
    *out = DType::kI8;
  else if (n == "u8" || n == "uint8")
    *out = DType::kU8;
  else if (n == "i16" || n == "int16")
    *out = DType::kI16;
  else if (n == "i32" || n == "int32")
    *out = DType::kI32;
  else if (n == "i64" || n == "int64")
    *out = DType::kI64;
  else if (n == "f64" || n == "float64" || n == "double")
    *out = DType::kF64;
  else if (n == "bool")
    *out = DType::kBool;
  else if (n == "q4_0")
    *out = DType::kQ4_0;
  else if (n == "q4_1")
    *out = DType::kQ4_1;
  else if (n == "q5_0")
    *out = DType::kQ5_0;
  else if (n == "q5_1")
    *out = DType::kQ5_1;
  else if (n == "q2_k")
    *out = DType::kQ2_K;
  else if (n == "q3_k")
    *out = DType::kQ3_K;
  else if (n == "q4_k")
    *out = DType::kQ4_K;
  else if (n == "q5_k")
    *out = DType::kQ5_K;
  else if (n == "q6_k")
    *out = DType::kQ6_K;
  else if (n == "iq4_nl")
    *out = DType::kIQ4_NL;
  else if (n == "iq4_xs")
    *out = DType::kIQ4_XS;
  else
    return false;
  return true;
}

int64_t dtype_block_elems(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
      return 32;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS:
      return 256;
    default:
      return 1;
  }
}

int64_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
    case DType::kF8E4M3:
      return 1;
    case DType::kQ8_0:
      return sizeof(BlockQ8_0);
    case DType::kI8:
      return 1;
    case DType::kU8:
      return 1;
    case DType::kI16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kF64:
      return 8;
    case DType::kBool:
      return 1;
    case DType::kQ4_0:
      return 18;
    case DType::kQ4_1:
      return 20;
    case DType::kQ5_0:
      return 22;
    case DType::kQ5_1:
      return 24;
    case DType::kQ2_K:
      return 84;
    case DType::kQ3_K:
      return 110;
    case DType::kQ4_K:
      return 144;
    case DType::kQ5_K:
      return 176;
    case DType::kQ6_K:
      return 210;
    case DType::kIQ4_NL:
      return 18;
    case DType::kIQ4_XS:
      return 136;
    case DType::kW4G:
    case DType::kW8G:
      return 1;  // no row format: packed weights only (their bytes come from the layout)
  }
  return 0;
}

bool dtype_is_float(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF8E4M3 ||
         t == DType::kQ8_0 || t == DType::kF64 || dtype_is_gguf_quant(t);
}

bool dtype_is_gguf_quant(DType t) {
  return t >= DType::kQ4_0 && t <= DType::kIQ4_XS;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return bits_to_f32(bits);
}

uint16_t f32_to_f16(float f) {
  uint32_t x = f32_to_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // result is subnormal or zero
    // value = abs as float; half subnormal unit = 2^-24.
    float v = bits_to_f32(abs);
    // Round to nearest even in units of 2^-24 (nearbyint uses the default even rounding).
    float q = std::nearbyint(v * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(q));
  }
  // Normal: re-bias exponent, round mantissa from 23 to 10 bits, nearest even.
  uint32_t m = abs + ((15u - 127u) << 23);
  m += 0xfffu + ((m >> 13) & 1u);
  return static_cast<uint16_t>(sign | (m >> 13));
}

float fp8_e4m3_to_f32_reference(uint8_t v) {
  uint32_t sign = v >> 7;
  uint32_t exp = (v >> 3) & 0xfu;
  uint32_t mant = v & 0x7u;
  float out;
  if (exp == 0xf && mant == 0x7) {
    out = NAN;
  } else if (exp == 0) {
    out = std::ldexp(static_cast<float>(mant), -9);  // mant/8 * 2^-6
  } else {
    out = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, static_cast<int>(exp) - 7);
  }
  return sign ? -out : out;
}

// A table of all 256 values: the conversion runs per element of every fp8 KV row read.
float fp8_e4m3_to_f32(uint8_t v) {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = fp8_e4m3_to_f32_reference(static_cast<uint8_t>(i));
    return t;
  }();
  return table[v];
}

uint8_t f32_to_fp8_e4m3(float f) {
  const uint32_t bits = f32_to_bits(f);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7f;          // NaN
  if (abs >= 0x43e00000u) return sign | 0x7e;  // >= 448 (and inf): saturate
  if (abs < 0x3c800000u) {                     // below 2^-6: subnormal, units of 2^-9
    const float q = std::nearbyint(bits_to_f32(abs) * 512.0f);  // exact product, < 8.5
    return sign | static_cast<uint8_t>(q);  // q == 8 is exactly the smallest normal
  }
  // Normal: the exponent and top 3 mantissa bits, rounded to nearest even on the 20 dropped
  // bits, then re-biased (127 -> 7); a carry into the exponent is the correct next code.
  const uint32_t r = abs + 0x7ffffu + ((abs >> 20) & 1u);
  const uint32_t code = (r >> 20) - ((127u - 7u) << 3);
  return sign | static_cast<uint8_t>(std::min<uint32_t>(code, 0x7e));
}

uint8_t f32_to_fp8_e4m3_reference(float f) {
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a >= kFp8E4M3Max) return sign | 0x7e;  // saturate to 448
  if (a < std::ldexp(1.0f, -6)) {
    // Subnormal range: units of 2^-9, nearest even.
    float q = std::nearbyint(a * 512.0f);
    return sign | static_cast<uint8_t>(q);  // q == 8 is exactly the smallest normal (0x08)
  }
  int e;
  float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // a = (1 + frac) * 2^(e-1); frac in 3 bits.
  float frac = m * 2.0f - 1.0f;
  float q = std::nearbyint(frac * 8.0f);
  int exp = e - 1 + 7;
  if (q >= 8.0f) {
    q = 0;
    ++exp;
  }
  if (exp > 15 || (exp == 15 && q > 6)) return sign | 0x7e;
  return sign | static_cast<uint8_t>((exp << 3) | static_cast<int>(q));
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    // 16-bit values read byte-wise: a checkpoint's tensor may start at an odd offset (a
    // safetensors file places tensors back to back, e.g. after one-byte e8m0 scales).
    case DType::kF16: {
      auto* s = static_cast<const unsigned char*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, s + 2 * i, 2);
        dst[i] = f16_to_f32(v);
      }
      return;
    }
    case DType::kBF16: {
      auto* s = static_cast<const unsigned char*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, s + 2 * i, 2);
        dst[i] = bf16_to_f32(v);
      }
      return;
    }
    case DType::kF8E4M3: {
      auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_f32(s[i]);
      return;
    }
    case DType::kQ8_0: {
      STRATA_CHECK(n % kQ8_0BlockSize == 0) << "Q8_0 row of " << n << " elements";
      auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQ8_0BlockSize; ++i) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < kQ8_0BlockSize; ++j) dst[i * kQ8_0BlockSize + j] = d * b[i].qs[j];
      }
      return;
    }
    default:
      if (dtype_is_gguf_quant(t)) return dequantize_gguf_row(t, src, dst, n);
      STRATA_CHECK(false) << "dequantize_row: unsupported dtype " << dtype_name(t);
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::kF8E4M3: {
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp8_e4m3(src[i]);
      return;
    }
    case DType::kQ8_0: {
      STRATA_CHECK(n % kQ8_0BlockSize == 0) << "Q8_0 row of " << n << " elements";
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < n / kQ8_0BlockSize; ++i) {
        const float* x = src + i * kQ8_0BlockSize;
        float amax = 0;
        for (int j = 0; j < kQ8_0BlockSize; ++j) amax = std::max(amax, std::fabs(x[j]));
        float d = amax / 127.0f;
        float id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < kQ8_0BlockSize; ++j)
          b[i].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
      }
      return;
    }
    default:
      STRATA_CHECK(false) << "quantize_row: unsupported dtype " << dtype_name(t);
  }
}

}  // namespace strata
