// Small deterministic random number generators. The same seed gives the same stream on every
// machine and build (no std::uniform_*_distribution, whose output is implementation-defined).
#pragma once

#include <cmath>
#include <cstdint>

namespace strata {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256** seeded through splitmix64.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { this->seed(seed); }
  void seed(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& x : s_) x = splitmix64(sm);
  }
  uint64_t next_u64() {
    uint64_t result = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(uniform()); }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next_u64() % n; }
  // Standard normal (Box-Muller).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace strata
