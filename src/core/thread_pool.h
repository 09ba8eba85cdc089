// A fixed pool of compute threads for kernels. The calling thread takes part as thread 0, so a
// pool of size 1 runs everything inline. Workers spin briefly between jobs (a forward pass issues
// hundreds of small parallel regions) and then sleep. Not re-entrant: a parallel region started
// from inside another runs inline on the calling thread.
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

  // Calls fn(thread_index) once on each of size() threads; returns when all have finished.
  void run(FunctionRef<void(int)> fn);

  // Splits [0, n) into at most size() contiguous ranges whose boundaries are multiples of `grain`
  // and calls fn(begin, end) for each non-empty range. Which thread runs a range never changes a
  // result: callers give each output element to exactly one range.
  void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn);

  // Number of hardware threads available to this process.
  static int hardware_threads();

 private:
  void worker_loop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<int> remaining_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};  // workers blocked in epoch_.wait(); notify only when > 0
  FunctionRef<void(int)>* job_ = nullptr;
};

}  // namespace strata
