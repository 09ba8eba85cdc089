// Block-quantized matmul weights (Q8_0 and the GGUF quants) in one integer panel layout, and the
// integer matmul that runs on them.
//
// Every supported block format is a special case of
//     w = d * sc_j * (q - z) - dmin * m_j
// per row, per super-block of S columns (32 for Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL, 256 for the
// K-quants and IQ4_XS) split into sub-blocks j of B columns (16 or 32): d and dmin are the
// block's f16 scales, sc_j a signed 8-bit sub-block scale (1 when the format has none), m_j an
// unsigned 8-bit sub-block min (1 when the format has one min per block), q an unsigned integer of
// `bits` <= 8 bits and z a zero point fixed per format (Q4_0: 8, Q6_K: 32, Q8_0 and the IQ4
// lookup values: 128, ...). Loading decodes each GGUF block into that form once; the values are
// exactly the file's (see QuantLayout for each format).
//
// AWQ and GPTQ weights (W4G, W8G: w = s * (q - zp) with an f16 scale s and an integer zero point
// zp per row and group of G input columns) are the same form with one sub-block per super-block
// of S = min(G, 128) columns (grouped_int_layout): d = s, sc = 1, and the zero point moved into
// the min term. 4-bit: z = 0, dmin = s, m = zp (w = s*q - s*zp). 8-bit: z = 128 (so the kernels
// take their signed 8-bit path), dmin = +-s and m = |zp - 128| (w = s*(q - 128) - s*(zp - 128)).
// Every product is exact in f32, so the values are exactly the checkpoint's s * (q - zp). A
// group longer than 128 columns is split into super-blocks sharing its scale and zero, which
// keeps the activation blocks short and every integer sum far below 2^31.
//
// Layout, per panel of 16 rows (kPanelRows) and per super-block, all 64-byte aligned:
//   d[16] f16, then dmin[16] f16 when the format has mins (padded to 64 bytes);
//   sc[S/B][16] int8 when the format has sub-block scales, then m[S/B][16] u8 when it has mins
//   too (padded to 64 bytes);
//   quants, sub-block after sub-block: for each group of 4 columns, 16 rows x 4 bytes (row-major:
//   byte r*4 + c is column 4g + c of row r), i.e. the operand order of a 32-bit-lane integer dot
//   product (VNNI vpdpbusd lane r = row r). 8-bit formats store one group per 64 bytes; the
//   others pack two groups per 64 bytes (low nibbles group 2h, high nibbles group 2h + 1), and
//   5- and 6-bit formats follow a sub-block's nibbles with its high bits: 64 bytes per 32 columns
//   (5-bit: bit g of byte r*4 + c is the fifth bit of group g) or per 16 columns (6-bit: bits
//   2g..2g+1 are the top two bits of group g).
//
// The matmul quantizes each activation row per super-block to int8 (scale = max|x| / 127, round
// to nearest even) and computes, per row and super-block, the exact integers
//     T = sum_j sc_j * (sum_{c in j} q_c * xq_c - z * sum_{c in j} xq_c),  M = sum_j m_j * sum xq
// then acc = fma(dx, fma(-dmin, M, d * T), acc) in super-block order. Integer sums are exact and
// the float steps are the same in every variant, so all variants give bit-identical results and a
// row's output never depends on the batch, the chunking or the thread count.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace strata {

class PackedWeight;

struct QuantLayout {
  int super = 32;        // S: columns per super-block
  int sub = 32;          // B: columns per sub-block (sc/m granularity)
  int bits = 4;          // 4, 5, 6 or 8: bits per stored q
  int zero = 0;          // z
  bool has_sc = false;   // per-sub-block int8 scales stored (else 1)
  bool has_min = false;  // dmin stored; per-sub-block u8 mins stored when has_sc (else 1)
  // Super-blocks stored together (2 for the 32-column formats when k allows, so that the f16
  // scales of a unit fill whole 64-byte lines; 1 for the K-quants).
  int group = 1;

  int num_sub() const { return super / sub; }
  // Per unit of `group` super-blocks: d[group][16] f16, then dmin[group][16] f16, padded to 64.
  int64_t header_bytes() const { return (int64_t{group} * 32 * (has_min ? 2 : 1) + 63) / 64 * 64; }
  // Per super-block: sc[num_sub][16] int8 then m[num_sub][16] u8 (K-quants; multiples of 64).
  int64_t scale_bytes() const { return has_sc ? int64_t{num_sub()} * 16 * (has_min ? 2 : 1) : 0; }
  int64_t quant_bytes() const { return int64_t{super} * 16 * bits / 8; }
  int64_t sub_quant_bytes() const { return int64_t{sub} * 16 * bits / 8; }
  int64_t unit_bytes() const { return header_bytes() + group * (scale_bytes() + quant_bytes()); }
  int64_t unit_cols() const { return int64_t{group} * super; }
};

