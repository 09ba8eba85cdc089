// Element types and scalar conversions (f16, bf16, fp8 e4m3fn, Q8_0 blocks). The scalar
// converters here are the reference; kernels/ has vectorised bulk versions with parity tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace strata {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // e4m3fn: bias 7, max 448, no infinities, NaN = 0x7f/0xff
  kQ8_0,    // blocks of 32: f16 scale + 32 x int8 (GGUF/ggml layout, 34 bytes)
  kI8,
  kU8,
  kI16,
  kI32,
  kI64,
  kF64,
  kBool,
  // GGUF (ggml) quantized blocks, in the file's layout; dequantize_row is their reference.
  // Blocks of 32: Q4_0 (18 bytes), Q4_1 (20), Q5_0 (22), Q5_1 (24), IQ4_NL (18). Super-blocks
  // of 256 ("K-quants"): Q2_K (84), Q3_K (110), Q4_K (144), Q5_K (176), Q6_K (210), IQ4_XS (136).
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kIQ4_NL,
  kIQ4_XS,
  // Matmul weight storage only (never a tensor's dtype): 4- and 8-bit integers with one f16
  // scale and one zero point per group of input columns (AWQ and GPTQ checkpoints), in the
  // integer panel layout of kernels/quant_weight.h. The group size is the weight's own
  // (PackedWeight::quant_layout()).
  kW4G,
  kW8G,
};

const char* dtype_name(DType t);  // "f32", "bf16", "q8_0", ...
// Accepts our names and common aliases ("float32", "bfloat16", "half", "F16", "fp8", ...).
bool parse_dtype(std::string_view name, DType* out);
// Elements per storage block (32 for Q8_0, Q4_0..Q5_1 and IQ4_NL, 256 for the K-quants and
// IQ4_XS, else 1) and bytes per block.
int64_t dtype_block_elems(DType t);
int64_t dtype_block_bytes(DType t);
// Bytes for `n` elements; n must be a multiple of the block size.
inline int64_t dtype_bytes(DType t, int64_t n) {
  return n / dtype_block_elems(t) * dtype_block_bytes(t);
}
// Floating point, or blocks that dequantize_row turns into floats (Q8_0 and the GGUF quants).
bool dtype_is_float(DType t);
// A GGUF block-quantized type other than Q8_0 (Q4_0 ... Q6_K, IQ4_NL, IQ4_XS).
bool dtype_is_gguf_quant(DType t);

inline float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// IEEE half precision, round to nearest even; overflow gives +-inf, NaN stays NaN.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// bfloat16: the top 16 bits of an f32, round to nearest even.
inline float bf16_to_f32(uint16_t h) {
  return bits_to_f32(static_cast<uint32_t>(h) << 16);
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// fp8 e4m3fn. f32_to_fp8_e4m3 rounds to nearest even and saturates to +-448 (as scaled KV-cache
// and weight quantisation expect); NaN maps to NaN. The *_reference versions are the plain
// definitions (frexp/ldexp) the fast ones (a table; bit arithmetic) are tested against.
float fp8_e4m3_to_f32(uint8_t v);
uint8_t f32_to_fp8_e4m3(float f);
float fp8_e4m3_to_f32_reference(uint8_t v);
uint8_t f32_to_fp8_e4m3_reference(float f);
constexpr float kFp8E4M3Max = 448.0f;

// One Q8_0 block: value[i] = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");
constexpr int kQ8_0BlockSize = 32;

// Reference (scalar) row conversions to and from f32. `n` elements, a whole number of blocks.
// dequantize_row takes every type; quantize_row the float types and Q8_0.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// The GGUF quantized types (core/gguf_quants.cpp): the plain formulas of ggml's block layouts.
void dequantize_gguf_row(DType t, const void* src, float* dst, int64_t n);
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace strata
