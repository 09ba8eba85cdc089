// The launch helpers: the parallelism flags, what the launcher's environment says, the network
// interface checks and the timeout variable.
#include "dist/launch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "dist/mpi_comm.h"

namespace strata {
namespace {

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [k, v] : vars) {
      const char* old = std::getenv(k);
      saved_.push_back({k, old ? std::optional<std::string>(old) : std::nullopt});
      if (v)
        setenv(k, v, 1);
      else
        unsetenv(k);
    }
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v)
        setenv(k.c_str(), v->c_str(), 1);
      else
        unsetenv(k.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

Result<dist::ParallelOptions> parse(std::vector<std::string> argv) {
  OptionSet o;
  dist::add_parallel_options(o);
  argv.insert(argv.begin(), "model");
  auto args = o.parse(argv);
  if (!args.ok()) return args.status();
  return dist::parallel_options_from_args(*args);
}

TEST(Launch, ParallelFlags) {
  ScopedEnv env({{"STRATA_SOCKET_IFNAME", nullptr}});
  auto p = parse({"--tensor-parallel-size", "2", "--pipeline-parallel-size", "3",
                  "--enable-expert-parallel", "--distributed-interface", "lo"});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->world_size(), 6);
  EXPECT_TRUE(p->enable_expert_parallel);
  EXPECT_EQ(p->interface, "lo");
  auto d = parse({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->world_size(), 1);
  EXPECT_TRUE(d->interface.empty());
  EXPECT_FALSE(parse({"--tensor-parallel-size", "0"}).ok());
  EXPECT_FALSE(parse({"--pipeline-parallel-size", "-1"}).ok());
}

TEST(Launch, AnInterfaceThatDoesNotExistIsAnErrorNamingTheOnesThatDo) {
  EXPECT_TRUE(dist::check_interface("lo").ok());
  Status s = dist::check_interface("nosuch0");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("network interface 'nosuch0' does not exist on this host"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("interfaces here: "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("lo (127.0.0.1)"), std::string::npos) << s.message();
  {
    ScopedEnv env({{"STRATA_SOCKET_IFNAME", "nosuch0"}});
    auto p = parse({"--tensor-parallel-size", "2"});
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("STRATA_SOCKET_IFNAME"), std::string::npos);
    // The flag wins over the variable.
    auto q = parse({"--distributed-interface", "lo"});
    ASSERT_TRUE(q.ok()) << q.status().message();
    EXPECT_EQ(q->interface, "lo");
  }
  auto f = parse({"--distributed-interface", "nosuch0"});
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("--distributed-interface"), std::string::npos);
}

TEST(Launch, ARankOnTheLaunchersHostLeavesTheChoiceToMpiUnlessOneIsNamed) {
  std::string why;
  {
    ScopedEnv env({{"OMPI_MCA_orte_hnp_uri", "123.0;tcp://127.0.0.1:5000"}});
    auto c = dist::choose_rank_interface("", &why);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(*c, "");
    EXPECT_NE(why.find("MPI's default"), std::string::npos) << why;
    auto named = dist::choose_rank_interface("lo", &why);
    ASSERT_TRUE(named.ok());
    EXPECT_EQ(*named, "lo");
    EXPECT_FALSE(dist::choose_rank_interface("nosuch0", &why).ok());
  }
}

TEST(Launch, TheInterfaceTowardsLoopbackIsLo) {
  EXPECT_EQ(dist::interface_towards("127.0.0.1"), "lo 127.0.0.1");
  EXPECT_EQ(dist::interface_towards("no-such-host.invalid"), "");
}

TEST(Launch, TheLauncherIsReadFromTheEnvironment) {
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_SIZE", "6"},
                   {"OMPI_COMM_WORLD_RANK", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
    auto e = dist::detect_launch_env();
    EXPECT_EQ(e.launcher, "mpirun");
    EXPECT_EQ(e.world_size, 6);
    EXPECT_EQ(e.world_rank, 4);
    EXPECT_EQ(e.local_size, 2);
  }
  {
    ScopedEnv env({{"OMPI_COMM_WORLD_SIZE", nullptr},
                   {"PMI_SIZE", nullptr},
                   {"SLURM_STEP_ID", "0"},
                   {"SLURM_NTASKS", "8"},
                   {"SLURM_PROCID", "3"},
                   {"SLURM_NTASKS_PER_NODE", "4"}});
    auto e = dist::detect_launch_env();
    EXPECT_EQ(e.launcher, "srun");
    EXPECT_EQ(e.world_size, 8);
    EXPECT_EQ(e.world_rank, 3);
    EXPECT_EQ(e.local_size, 4);
  }
  {
    ScopedEnv env(
        {{"OMPI_COMM_WORLD_SIZE", nullptr}, {"PMI_SIZE", nullptr}, {"SLURM_STEP_ID", nullptr}});
    auto e = dist::detect_launch_env();
    EXPECT_FALSE(e.under_launcher());
    EXPECT_EQ(e.world_size, 1);
  }
}

TEST(Launch, TheTimeoutVariable) {
  {
    ScopedEnv env({{"STRATA_DIST_TIMEOUT", nullptr}});
    EXPECT_EQ(*dist::dist_timeout_seconds(), 30);
  }
  {
    ScopedEnv env({{"STRATA_DIST_TIMEOUT", "2.5"}});
    EXPECT_EQ(*dist::dist_timeout_seconds(), 2.5);
  }
  for (const char* bad : {"0", "-1", "soon", "3s"}) {
    ScopedEnv env({{"STRATA_DIST_TIMEOUT", bad}});
    auto t = dist::dist_timeout_seconds();
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_NE(t.status().message().find("STRATA_DIST_TIMEOUT"), std::string::npos);
  }
}

}  // namespace
}  // namespace strata