// q of row r, column cc of a sub-block whose quants start at `qs` (see the layout above).
inline int quant_get(const uint8_t* qs, const QuantLayout& L, int r, int cc) {
  const int grp = cc / 4, pos = r * 4 + cc % 4;
  if (L.bits == 8) return qs[grp * 64 + pos];
  const uint8_t byte = qs[(grp / 2) * 64 + pos];
  const int nib = grp % 2 ? byte >> 4 : byte & 0xF;
  if (L.bits == 4) return nib;
  const uint8_t* high = qs + L.sub * 8;
  if (L.bits == 6) return nib | (((high[(grp / 4) * 64 + pos] >> (2 * (grp % 4))) & 3) << 4);
  return nib | (((high[(grp / 8) * 64 + pos] >> (grp % 8)) & 1) << 4);
}
inline void quant_put(uint8_t* qs, const QuantLayout& L, int r, int cc, int q) {
  const int grp = cc / 4, pos = r * 4 + cc % 4;
  if (L.bits == 8) {
    qs[grp * 64 + pos] = static_cast<uint8_t>(q);
    return;
  }
  uint8_t& byte = qs[(grp / 2) * 64 + pos];
  byte =
      static_cast<uint8_t>(grp % 2 ? (byte & 0x0F) | ((q & 0xF) << 4) : (byte & 0xF0) | (q & 0xF));
  if (L.bits == 4) return;
  uint8_t* high = qs + L.sub * 8;
  if (L.bits == 6) {
    uint8_t& h = high[(grp / 4) * 64 + pos];
    const int sh = 2 * (grp % 4);
    h = static_cast<uint8_t>((h & ~(3 << sh)) | (((q >> 4) & 3) << sh));
  } else {
    uint8_t& h = high[(grp / 8) * 64 + pos];
    const int sh = grp % 8;
    h = static_cast<uint8_t>((h & ~(1 << sh)) | (((q >> 4) & 1) << sh));
  }
}

// Whether `t` is stored in this layout (Q8_0, every GGUF quant, W4G and W8G), and its layout.
bool is_block_quant(DType t);
// The layout of `t` for rows of k values (k a multiple of the super-block). Not for W4G/W8G,
// whose layout depends on the group size: PackedWeight::quant_layout() is every weight's.
QuantLayout quant_layout(DType t, int64_t k);
// W4G (bits 4) / W8G (bits 8) rows of k values in groups of `group` columns (group divides k):
// super-blocks of the largest of 128, 64, 32 that divides the group. Errors (returns false)
// when none does.
bool grouped_int_layout(int bits, int64_t group, int64_t k, QuantLayout* out);

// One GGUF block of `t` decoded into the generic form: d, dmin, sc[num_sub], m[num_sub] and
// q[super] (unsigned, < 2^bits). Exact: d * sc * (q - z) - dmin * m equals the file's value up
// to float rounding of the product.
struct DecodedBlock {
  float d = 0, dmin = 0;
  uint16_t d_bits = 0, dmin_bits = 0;  // the f16 fields as stored
  int8_t sc[16];
  uint8_t m[16];
  uint8_t q[256];
};
void decode_quant_block(DType t, const void* block, DecodedBlock* out);

namespace kernels {

// Per-row int8 activations for one matmul: for row i and super-block s, xq[i*k + c],
// dx[i*nsb + s] and per-sub-block sums xs[(i*nsb + s)*nsub + j].
struct QuantizedActivations {
  int64_t m = 0, k = 0;
  int super = 32, sub = 32;
  int8_t* xq = nullptr;
  float* dx = nullptr;
  int32_t* xs = nullptr;
};
// Quantizes rows of x (thread-local storage, valid until the next call on this thread).
QuantizedActivations quantize_activations(const float* x, int64_t m, int64_t ldx, int64_t k,
                                          int super, int sub);

// The plain integer matmul (the reference every fast variant equals bit for bit).
void quant_matmul_reference(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                            int64_t ldy, ThreadPool& pool);
// AVX2 (maddubs) and AVX-512 VNNI (vpdpbusd) variants; callers check the CPU.
void quant_matmul_avx2(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y,
                       int64_t ldy, ThreadPool& pool);
void quant_matmul_avx512vnni(const float* x, int64_t m, int64_t ldx, const PackedWeight& w,
                             float* y, int64_t ldy, ThreadPool& pool);

}  // namespace kernels
}  // namespace strata
