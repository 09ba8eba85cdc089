#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace strata {
namespace {

double yarn_correction_dim(double num_rotations, int64_t dim, double base, int64_t max_pos) {
  return dim * std::log(max_pos / (num_rotations * 2 * M_PI)) / (2 * std::log(base));
}

}  // namespace

Result<RopeTable> RopeTable::create(const ModelConfig& c) {
  return create(c.rotary_dim, c.rope_theta, c.rope_scaling, c.max_position_embeddings);
}

Result<RopeTable> RopeTable::create(int64_t rotary_dim, double theta, const RopeScaling& s,
                                    int64_t max_position_embeddings) {
  RopeTable t;
  t.rotary_dim_ = rotary_dim;
  const int64_t half = rotary_dim / 2;
  t.inv_freq_.resize(half);
  for (int64_t i = 0; i < half; ++i)
    t.inv_freq_[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / rotary_dim);
  switch (s.type) {
    case RopeScalingType::kNone:
      break;
    case RopeScalingType::kLinear:
      for (auto& f : t.inv_freq_) f /= s.factor;
      break;
    case RopeScalingType::kLlama3: {
      const double old_len = s.original_max_position_embeddings > 0
                                 ? static_cast<double>(s.original_max_position_embeddings)
                                 : 8192.0;
      const double low_wavelen = old_len / s.low_freq_factor;
      const double high_wavelen = old_len / s.high_freq_factor;
      for (auto& f : t.inv_freq_) {
        const double wavelen = 2 * M_PI / f;
        if (wavelen < high_wavelen) continue;
        if (wavelen > low_wavelen) {
          f /= s.factor;
        } else {
          double smooth =
              (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
          f = (1 - smooth) * f / s.factor + smooth * f;
        }
      }
      break;
    }
    case RopeScalingType::kYarn: {
      const int64_t orig = s.original_max_position_embeddings > 0
                               ? s.original_max_position_embeddings
                               : max_position_embeddings;
      double low = std::floor(yarn_correction_dim(s.beta_fast, rotary_dim, theta, orig));
      double high = std::ceil(yarn_correction_dim(s.beta_slow, rotary_dim, theta, orig));
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(rotary_dim - 1));
      if (low == high) high += 0.001;
      for (int64_t i = 0; i < half; ++i) {
        double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
        double extrapolation = t.inv_freq_[i];
        double interpolation = extrapolation / s.factor;
        t.inv_freq_[i] = interpolation * ramp + extrapolation * (1 - ramp);
      }
      t.magnitude_ = s.attention_factor ? *s.attention_factor
                                        : (s.factor <= 1 ? 1.0 : 0.1 * std::log(s.factor) + 1.0);
      break;
    }
    case RopeScalingType::kDynamic:
      return unimplemented("rope_scaling type 'dynamic' (dynamic NTK) is not supported yet");
  }
  return t;
}

Status RopeTable::apply_frequency_factors(std::span<const float> factors) {
  if (static_cast<int64_t>(factors.size()) != rotary_dim_ / 2)
    return invalid_argument("rope frequency factors have " + std::to_string(factors.size()) +
                            " values, expected " + std::to_string(rotary_dim_ / 2));
  for (size_t i = 0; i < factors.size(); ++i) {
    if (!(factors[i] > 0)) return invalid_argument("rope frequency factors must be positive");
    inv_freq_[i] /= factors[i];
  }
  return ok_status();
}

void RopeTable::compute(std::span<const int32_t> positions, float* cos, float* sin) const {
  const int64_t half = rotary_dim_ / 2;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int64_t i = 0; i < half; ++i) {
      double angle = static_cast<double>(positions[t]) * inv_freq_[i];
      cos[t * half + i] = static_cast<float>(std::cos(angle) * magnitude_);
      sin[t * half + i] = static_cast<float>(std::sin(angle) * magnitude_);
    }
  }
}

}  // namespace strata
