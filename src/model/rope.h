// Rotary position embedding frequencies for every scaling type we support, and per-step cos/sin.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/model_config.h"

namespace strata {

class RopeTable {
 public:
  // Frequencies for `rotary_dim` dims with the config's theta and scaling.
  static Result<RopeTable> create(const ModelConfig& config);
  static Result<RopeTable> create(int64_t rotary_dim, double theta, const RopeScaling& scaling,
                                  int64_t max_position_embeddings);

  int64_t rotary_dim() const { return rotary_dim_; }
  const std::vector<double>& inv_freq() const { return inv_freq_; }
  // Scale applied to cos and sin (YaRN's attention factor; 1 otherwise).
  double magnitude() const { return magnitude_; }
  // Divides frequency i by factors[i] (GGUF's rope_freqs.weight for llama3-style scaling).
  Status apply_frequency_factors(std::span<const float> factors);

  // cos/sin: [positions.size(), rotary_dim / 2].
  void compute(std::span<const int32_t> positions, float* cos, float* sin) const;

 private:
  int64_t rotary_dim_ = 0;
  std::vector<double> inv_freq_;
  double magnitude_ = 1.0;
};

}  // namespace strata
