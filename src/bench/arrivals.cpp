#include "bench/arrivals.h"

#include <cmath>
#include <limits>

namespace strata::bench {

double sample_gamma(Rng* rng, double shape, double scale) {
  if (shape < 1.0) {
    double u = rng->uniform();
    if (u < 1e-300) u = 1e-300;
    return sample_gamma(rng, shape + 1.0, scale) * std::pow(u, 1.0 / shape);
  }
  double d = shape - 1.0 / 3.0;
  double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x = rng->normal();
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = rng->uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
    if (u > 0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * scale;
  }
}

std::vector<double> arrival_offsets(size_t n, double rate, double burstiness, Rng* rng) {
  std::vector<double> t(n, 0.0);
  if (n == 0 || std::isinf(rate)) return t;
  for (size_t i = 0; i < n; ++i) {
    double gap = std::isinf(burstiness) ? 1.0 / rate
                                        : sample_gamma(rng, burstiness, 1.0 / (rate * burstiness));
    t[i] = gap + (i > 0 ? t[i - 1] : 0.0);
  }
  if (t.back() > 0) {
    double scale = static_cast<double>(n) / rate / t.back();
    for (double& x : t) x *= scale;
  }
  return t;
}

std::vector<double> run_arrival_offsets(size_t n, double rate, double burstiness, uint64_t seed) {
  Rng rng(seed);
  return arrival_offsets(n, rate, burstiness, &rng);
}

}  // namespace strata::bench
