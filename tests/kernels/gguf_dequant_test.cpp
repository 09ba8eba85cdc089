// The GGUF (ggml) block layouts dequantize_row reads, pinned with hand-made blocks: each test sets
// a few fields of one block to chosen values and expects the floats worked out by hand from the
// format (scales and f16 fields picked so that every value is exact). gguf_dequant_llama_cpp_test
// compares random blocks with llama.cpp's gguf-py where a checkout is available; these need none.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace strata {
namespace {

// f16 bit patterns of the scales used below.
constexpr uint16_t kHalfQuarter = 0x3400;    // 0.25
constexpr uint16_t kHalfHalf = 0x3800;       // 0.5
constexpr uint16_t kHalfOne = 0x3C00;        // 1.0
constexpr uint16_t kHalfTwo = 0x4000;        // 2.0
constexpr uint16_t kHalfMinusOne = 0xBC00;   // -1.0
constexpr uint16_t kHalfMinusHalf = 0xB800;  // -0.5

struct Block {
  explicit Block(DType t) : type(t), bytes(dtype_block_bytes(t), 0) {}
  void half(size_t offset, uint16_t h) {
    bytes[offset] = static_cast<uint8_t>(h & 0xFF);
    bytes[offset + 1] = static_cast<uint8_t>(h >> 8);
  }
  std::vector<float> dequantize() const {
    std::vector<float> y(dtype_block_elems(type), -12345.0f);
    dequantize_row(type, bytes.data(), y.data(), static_cast<int64_t>(y.size()));
    return y;
  }
  DType type;
  std::vector<uint8_t> bytes;
};

void expect_values(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
}

// Sets (*v)[first, last) to value.
void set_range(std::vector<float>* v, int first, int last, float value) {
  for (int i = first; i < last; ++i) (*v)[i] = value;
}

TEST(GgufBlockSizes, MatchTheFormat) {
  const struct {
    DType t;
    int64_t elems, bytes;
  } sizes[] = {{DType::kQ4_0, 32, 18},   {DType::kQ4_1, 32, 20},    {DType::kQ5_0, 32, 22},
               {DType::kQ5_1, 32, 24},   {DType::kIQ4_NL, 32, 18},  {DType::kQ2_K, 256, 84},
               {DType::kQ3_K, 256, 110}, {DType::kQ4_K, 256, 144},  {DType::kQ5_K, 256, 176},
               {DType::kQ6_K, 256, 210}, {DType::kIQ4_XS, 256, 136}};
  for (const auto& s : sizes) {
    EXPECT_EQ(dtype_block_elems(s.t), s.elems) << dtype_name(s.t);
    EXPECT_EQ(dtype_block_bytes(s.t), s.bytes) << dtype_name(s.t);
    EXPECT_TRUE(dtype_is_gguf_quant(s.t)) << dtype_name(s.t);
    EXPECT_TRUE(dtype_is_float(s.t)) << dtype_name(s.t);
  }
  EXPECT_FALSE(dtype_is_gguf_quant(DType::kQ8_0));
}

// Q4_0: d, qs[16]; byte j holds value j (low nibble) and j + 16 (high); x = d * (nibble - 8).
TEST(GgufDequant, Q4_0) {
  Block b(DType::kQ4_0);
  b.half(0, kHalfHalf);
  for (int j = 0; j < 16; ++j) b.bytes[2 + j] = 0x88;  // nibble 8: zero
  b.bytes[2 + 0] = 0xF0;
  b.bytes[2 + 1] = 0x18;
  b.bytes[2 + 15] = 0x9A;
  std::vector<float> want(32, 0.0f);
  want[0] = -4.0f;   // 0.5 * (0 - 8)
  want[16] = 3.5f;   // 0.5 * (15 - 8)
  want[1] = 0.0f;    // 0.5 * (8 - 8)
  want[17] = -3.5f;  // 0.5 * (1 - 8)
  want[15] = 1.0f;   // 0.5 * (10 - 8)
  want[31] = 0.5f;   // 0.5 * (9 - 8)
  expect_values(b.dequantize(), want);
}

// Two Q4_0 blocks in one row: the second starts 18 bytes in, with its own scale.
TEST(GgufDequant, Q4_0TwoBlocks) {
  std::vector<uint8_t> row(36, 0x88);
  row[0] = 0x00, row[1] = 0x3C;    // block 0: d = 1
  row[18] = 0x00, row[19] = 0xC0;  // block 1: d = -2
  row[2] = 0x8B;                   // block 0 value 0: 11 - 8 = 3
  row[20] = 0xF8;                  // block 1 value 16: 15 - 8 = 7
  std::vector<float> y(64);
  dequantize_row(DType::kQ4_0, row.data(), y.data(), 64);
  std::vector<float> want(64, 0.0f);
  want[0] = 3.0f;
  want[32 + 16] = -14.0f;
  expect_values(y, want);
}

// Q4_1: d, m, qs[16]; x = d * nibble + m.
TEST(GgufDequant, Q4_1) {
  Block b(DType::kQ4_1);
  b.half(0, kHalfQuarter);
  b.half(2, kHalfMinusOne);
  b.bytes[4 + 0] = 0x3F;
  std::vector<float> want(32, -1.0f);
  want[0] = 2.75f;    // 0.25 * 15 - 1
  want[16] = -0.25f;  // 0.25 * 3 - 1
  expect_values(b.dequantize(), want);
}

// Q5_0: d, qh[4], qs[16]; bit j of qh (a little-endian u32) is the fifth bit of value j;
// x = d * (q5 - 16).
TEST(GgufDequant, Q5_0) {
  Block b(DType::kQ5_0);
  b.half(0, kHalfOne);
  b.bytes[2] = 0x21;  // qh bits 0 and 5
  b.bytes[3] = 0x00;
  b.bytes[4] = 0x01;  // qh bit 16
  b.bytes[5] = 0x80;  // qh bit 31
  for (int j = 0; j < 16; ++j) b.bytes[6 + j] = 0x88;
  b.bytes[6 + 0] = 0x21;
  b.bytes[6 + 15] = 0xF0;
  std::vector<float> want(32, -8.0f);  // 8 - 16
  want[0] = 1.0f;                      // (1 | 16) - 16
  want[5] = 8.0f;                      // (8 | 16) - 16
  want[15] = -16.0f;                   // 0 - 16
  want[16] = 2.0f;                     // (2 | 16) - 16
  want[31] = 15.0f;                    // (15 | 16) - 16
  expect_values(b.dequantize(), want);
}

// Q5_1: d, m, qh[4], qs[16]; x = d * q5 + m.
TEST(GgufDequant, Q5_1) {
  Block b(DType::kQ5_1);
  b.half(0, kHalfHalf);
  b.half(2, kHalfTwo);
  b.bytes[4] = 0x08;  // qh bit 3
  b.bytes[6] = 0x10;  // qh bit 20
  b.bytes[8 + 3] = 0x7F;
  b.bytes[8 + 4] = 0x0A;
  std::vector<float> want(32, 2.0f);
  want[3] = 17.5f;   // 0.5 * (15 | 16) + 2
  want[19] = 5.5f;   // 0.5 * 7 + 2
  want[4] = 7.0f;    // 0.5 * 10 + 2
  want[20] = 10.0f;  // 0.5 * (0 | 16) + 2
  expect_values(b.dequantize(), want);
}

// IQ4_NL: d, qs[16]; x = d * table[nibble], table = -127, -104, ..., 113.
TEST(GgufDequant, IQ4_NL) {
  Block b(DType::kIQ4_NL);
  b.half(0, kHalfMinusHalf);
  for (int j = 0; j < 16; ++j) b.bytes[2 + j] = 0x99;  // table[9] = 13
  b.bytes[2 + 0] = 0xF0;
  b.bytes[2 + 7] = 0x87;
  std::vector<float> want(32, -6.5f);
  want[0] = 63.5f;    // -0.5 * -127
  want[16] = -56.5f;  // -0.5 * 113
  want[7] = 5.0f;     // -0.5 * -10
  want[23] = -0.5f;   // -0.5 * 1
  expect_values(b.dequantize(), want);
}

// Q2_K: scales[16], qs[64], d, dmin. Group g (16 values) has scale byte g: low nibble the scale,
// high nibble the min; x = d * sc * q - dmin * m. Value i's 2 bits are in qs byte
// 32 * (i / 128) + i % 32 at shift 2 * ((i % 128) / 32).
TEST(GgufDequant, Q2_K) {
  Block b(DType::kQ2_K);
  b.half(80, kHalfOne);
  b.half(82, kHalfHalf);
  b.bytes[0] = 0x32;        // group 0: sc 2, m 3
  b.bytes[2] = 0x01;        // group 2: sc 1, m 0
  b.bytes[9] = 0x1F;        // group 9: sc 15, m 1
  b.bytes[16 + 0] = 0x0B;   // value 0: 3 (shift 0); value 32: 2 (shift 2)
  b.bytes[16 + 54] = 0x02;  // value 150 (second half, byte 32 + 22, shift 0): 2
  std::vector<float> want(256, 0.0f);
  set_range(&want, 0, 16, -1.5f);  // 2 * 0 - 0.5 * 3
  want[0] = 4.5f;                  // 2 * 3 - 1.5
  want[32] = 2.0f;                 // 1 * 2 - 0
  set_range(&want, 144, 160, -0.5f);
  want[150] = 29.5f;  // 15 * 2 - 0.5
  expect_values(b.dequantize(), want);
}

// Q3_K: hmask[32], qs[64], scales[12], d. Sixteen 6-bit scales, biased by 32: the low four bits of
// scale s are the low nibble of byte s (s < 8) or the high nibble of byte s - 8; its top two bits
// are byte 8 + s % 4 at shift 2 * (s / 4). Value i: 2 low bits as in Q2_K, high bit = bit i / 32
// of hmask[i % 32]; x = d * (sc - 32) * (q2 - (high bit ? 0 : 4)).
TEST(GgufDequant, Q3_K) {
  Block b(DType::kQ3_K);
  b.half(108, kHalfHalf);
  uint8_t* sc = b.bytes.data() + 96;
  // Every scale's top bits 2 (raw 32, i.e. zero), then scales 0, 6 and 13 set.
  for (int k = 8; k < 12; ++k) sc[k] = 0xAA;
  sc[0] = 0x01;   // scale 0: raw 33 -> 1
  sc[6] = 0x0F;   // scale 6: low bits 15 ...
  sc[10] = 0xAE;  // ... top bits 3 (byte 10, shift 2): raw 63 -> 31
  sc[5] = 0xD0;   // scale 13: low bits 13 (high nibble of byte 5) ...
  sc[9] = 0x6A;   // ... top bits 1 (byte 9, shift 6): raw 29 -> -3
  uint8_t* hmask = b.bytes.data();
  uint8_t* qs = b.bytes.data() + 32;
  hmask[0] = 0x09;   // value 0 (bit 0) and value 96 (bit 3)
  hmask[2] = 0x01;   // value 2
  hmask[18] = 0x40;  // value 210 (bit 6)
  qs[0] = 0x83;      // value 0: 3 (shift 0); value 96: 2 (shift 6)
  qs[1] = 0x03;      // value 1: 3
  qs[50] = 0x10;     // value 210 (byte 32 + 18, shift 4): 1
  std::vector<float> want(256, 0.0f);
  set_range(&want, 0, 16, -2.0f);     // 0.5 * 1 * (0 - 4)
  want[0] = 1.5f;                     // 0.5 * (3 + 0)
  want[1] = -0.5f;                    // 0.5 * (3 - 4)
  want[2] = 0.0f;                     // 0.5 * (0 + 0)
  set_range(&want, 96, 112, -62.0f);  // 15.5 * -4
  want[96] = 31.0f;                   // 15.5 * 2
  set_range(&want, 208, 224, 6.0f);   // -1.5 * -4
  want[210] = -1.5f;                  // -1.5 * 1
  expect_values(b.dequantize(), want);
}

// The 12 scale bytes of Q4_K and Q5_K: 6-bit scale and min for groups 0 and 4 and 7, the others
// zero. Groups 0..3 take bytes j and j + 4 (low six bits); groups 4..7 the nibbles of byte j + 4
// and the top two bits of bytes j - 4 (scale) and j (min).
void k_quant_scales(uint8_t* q) {
  q[0] = 0xC5;   // group 0 scale 5; top bits 3 of group 4's scale
  q[4] = 0x82;   // group 0 min 2; top bits 2 of group 4's min
  q[8] = 0x37;   // group 4: scale 7 | 3 << 4 = 55, min 3 | 2 << 4 = 35
  q[3] = 0x40;   // group 3 scale 0; top bits 1 of group 7's scale
  q[7] = 0xC0;   // group 3 min 0; top bits 3 of group 7's min
  q[11] = 0xFA;  // group 7: scale 10 | 1 << 4 = 26, min 15 | 3 << 4 = 63
}

// Q4_K: d, dmin, scales[12], qs[128]; eight groups of 32; group g's values are the low (g even)
// or high (g odd) nibbles of qs bytes 32 * (g / 2) ...; x = d * sc * q - dmin * m.
TEST(GgufDequant, Q4_K) {
  Block b(DType::kQ4_K);
  b.half(0, kHalfHalf);
  b.half(2, kHalfQuarter);
  k_quant_scales(b.bytes.data() + 4);
  uint8_t* qs = b.bytes.data() + 16;
  qs[0] = 0x03;    // value 0: 3
  qs[31] = 0x0F;   // value 31: 15
  qs[66] = 0x02;   // value 130 (group 4, low nibble): 2
  qs[96] = 0x10;   // value 224 (group 7, high nibble): 1
  qs[127] = 0xF0;  // value 255: 15
  std::vector<float> want(256, 0.0f);
  set_range(&want, 0, 32, -0.5f);       // 0.5 * 5 * 0 - 0.25 * 2
  want[0] = 7.0f;                       // 2.5 * 3 - 0.5
  want[31] = 37.0f;                     // 2.5 * 15 - 0.5
  set_range(&want, 128, 160, -8.75f);   // - 0.25 * 35
  want[130] = 46.25f;                   // 0.5 * 55 * 2 - 8.75
  set_range(&want, 224, 256, -15.75f);  // - 0.25 * 63
  want[224] = -2.75f;                   // 0.5 * 26 * 1 - 15.75
  want[255] = 179.25f;                  // 13 * 15 - 15.75
  expect_values(b.dequantize(), want);
}

// Q5_K: d, dmin, scales[12], qh[32], qs[128]; as Q4_K with the fifth bit of value i from bit i / 32
// of qh[i % 32].
TEST(GgufDequant, Q5_K) {
  Block b(DType::kQ5_K);
  b.half(0, kHalfOne);
  b.half(2, kHalfOne);
  k_quant_scales(b.bytes.data() + 4);
  uint8_t* qh = b.bytes.data() + 16;
  uint8_t* qs = b.bytes.data() + 48;
  qh[0] = 0x81;   // value 0 (bit 0), value 224 (bit 7)
  qh[1] = 0x01;   // value 1
  qh[2] = 0x10;   // value 130 (bit 4)
  qh[31] = 0x80;  // value 255 (bit 7)
  qs[0] = 0x03;
  qs[66] = 0x02;
  qs[127] = 0xF0;
  std::vector<float> want(256, 0.0f);
  set_range(&want, 0, 32, -2.0f);
  want[0] = 93.0f;  // 5 * (3 | 16) - 2
  want[1] = 78.0f;  // 5 * 16 - 2
  set_range(&want, 128, 160, -35.0f);
  want[130] = 955.0f;  // 55 * (2 | 16) - 35
  set_range(&want, 224, 256, -63.0f);
  want[224] = 353.0f;  // 26 * 16 - 63
  want[255] = 743.0f;  // 26 * 31 - 63
  expect_values(b.dequantize(), want);
}

// Q6_K: ql[128], qh[64], scales[16] (int8), d. Per 128-value half h, value l + 32 * g (l < 32,
// g < 4) has low nibble from ql byte 64 * h + l + 32 * (g % 2) (low nibble for g < 2, high for
// g >= 2) and top two bits from qh byte 32 * h + l at shift 2 * g; x = d * sc[i / 16] * (q - 32).
TEST(GgufDequant, Q6_K) {
  Block b(DType::kQ6_K);
  b.half(208, kHalfHalf);
  uint8_t* ql = b.bytes.data();
  uint8_t* qh = b.bytes.data() + 128;
  uint8_t* sc = b.bytes.data() + 192;
  sc[0] = 0xFD;    // -3
  sc[5] = 0x02;    // 2
  sc[10] = 0x80;   // -128
  sc[15] = 0x7F;   // 127
  ql[0] = 0x05;    // value 0: low nibble 5 ...
  qh[0] = 0x02;    // ... top bits 2: 37
  ql[16] = 0xA0;   // value 80 (g 2, l 16): high nibble 10 ...
  qh[16] = 0x30;   // ... top bits 3 at shift 4: 58
  ql[106] = 0x0F;  // value 170 (h 1, g 1, l 10): ql byte 64 + 10 + 32, low nibble 15 ...
  qh[42] = 0x04;   // ... qh byte 32 + 10, top bits 1 at shift 2: 31
  ql[127] = 0xF0;  // value 255 (h 1, g 3, l 31): high nibble 15 ...
  qh[63] = 0xC0;   // ... top bits 3 at shift 6: 63
  std::vector<float> want(256, 0.0f);
  set_range(&want, 0, 16, 48.0f);        // 0.5 * -3 * -32
  want[0] = -7.5f;                       // -1.5 * 5
  set_range(&want, 80, 96, -32.0f);      // 0.5 * 2 * -32
  want[80] = 26.0f;                      // 1 * 26
  set_range(&want, 160, 176, 2048.0f);   // -64 * -32
  want[170] = 64.0f;                     // -64 * -1
  set_range(&want, 240, 256, -2032.0f);  // 63.5 * -32
  want[255] = 1968.5f;                   // 63.5 * 31
  expect_values(b.dequantize(), want);
}

// IQ4_XS: d, scales_h (u16), scales_l[4], qs[128]; group g's 6-bit scale (biased by 32) is nibble
// g % 2 of scales_l[g / 2] with top bits 2 * g of scales_h; values as IQ4_NL, 16 bytes a group.
TEST(GgufDequant, IQ4_XS) {
  Block b(DType::kIQ4_XS);
  b.half(0, kHalfHalf);
  b.half(2, 0x2EAA);  // top bits 2 for groups 0..4 and 6, 3 for group 5, 0 for group 7
  b.bytes[4] = 0x01;  // group 0 low bits 1: 33 -> 1
  b.bytes[6] = 0x40;  // group 5 low bits 4: 52 -> 20
  uint8_t* qs = b.bytes.data() + 8;
  for (int j = 0; j < 128; ++j) qs[j] = 0x88;  // table[8] = 1
  qs[0] = 0xF0;                                // value 0: table[0], value 16: table[15]
  qs[5 * 16 + 3] = 0x3C;               // value 163: table[12] = 53, value 179: table[3] = -65
  qs[7 * 16 + 15] = 0x07;              // value 239: table[7] = -10, value 255: table[0] = -127
  std::vector<float> want(256, 0.0f);  // groups with scale 32 - 32 = 0
  set_range(&want, 0, 32, 0.5f);       // 0.5 * 1 * 1
  want[0] = -63.5f;
  want[16] = 56.5f;
  set_range(&want, 160, 192, 10.0f);  // 0.5 * 20 * 1
  want[163] = 530.0f;
  want[179] = -650.0f;
  set_range(&want, 224, 256, -16.0f);  // 0.5 * -32 * 1
  want[239] = 160.0f;
  want[255] = 2032.0f;
  expect_values(b.dequantize(), want);
}

}  // namespace
}  // namespace strata
