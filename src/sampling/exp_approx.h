// exp_approx: the sampler's fast e^x (vectorizable: no libm call, selects instead of branches).
// std::exp is its reference; vector_math_test.cpp checks the error bound.
//
// Internal linkage on purpose (static): vector_math_avx2.cpp and vector_math_avx512.cpp compile it
// with AVX2 / AVX-512 enabled, and a shared inline copy could otherwise be picked by the linker for
// code that runs without them.
#pragma once

#include <cstdint>
#include <cstring>

namespace strata::sampling {

// e^x with a relative error below 5e-7 for x in [-87.3, 88]; 0 below -87.3 (so e^-inf = 0) and
// for NaN; larger x is clamped to e^88.
// Method: e^x = 2^n * e^r with n = round(x / ln2) and |r| <= ln2 / 2 (Cody-Waite split of ln2),
// and e^r by its degree-7 Taylor polynomial (truncation error < 6e-9), evaluated by Estrin's
// scheme.
static inline float exp_approx(float x) {
  constexpr float kLo = -87.3f, kHi = 88.0f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;           // few mantissa bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-6f;      // ln 2 - kLn2Hi
  constexpr float kRound = 12582912.0f;                  // 1.5 * 2^23: adds then subtracts to round
  const float xc = x > kLo ? (x < kHi ? x : kHi) : kLo;  // NaN -> kLo
  const float n = (xc * kLog2e + kRound) - kRound;
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  // 1 + r + r^2/2 + ... + r^7/5040 by Estrin's scheme (short dependency chains).
  const float r2 = r * r;
  const float r4 = r2 * r2;
  const float p01 = 1.0f + r;
  const float p23 = 0.5f + r * (1.0f / 6.0f);
  const float p45 = 1.0f / 24.0f + r * (1.0f / 120.0f);
  const float p67 = 1.0f / 720.0f + r * (1.0f / 5040.0f);
  const float p = (p01 + r2 * p23) + r4 * (p45 + r2 * p67);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const float y = p * scale;
  return x >= kLo ? y : 0.0f;
}

}  // namespace strata::sampling
