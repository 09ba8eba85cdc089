// MpiComm and MpiWorld under `mpirun -np 4` (ctest runs it so): the world group, its split into
// a 2 x 2 tensor x pipeline layout, every collective, and the errors instead of hangs. Every rank
// runs the same tests in the same order; the process exits non-zero when any rank failed one.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <ctime>

#include <cstring>
#include <string>
#include <vector>

#include "dist/mpi_comm.h"

namespace strata {
namespace {

dist::MpiWorld* g_world = nullptr;
ModelParallel g_parallel;

TEST(MpiComm, TheWorldKnowsEveryRankAndHost) {
  ASSERT_EQ(g_world->size(), 4);
  // OpenMPI as Debian ships it gives MPI_THREAD_MULTIPLE, so the keep-alive runs.
  EXPECT_TRUE(g_world->has_keep_alive());
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(g_world->hosts()[g_world->rank()], host);
  const std::string me = g_world->world().describe_rank(g_world->rank());
  EXPECT_NE(me.find("rank " + std::to_string(g_world->rank()) + " on host " + host),
            std::string::npos)
      << me;
  EXPECT_NE(me.find("pid " + std::to_string(getpid())), std::string::npos) << me;
}

TEST(MpiComm, AllGatherBroadcastBarrierAndPointToPoint) {
  Comm& w = g_world->world();
  const int me = w.rank(), n = w.size();
  // all_gather: each rank's 3 ints, in rank order; the send buffer may alias the own slot.
  std::vector<int32_t> all(3 * n, -1);
  for (int k = 0; k < 3; ++k) all[3 * me + k] = 100 * me + k;
  ASSERT_TRUE(w.all_gather(&all[3 * me], 3 * sizeof(int32_t), all.data()).ok());
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(all[3 * r + k], 100 * r + k);
  // broadcast from a root other than 0, and a string of any length.
  std::string s = me == 2 ? std::string(100000, 'x') + "end" : "";
  ASSERT_TRUE(broadcast_string(w, &s, 2).ok());
  EXPECT_EQ(s.size(), 100003u);
  EXPECT_EQ(s.substr(s.size() - 3), "end");
  ASSERT_TRUE(w.barrier().ok());
  // A ring: each rank sends to the next and receives from the previous, twice, in order.
  for (int round = 0; round < 2; ++round) {
    int64_t out = me * 10 + round, in = -1;
    if (me % 2 == 0) {
      ASSERT_TRUE(w.send((me + 1) % n, &out, sizeof(out)).ok());
      ASSERT_TRUE(w.recv((me + n - 1) % n, &in, sizeof(in)).ok());
    } else {
      ASSERT_TRUE(w.recv((me + n - 1) % n, &in, sizeof(in)).ok());
      ASSERT_TRUE(w.send((me + 1) % n, &out, sizeof(out)).ok());
    }
    EXPECT_EQ(in, ((me + n - 1) % n) * 10 + round);
  }
  // Empty messages are fine.
  ASSERT_TRUE(w.all_gather(nullptr, 0, nullptr).ok());
}

TEST(MpiComm, TheSplitGivesTensorParallelNeighboursAndPipelineStages) {
  const int me = g_world->rank();
  EXPECT_EQ(g_parallel.tp_rank, me % 2);
  EXPECT_EQ(g_parallel.pp_rank, me / 2);
  EXPECT_EQ(g_parallel.world_rank(), me);
  ASSERT_NE(g_parallel.tp, nullptr);
  ASSERT_NE(g_parallel.pp, nullptr);
  Comm& tp = *g_parallel.tp;
  Comm& pp = *g_parallel.pp;
  EXPECT_EQ(tp.size(), 2);
  EXPECT_EQ(pp.size(), 2);
  EXPECT_EQ(tp.rank(), g_parallel.tp_rank);
  EXPECT_EQ(pp.rank(), g_parallel.pp_rank);
  int32_t mine = me, got[2] = {-1, -1};
  ASSERT_TRUE(tp.all_gather(&mine, sizeof(mine), got).ok());
  EXPECT_EQ(got[0], 2 * g_parallel.pp_rank);  // the stage's ranks are neighbours
  EXPECT_EQ(got[1], 2 * g_parallel.pp_rank + 1);
  ASSERT_TRUE(pp.all_gather(&mine, sizeof(mine), got).ok());
  EXPECT_EQ(got[0], g_parallel.tp_rank);  // one rank per stage with this tp_rank
  EXPECT_EQ(got[1], g_parallel.tp_rank + 2);
  // Messages name world ranks.
  EXPECT_NE(pp.describe_rank(1).find("rank " + std::to_string(g_parallel.tp_rank + 2) + " on host"),
            std::string::npos)
      << pp.describe_rank(1);
  // Point to point inside a stage.
  int64_t v = 7 + me, w = -1;
  if (tp.rank() == 0) {
    ASSERT_TRUE(tp.send(1, &v, sizeof(v)).ok());
  } else {
    ASSERT_TRUE(tp.recv(0, &w, sizeof(w)).ok());
    EXPECT_EQ(w, 7 + me - 1);
  }
  EXPECT_FALSE(tp.send(tp.rank(), &v, sizeof(v)).ok());  // to itself: a usage error
}

// A rank that is alive but busy for longer than the timeout (a later pipeline stage computing
// a long forward) is waited for: the keep-alive tells it from a dead one. The timeouts in these
// tests are eight keep-alive intervals (0.25 s) or more, so a loaded machine does not delay a
// beat past them.
TEST(MpiComm, ABusyRankThatIsAliveIsWaitedForPastTheTimeout) {
  if (!g_world->has_keep_alive()) GTEST_SKIP() << "this MPI library gives no keep-alive";
  const int me = g_world->rank();
  Comm& w = g_world->world();
  if (me == 0) {
    g_world->set_timeout(2.5);
    int64_t v = 0;
    Status s = w.recv(1, &v, sizeof(v));
    g_world->set_timeout(30);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(v, 42);
  } else if (me == 1) {
    sleep(7);  // busy, silent on the group, still sending its keep-alive
    int64_t v = 42;
    ASSERT_TRUE(w.send(0, &v, sizeof(v)).ok());
  }
}

// The last tests break groups on purpose: a stopped rank, a silent peer, a wrong size.

// A rank whose process is stopped (as a dead or unreachable one) is named after the timeout,
// though the wait may go on for a live one: here rank 2 is frozen with SIGSTOP for 8 s.
TEST(MpiComm, AStoppedRankIsNamedAfterTheTimeoutNotTheWaitLimit) {
  if (!g_world->has_keep_alive()) GTEST_SKIP() << "this MPI library gives no keep-alive";
  const int me = g_world->rank();
  ASSERT_TRUE(g_world->world().barrier().ok());
  if (me == 2) {
    const pid_t self = getpid();
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // only async-signal-safe calls here
      kill(self, SIGSTOP);
      struct timespec t {
        8, 0
      };
      nanosleep(&t, nullptr);
      kill(self, SIGCONT);
      _exit(0);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  } else if (me == 0) {
    Comm& pp = *g_parallel.pp;  // world ranks 0 and 2
    g_world->set_timeout(2);
    g_world->set_wait_limit(30);  // were rank 2 not frozen, a failure instead of a hang
    int64_t v = 0;
    Status s = pp.recv(1, &v, sizeof(v));  // rank 2 never sends this
    g_world->set_timeout(30);
    g_world->set_wait_limit(0);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(
        s.message().find("rank 2 on host " + g_world->hosts()[2] + " did not answer within 2 s"),
        std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("pipeline-parallel group"), std::string::npos) << s.message();
  }
  // Everyone again, rank 2 thawed (this waits for it: it is silent for less than 30 s).
  ASSERT_TRUE(g_world->world().barrier().ok());
}

TEST(MpiComm, ASilentPeerIsAnErrorNamingItAfterTheTimeoutNotAHang) {
  const int me = g_world->rank();
  Comm& tp = *g_parallel.tp;
  if (me == 0) {
    // Rank 1 is alive (its keep-alive runs): the wait limit bounds the wait for it.
    const bool alive = g_world->has_keep_alive();
    g_world->set_timeout(2);
    g_world->set_wait_limit(4);
    int64_t v = 0;
    Status s = tp.recv(1, &v, sizeof(v));  // rank 1 never sends this
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    const std::string expected =
        alive
            ? "rank 1 on host " + g_world->hosts()[1] + " is running but did not answer within 4 s"
            : "rank 1 on host " + g_world->hosts()[1] + " did not answer within 2 s";
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("tensor-parallel group"), std::string::npos) << s.message();
    // The group stays broken: the next call fails at once with the same error.
    Status again = tp.barrier();
    EXPECT_EQ(again.message(), s.message());
    g_world->set_timeout(30);
    g_world->set_wait_limit(0);
  }
}

TEST(MpiComm, AMessageOfTheWrongSizeIsAnError) {
  const int me = g_world->rank();
  Comm& pp = *g_parallel.pp;
  if (me == 3) {
    int64_t small = 5;
    ASSERT_TRUE(pp.send(0, &small, sizeof(small)).ok());
  } else if (me == 1) {
    char big[16];
    Status s = pp.recv(1, big, sizeof(big));
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("rank 3 on host"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("sent 8 bytes"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto world = strata::dist::MpiWorld::init(30);
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().message().c_str());
    return 1;
  }
  strata::g_world = world->get();
  if ((*world)->size() != 4) {
    std::fprintf(stderr, "run this test with mpirun -np 4 (it has %d ranks)\n", (*world)->size());
    (*world)->abort(1);
  }
  strata::g_parallel.tp_size = 2;
  strata::g_parallel.pp_size = 2;
  if (auto s = (*world)->split(&strata::g_parallel); !s.ok()) {
    std::fprintf(stderr, "split: %s\n", s.message().c_str());
    (*world)->abort(1);
  }
  int rc = RUN_ALL_TESTS() == 0 ? 0 : 1;
  // Every rank's verdict: the process fails when any rank failed.
  std::vector<int32_t> all((*world)->size());
  int32_t mine = rc;
  if (!(*world)->world().all_gather(&mine, sizeof(mine), all.data()).ok()) (*world)->abort(1);
  for (int32_t r : all) rc |= r;
  world->reset();
  return rc;
}
