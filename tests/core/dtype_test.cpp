#include "core/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace strata {
namespace {

TEST(DTypeTest, F16KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);                    // overflow -> inf
  EXPECT_EQ(f32_to_f16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  // Ties round to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(DTypeTest, F16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(DTypeTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808000)), 0x3f80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f818000)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808001)), 0x3f81);
}

TEST(DTypeTest, Fp8E4M3RoundTripsEveryCode) {
  for (int v = 0; v < 256; ++v) {
    float f = fp8_e4m3_to_f32(static_cast<uint8_t>(v));
    if (std::isnan(f)) continue;
    uint8_t back = f32_to_fp8_e4m3(f);
    if (v == 0x80) {
      EXPECT_EQ(back, 0x80);  // -0
      continue;
    }
    ASSERT_EQ(back, v) << v << " " << f;
  }
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f32_to_fp8_e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(f32_to_fp8_e4m3(-1000.0f), 0xfe);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

// The fast conversions equal the plain reference definitions: every code both ways, every value
// next to a code or halfway between two (ties), and a million random bit patterns.
TEST(DTypeTest, Fp8E4M3FastMatchesReference) {
  auto same = [](float f) {
    const uint8_t fast = f32_to_fp8_e4m3(f), ref = f32_to_fp8_e4m3_reference(f);
    if (fast == ref) return true;
    ADD_FAILURE() << "f=" << f << " bits=0x" << std::hex << f32_to_bits(f) << " fast=0x"
                  << int{fast} << " reference=0x" << int{ref};
    return false;
  };
  std::vector<float> values;
  for (int v = 0; v < 256; ++v) {
    const float f = fp8_e4m3_to_f32(static_cast<uint8_t>(v));
    const float r = fp8_e4m3_to_f32_reference(static_cast<uint8_t>(v));
    if (std::isnan(r)) {
      ASSERT_TRUE(std::isnan(f)) << v;
      continue;
    }
    ASSERT_EQ(f32_to_bits(f), f32_to_bits(r)) << v;
    values.push_back(f);
  }
  std::sort(values.begin(), values.end());
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const float mid = (values[i] + values[i + 1]) / 2;  // exact: a tie
    for (float x : {values[i], mid})
      for (float y : {x, std::nextafter(x, -INFINITY), std::nextafter(x, INFINITY)})
        if (!same(y)) return;
  }
  for (float x : {448.0f, 464.0f, 1e30f, INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e-30f})
    if (!same(x)) return;
  uint64_t state = 12345;
  for (int i = 0; i < 1000000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t bits = static_cast<uint32_t>(state >> 32);
    // Half the samples with exponents 2^-8 .. 2^9, the range fp8 represents (and just past it).
    const uint32_t b =
        (i & 1) ? bits : (bits & 0x807fffffu) | ((0x77u + ((bits >> 23) & 0x1fu) % 19u) << 23);
    if (!same(bits_to_f32(b))) return;
  }
}

TEST(DTypeTest, Q8_0RoundTripWithinHalfStep) {
  float x[64];
  for (int i = 0; i < 64; ++i) x[i] = std::sin(i * 0.7f) * (i < 32 ? 1.0f : 100.0f);
  BlockQ8_0 b[2];
  quantize_row(DType::kQ8_0, x, b, 64);
  float y[64];
  dequantize_row(DType::kQ8_0, b, y, 64);
  for (int i = 0; i < 64; ++i) {
    float d = f16_to_f32(b[i / 32].d);
    EXPECT_LE(std::fabs(x[i] - y[i]), d * 0.5f + 1e-3f * std::fabs(x[i])) << i;
  }
  EXPECT_EQ(dtype_bytes(DType::kQ8_0, 64), 68);
}

TEST(DTypeTest, ParseNames) {
  DType t;
  ASSERT_TRUE(parse_dtype("bfloat16", &t));
  EXPECT_EQ(t, DType::kBF16);
  ASSERT_TRUE(parse_dtype("F16", &t));
  EXPECT_EQ(t, DType::kF16);
  EXPECT_FALSE(parse_dtype("float128", &t));
}

}  // namespace
}  // namespace strata
