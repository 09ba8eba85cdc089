#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>

#include "core/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define STRATA_CPU_RELAX() _mm_pause()
#else
#define STRATA_CPU_RELAX() ((void)0)
#endif

namespace strata {
namespace {
thread_local bool t_in_parallel_region = false;
constexpr int kSpinIterations = 1 << 16;  // ~50-100 us of spinning before sleeping
}  // namespace

int ThreadPool::hardware_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  epoch_.fetch_add(1);
  epoch_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t e = epoch_.load(std::memory_order_acquire);
    int spins = 0;
    while (e == seen) {
      if (++spins < kSpinIterations) {
        STRATA_CPU_RELAX();
      } else {
        sleepers_.fetch_add(1);
        epoch_.wait(seen);
        sleepers_.fetch_sub(1);
        spins = 0;
      }
      e = epoch_.load(std::memory_order_acquire);
    }
    seen = e;
    if (stop_.load()) return;
    t_in_parallel_region = true;
    (*job_)(index);
    t_in_parallel_region = false;
    remaining_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(FunctionRef<void(int)> fn) {
  if (num_threads_ == 1 || t_in_parallel_region) {
    for (int i = 0; i < num_threads_; ++i) fn(i);
    return;
  }
  job_ = &fn;
  remaining_.store(num_threads_ - 1, std::memory_order_relaxed);
  epoch_.fetch_add(1);
  if (sleepers_.load() > 0) epoch_.notify_all();
  t_in_parallel_region = true;
  fn(0);
  t_in_parallel_region = false;
  while (remaining_.load(std::memory_order_acquire) != 0) STRATA_CPU_RELAX();
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t blocks = (n + grain - 1) / grain;
  int parts = static_cast<int>(std::min<int64_t>(blocks, num_threads_));
  if (parts <= 1 || t_in_parallel_region) {
    fn(0, n);
    return;
  }
  run([&](int t) {
    if (t >= parts) return;
    int64_t b0 = blocks * t / parts, b1 = blocks * (t + 1) / parts;
    int64_t begin = b0 * grain, end = std::min(n, b1 * grain);
    if (begin < end) fn(begin, end);
  });
}

}  // namespace strata
