#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/ops.h"

namespace strata::testing {

// Fast variants this CPU can run (each is compared with the reference).
// Every registered variant this CPU supports except the reference, so a newly registered variant
// is covered by every parity test without edits here.
inline std::vector<std::string> fast_variants() {
  std::vector<std::string> v;
  for (const KernelVariantInfo* info : supported_kernel_variants()) v.push_back(info->name);
  return v;
}

inline std::vector<float> random_vector(int64_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.normal()) * scale;
  return v;
}

}  // namespace strata::testing
