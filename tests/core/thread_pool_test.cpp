#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace strata {
namespace {

TEST(ThreadPoolTest, ForEachRunsEveryIndexOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(7);
  for (int rep = 0; rep < 1000; ++rep) pool.for_each(7, [&](int64_t i) { hits[i]++; });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1000);
}

TEST(ThreadPoolTest, ParallelForCoversRangeOnceWithGrainBoundaries) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 63, 64, 65, 1000}) {
      std::vector<std::atomic<int>> seen(n);
      pool.parallel_for(n, 8, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b % 8, 0);
        for (int64_t i = b; i < e; ++i) seen[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << n << " " << i;
    }
  }
}

TEST(ThreadPoolTest, ThreadIndexIsInRangeAndUniqueAtATime) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> busy(3);
  std::atomic<bool> ok{true};
  pool.parallel_for(300, 1, [&](int64_t, int64_t) {
    int t = ThreadPool::current_thread_index();
    if (t < 0 || t >= 3 || busy[t]++ != 0) ok = false;
    busy[t]--;
  });
  EXPECT_TRUE(ok.load());
}

TEST(ThreadPoolTest, NestedRegionRunsInline) {
  ThreadPool pool(2);
  std::atomic<int> total{0};
  pool.for_each(
      2, [&](int64_t) { pool.parallel_for(10, 1, [&](int64_t b, int64_t e) { total += e - b; }); });
  EXPECT_EQ(total.load(), 20);
}

// Polls `pred` until it holds (the deadline is a safety net against a hang, not a measure).
bool wait_until(const std::function<bool()>& pred) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

TEST(ThreadPoolTest, SleepsAndWakes) {
  ThreadPool pool(3);
  for (int round = 0; round < 3; ++round) {
    // Idle workers go to sleep...
    ASSERT_TRUE(wait_until([&] { return pool.num_sleeping() == 2; })) << "round " << round;
    // ...and a new job wakes them: each item waits until all three run at once, which only
    // happens when both sleeping workers took an item beside the caller.
    std::atomic<int> arrived{0};
    std::atomic<int> timed_out{0};
    std::vector<std::atomic<int>> on_thread(3);
    pool.for_each(3, [&](int64_t i) {
      arrived++;
      if (!wait_until([&] { return arrived.load() == 3; })) timed_out++;
      on_thread[i] = ThreadPool::current_thread_index();
    });
    EXPECT_EQ(timed_out.load(), 0) << "round " << round << ": a worker did not wake";
    std::vector<int> threads = {on_thread[0], on_thread[1], on_thread[2]};
    std::sort(threads.begin(), threads.end());
    EXPECT_EQ(threads, (std::vector<int>{0, 1, 2})) << "round " << round;
  }
}

TEST(ThreadPoolTest, CallerFinishesWhenWorkersAreSlow) {
  // Many tiny regions back to back: every chunk runs exactly once even when workers lag.
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 20000; ++rep)
    pool.parallel_for(16, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 20000 * 16);
}

TEST(ThreadPoolTest, LateWorkerNeverRunsAChunkOfTheNextJob) {
  // Alternate jobs of few and many chunks back to back, each with its own stack state. A worker
  // late for a small job must not claim a chunk of the larger job being written (it once did: it
  // ran a destroyed functor or counted a chunk twice, crashing or hanging the caller).
  ThreadPool pool(2);
  int bad = 0;
  for (int rep = 0; rep < 50000; ++rep) {
    const int64_t n = rep % 2 ? 2 : 64;
    std::atomic<int64_t> covered{0};
    std::atomic<int> out_of_range{0};
    pool.parallel_for(n, 1, [&, n](int64_t b, int64_t e) {
      if (b < 0 || e > n || b >= e) out_of_range++;
      covered += e - b;
    });
    if (covered.load() != n || out_of_range.load() != 0) ++bad;
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace strata
