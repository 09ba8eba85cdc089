// Measures this machine's memory read bandwidth with the compute threads (for the decode
// bandwidth-utilisation figure of `strata bench latency`).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace strata {

// Reads a buffer of `bytes` (well above the caches) `passes` times with all threads of `pool`
// and returns the best observed read bandwidth in bytes per second.
double measure_read_bandwidth(ThreadPool& pool, int64_t bytes = int64_t{1} << 30, int passes = 5);

}  // namespace strata
