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
thread_local int t_thread_index = 0;
thread_local bool t_in_parallel_region = false;
constexpr int kSpinIterations = 1 << 15;  // ~50 us of spinning before sleeping
constexpr int64_t kChunksPerThread = 4;
}  // namespace

int ThreadPool::hardware_threads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int ThreadPool::current_thread_index() {
  return t_thread_index;
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  wake_.fetch_add(1);
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::work_on(uint32_t epoch) {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(s >> 32) != epoch) return;
    const uint32_t chunk = static_cast<uint32_t>(s);
    if (chunk == kClosed) return;  // the next job is being written
    // Read the job, then claim a chunk. The caller closes the epoch (state_ = next epoch, kClosed)
    // before it rewrites the job, so if the claim below succeeds the values read here were this
    // epoch's: seeing a rewritten value would, through the fences, make the claim see the closing
    // store and fail.
    FunctionRef<void(int64_t, int64_t)>* fn = fn_.load(std::memory_order_relaxed);
    const int64_t n = n_.load(std::memory_order_relaxed);
    const int64_t size = chunk_.load(std::memory_order_relaxed);
    const uint32_t num_chunks = num_chunks_.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (chunk >= num_chunks) return;
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;
    const int64_t begin = chunk * size;
    (*fn)(begin, std::min(n, begin + size));
    done_chunks_.fetch_add(1, std::memory_order_acq_rel);
    s = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_loop(int index) {
  t_thread_index = index;
  uint32_t seen = 0;
  for (;;) {
    uint32_t w = wake_.load(std::memory_order_acquire);
    int spins = 0;
    while (w == seen) {
      if (++spins < kSpinIterations) {
        STRATA_CPU_RELAX();
      } else {
        sleepers_.fetch_add(1);
        wake_.wait(seen);
        sleepers_.fetch_sub(1);
        spins = 0;
      }
      w = wake_.load(std::memory_order_acquire);
    }
    seen = w;
    if (stop_.load()) return;
    t_in_parallel_region = true;
    work_on(static_cast<uint32_t>(state_.load(std::memory_order_acquire) >> 32));
    t_in_parallel_region = false;
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t blocks = (n + grain - 1) / grain;
  if (num_threads_ == 1 || blocks == 1 || t_in_parallel_region) {
    fn(0, n);
    return;
  }
  const int64_t target = std::min<int64_t>(blocks, kChunksPerThread * num_threads_);
  const int64_t blocks_per_chunk = (blocks + target - 1) / target;
  // Close the finished epoch before touching the job: a worker still holding the old state then
  // fails its claim instead of running a chunk of a half-written job.
  const uint32_t epoch = static_cast<uint32_t>(state_.load() >> 32) + 1;
  state_.store((static_cast<uint64_t>(epoch) << 32) | kClosed, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_release);
  fn_.store(&fn, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  const int64_t chunk = blocks_per_chunk * grain;
  chunk_.store(chunk, std::memory_order_relaxed);
  const auto num_chunks = static_cast<uint32_t>((n + chunk - 1) / chunk);
  num_chunks_.store(num_chunks, std::memory_order_relaxed);
  done_chunks_.store(0, std::memory_order_relaxed);
  state_.store(static_cast<uint64_t>(epoch) << 32, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_acq_rel);
  if (sleepers_.load() > 0) wake_.notify_all();
  t_in_parallel_region = true;
  work_on(epoch);
  t_in_parallel_region = false;
  while (done_chunks_.load(std::memory_order_acquire) != num_chunks) STRATA_CPU_RELAX();
}

void ThreadPool::for_each(int64_t count, FunctionRef<void(int64_t)> fn) {
  if (count <= 0) return;
  if (num_threads_ == 1 || t_in_parallel_region) {
    for (int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
  // One chunk per item: pass a grain of 1 and at most as many chunks as items.
  const int64_t saved = count;
  parallel_for(saved, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i);
  });
}

}  // namespace strata
