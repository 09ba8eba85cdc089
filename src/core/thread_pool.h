// A fixed pool of compute threads for kernels. The calling thread takes part, so a pool of size 1
// runs everything inline.
//
// Work is split into fixed chunks that threads claim one at a time, and a parallel region ends
// when every chunk is done, not when every thread has checked in: a worker that the OS has not
// scheduled (the machine is busy) simply finds no chunks left, and the caller does the work. Chunk
// boundaries depend only on the range and the grain, never on the thread count, and each output
// is written by exactly one chunk, so results are the same whichever thread runs what.
//
// Workers spin briefly between regions (a forward pass issues hundreds) and then sleep. A region
// started from inside another runs inline on the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/function_ref.h"

namespace strata {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // Splits [0, n) into chunks whose boundaries are multiples of `grain` (about four per thread,
  // never smaller than `grain`) and calls fn(begin, end) once per chunk, on any thread.
  void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn);

  // Calls fn(i) once for each i in [0, count), on any threads (count chunks of one).
  void for_each(int64_t count, FunctionRef<void(int64_t)> fn);

  // Index in [0, size()) of the calling thread inside a parallel region (0 outside): selects
  // per-thread scratch space.
  static int current_thread_index();

  // Number of hardware threads available to this process.
  static int hardware_threads();

  // Workers asleep right now (they spin briefly after a job, then sleep until the next one).
  // For tests and diagnostics.
  int num_sleeping() const { return sleepers_.load(); }

 private:
  void worker_loop(int index);
  // Claims and runs chunks of the current job until none are left.
  void work_on(uint32_t epoch);

  int num_threads_;
  std::vector<std::thread> workers_;
  // Job, written by the caller between closing the old epoch and publishing the new one in state_
  // (atomics because a worker late for the old epoch may read them while they change).
  std::atomic<FunctionRef<void(int64_t, int64_t)>*> fn_{nullptr};
  std::atomic<int64_t> n_{0}, chunk_{1};
  std::atomic<uint32_t> num_chunks_{0};
  // state_: epoch in the high 32 bits, next unclaimed chunk in the low 32 bits (kClosed while the
  // job for that epoch is being written).
  static constexpr uint32_t kClosed = 0xFFFFFFFFu;
  std::atomic<uint64_t> state_{0};
  std::atomic<uint32_t> wake_{0};  // bumped per job; workers wait on it
  std::atomic<uint32_t> done_chunks_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace strata
