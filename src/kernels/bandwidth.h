// Measures this machine's memory read bandwidth and f32 FMA peak with the compute threads (for the
// decode bandwidth and prefill compute utilisation figures of `strata bench latency`).
#pragma once

#include <cstdint>

#include "core/aligned_buffer.h"
#include "core/thread_pool.h"

namespace strata {

// A buffer of `bytes` (well above the caches) read with all threads of `pool`: each pass() reads
// it once and returns that pass's bandwidth in bytes per second; best() is the highest so far.
// A benchmark can spread passes among its own iterations so that both see the same machine (on a
// shared machine the bandwidth on offer drifts from second to second).
class ReadBandwidthMeter {
 public:
  ReadBandwidthMeter(ThreadPool& pool, int64_t bytes);
  double pass();
  double best() const { return best_; }
  int passes() const { return passes_; }

 private:
  ThreadPool& pool_;
  int64_t n_;  // floats
  AlignedBuffer buf_;
  double best_ = 0;
  int passes_ = 0;
};

// `passes` passes of a ReadBandwidthMeter in a row; returns the best.
double measure_read_bandwidth(ThreadPool& pool, int64_t bytes = int64_t{1} << 30, int passes = 5);

// Runs independent f32 FMA chains on every thread of `pool` (AVX-512 when the CPU has it, else
// AVX2) and returns the best observed rate in FLOP/s (2 per multiply-add and lane) over `passes`.
double measure_fma_peak(ThreadPool& pool, int passes = 5);

}  // namespace strata
