#include "kernels/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/aligned_buffer.h"
#include "core/clock.h"
#include "kernels/backend.h"
#include "kernels/ops.h"

namespace strata {
namespace kernels::avx2 {
float sum_floats(const float* p, int64_t n);
double fma_chains(int64_t iterations, const float* seeds);  // returns FLOPs done
}  // namespace kernels::avx2
namespace kernels::avx512 {
double fma_chains(int64_t iterations, const float* seeds);  // returns FLOPs done
}  // namespace kernels::avx512

namespace {
float sum_floats_portable(const float* p, int64_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t i = 0; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  return s0 + s1 + s2 + s3;
}
}  // namespace

ReadBandwidthMeter::ReadBandwidthMeter(ThreadPool& pool, int64_t bytes)
    : pool_(pool),
      n_(std::max<int64_t>(64, bytes / 4 / 64 * 64)),
      buf_(AlignedBuffer::uninitialized(n_ * 4, AlignedBuffer::kHugePage)) {
  // Huge pages where the OS gives them, as for the weights (PackedWeight::place_in_order).
  buf_.advise_huge_pages();
  float* data = buf_.as<float>();
  pool_.parallel_for(n_, 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) data[i] = static_cast<float>(i & 7);
  });
}

double ReadBandwidthMeter::pass() {
  const float* data = buf_.as<float>();
  const bool avx2 = cpu_features().avx2;
  std::atomic<int64_t> sink{0};
  Stopwatch sw;
  pool_.parallel_for(n_, 4096, [&](int64_t b, int64_t e) {
    float s =
        avx2 ? kernels::avx2::sum_floats(data + b, e - b) : sum_floats_portable(data + b, e - b);
    sink += static_cast<int64_t>(s);
  });
  const double bw = static_cast<double>(n_) * 4 / sw.elapsed();
  best_ = std::max(best_, bw);
  ++passes_;
  return bw;
}

double measure_read_bandwidth(ThreadPool& pool, int64_t bytes, int passes) {
  ReadBandwidthMeter meter(pool, bytes);
  for (int p = 0; p < passes; ++p) meter.pass();
  return meter.best();
}

}  // namespace strata

namespace strata {

double measure_fma_peak(ThreadPool& pool, int passes) {
  if (!cpu_features().avx2) return 0;
  const bool avx512 = cpu_features().avx512;
  alignas(64) float seeds[12 * 16];
  for (int i = 0; i < 12 * 16; ++i) seeds[i] = 1.0f + 0.001f * static_cast<float>(i);
  double best = 0;
  const int64_t iters = 2'000'000;
  for (int p = 0; p < passes; ++p) {
    std::atomic<int64_t> flops{0};
    Stopwatch sw;
    pool.for_each(pool.size(), [&](int64_t) {
      flops += static_cast<int64_t>(avx512 ? kernels::avx512::fma_chains(iters, seeds)
                                           : kernels::avx2::fma_chains(iters, seeds));
    });
    best = std::max(best, static_cast<double>(flops.load()) / sw.elapsed());
  }
  return best;
}

}  // namespace strata
