#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace strata {
namespace {

TEST(ThreadPoolTest, RunsEveryThreadOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(3);
  for (int rep = 0; rep < 1000; ++rep) pool.run([&](int t) { hits[t]++; });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1000);
}

TEST(ThreadPoolTest, ParallelForCoversRangeOnceWithGrainBoundaries) {
  ThreadPool pool(4);
  for (int64_t n : {1, 7, 63, 64, 65, 1000}) {
    std::vector<std::atomic<int>> seen(n);
    pool.parallel_for(n, 8, [&](int64_t b, int64_t e) {
      EXPECT_EQ(b % 8, 0);
      for (int64_t i = b; i < e; ++i) seen[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << n << " " << i;
  }
}

TEST(ThreadPoolTest, NestedRegionRunsInline) {
  ThreadPool pool(2);
  std::atomic<int> total{0};
  pool.run([&](int) { pool.parallel_for(10, 1, [&](int64_t b, int64_t e) { total += e - b; }); });
  EXPECT_EQ(total.load(), 20);
}

TEST(ThreadPoolTest, SleepsAndWakes) {
  ThreadPool pool(2);
  std::atomic<int> n{0};
  pool.run([&](int) { n++; });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // workers go to sleep
  pool.run([&](int) { n++; });
  EXPECT_EQ(n.load(), 4);
}

}  // namespace
}  // namespace strata
