#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/ops.h"

namespace strata::testing {

// Fast variants this CPU can run (each is compared with the reference).
inline std::vector<KernelVariant> fast_variants() {
  std::vector<KernelVariant> v = {KernelVariant::kPortable};
  if (kernel_variant_supported(KernelVariant::kAvx2)) v.push_back(KernelVariant::kAvx2);
  return v;
}

inline std::vector<float> random_vector(int64_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal()) * scale;
  return v;
}

}  // namespace strata::testing
