#include "core/comm.h"

#include <gtest/gtest.h>

#include <thread>

#include "model/parallel.h"

namespace strata {
namespace {

// Runs fn(rank, comm) on n threads of a local group.
template <typename Fn>
void run_group(int n, Fn fn) {
  auto group = make_local_group(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { fn(r, *group[r]); });
  for (auto& t : threads) t.join();
}

TEST(LocalComm, AllGatherPutsEveryRanksBytesInRankOrder) {
  run_group(3, [](int rank, Comm& comm) {
    EXPECT_EQ(comm.rank(), rank);
    EXPECT_EQ(comm.size(), 3);
    for (int round = 0; round < 50; ++round) {
      const int32_t mine[2] = {rank * 100 + round, -rank - round};
      int32_t all[6] = {};
      ASSERT_TRUE(comm.all_gather(mine, sizeof(mine), all).ok());
      for (int r = 0; r < 3; ++r) {
        EXPECT_EQ(all[2 * r], r * 100 + round);
        EXPECT_EQ(all[2 * r + 1], -r - round);
      }
    }
  });
}

TEST(LocalComm, AllGatherInPlace) {
  run_group(2, [](int rank, Comm& comm) {
    float buf[4] = {0, 0, 0, 0};
    buf[2 * rank] = static_cast<float>(rank + 1);
    buf[2 * rank + 1] = static_cast<float>(rank + 10);
    ASSERT_TRUE(comm.all_gather(buf + 2 * rank, 2 * sizeof(float), buf).ok());
    EXPECT_EQ(buf[0], 1.f);
    EXPECT_EQ(buf[1], 10.f);
    EXPECT_EQ(buf[2], 2.f);
    EXPECT_EQ(buf[3], 11.f);
  });
}

TEST(LocalComm, BroadcastStringAndPointToPoint) {
  run_group(3, [](int rank, Comm& comm) {
    std::string s = rank == 1 ? "the plan of step 7" : "";
    ASSERT_TRUE(broadcast_string(comm, &s, 1).ok());
    EXPECT_EQ(s, "the plan of step 7");
    // A ring: each rank sends its rank to the next and receives from the previous.
    const int next = (rank + 1) % 3, prev = (rank + 2) % 3;
    int32_t out = rank, in = -1;
    ASSERT_TRUE(comm.send(next, &out, sizeof(out)).ok());
    ASSERT_TRUE(comm.recv(prev, &in, sizeof(in)).ok());
    EXPECT_EQ(in, prev);
    // A size mismatch is an error, not a corrupt buffer.
    if (rank == 0) {
      ASSERT_TRUE(comm.send(1, &out, sizeof(out)).ok());
    }
    if (rank == 1) {
      int64_t wide = 0;
      EXPECT_FALSE(comm.recv(0, &wide, sizeof(wide)).ok());
    }
    ASSERT_TRUE(comm.barrier().ok());
  });
}

TEST(LocalComm, BusySecondsGrowWithEveryCall) {
  run_group(2, [](int rank, Comm& comm) {
    EXPECT_EQ(comm.busy_seconds(), 0);
    double last = 0;
    for (int round = 0; round < 5; ++round) {
      int32_t v = rank, all[2];
      ASSERT_TRUE(comm.all_gather(&v, sizeof(v), all).ok());
      EXPECT_GT(comm.busy_seconds(), last);
      last = comm.busy_seconds();
    }
  });
}

TEST(ShardRange, SplitsEvenlyWithTheRemainderFirst) {
  EXPECT_EQ(shard_range(10, 3, 0).begin, 0);
  EXPECT_EQ(shard_range(10, 3, 0).end, 4);
  EXPECT_EQ(shard_range(10, 3, 1).begin, 4);
  EXPECT_EQ(shard_range(10, 3, 1).end, 7);
  EXPECT_EQ(shard_range(10, 3, 2).begin, 7);
  EXPECT_EQ(shard_range(10, 3, 2).end, 10);
  EXPECT_EQ(shard_range(8, 2, 1).size(), 4);
}

TEST(PipelineLayerRanges, EvenSplitGivesTheRemainderToStagesBeforeTheLast) {
  auto r = pipeline_layer_ranges(61, 3, "");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].size(), 20);
  EXPECT_EQ((*r)[1].size(), 21);
  EXPECT_EQ((*r)[2].size(), 20);
  EXPECT_EQ((*r)[2].end, 61);
  auto two = pipeline_layer_ranges(5, 2, "");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ((*two)[0].size(), 3);
  EXPECT_EQ((*two)[1].begin, 3);
}

TEST(PipelineLayerRanges, ExplicitPartition) {
  auto r = pipeline_layer_ranges(61, 3, "21, 20,20");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].end, 21);
  EXPECT_EQ((*r)[1].end, 41);
  for (const char* bad : {"20,20", "20,20,20", "a,b,c", "0,30,31", "-1,31,31"}) {
    auto e = pipeline_layer_ranges(61, 3, bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.status().message().find("STRATA_PP_LAYER_PARTITION"), std::string::npos);
  }
  EXPECT_FALSE(pipeline_layer_ranges(2, 3, "").ok());
}

}  // namespace
}  // namespace strata
