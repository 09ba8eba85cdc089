// Request arrival times as vllm bench serve draws them: with an infinite rate every request is
// sent at once; otherwise the gaps follow a gamma distribution with shape = burstiness and
// scale = 1 / (rate * burstiness) (burstiness 1 is a Poisson process; < 1 burstier, > 1 more
// even; infinite burstiness means constant gaps of 1 / rate). The cumulative times are rescaled
// so the last request is sent at num_requests / rate, which removes run-to-run drift of the
// offered load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace strata::bench {

// Seconds from the start of the run at which each request is sent (non-decreasing).
// Preconditions: rate > 0 (may be +inf), burstiness > 0 (may be +inf).
std::vector<double> arrival_offsets(size_t num_requests, double rate, double burstiness, Rng* rng);

// The offsets a `strata bench serve` run sends its requests at: arrival_offsets drawn from a fresh
// Rng(seed) (--seed). The runner and the planner's simulator (plan/simulator.h) both use it, so a
// simulated workload arrives as the benchmark's would.
std::vector<double> run_arrival_offsets(size_t num_requests, double rate, double burstiness,
                                        uint64_t seed);

// A Gamma(shape, scale) sample (Marsaglia and Tsang; shape < 1 by the boosting trick).
double sample_gamma(Rng* rng, double shape, double scale);

}  // namespace strata::bench
