// Measures this machine's memory read bandwidth and f32 FMA peak with the compute threads (for the
// decode bandwidth and prefill compute utilisation figures of `strata bench latency`).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace strata {

// Reads a buffer of `bytes` (well above the caches) `passes` times with all threads of `pool`
// and returns the best observed read bandwidth in bytes per second.
double measure_read_bandwidth(ThreadPool& pool, int64_t bytes = int64_t{1} << 30, int passes = 5);

// Runs independent f32 FMA chains on every thread of `pool` (AVX2 when available) and returns the
// best observed rate in FLOP/s (2 per multiply-add and lane) over `passes`.
double measure_fma_peak(ThreadPool& pool, int passes = 5);

}  // namespace strata
