// Starting a multi-rank deployment: the parallelism flags (--tensor-parallel-size,
// --pipeline-parallel-size, --enable-expert-parallel, --distributed-interface), what the launcher
// (mpirun, srun) told this process, the network interface checks, and the self-launch of
// `strata serve MODEL --tensor-parallel-size 2` on one host through `mpirun -np 2` (vLLM's
// single-host behaviour).
#pragma once

#include <string>
#include <vector>

#include "core/options.h"
#include "core/status.h"

namespace strata::dist {

struct ParallelOptions {
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  bool enable_expert_parallel = false;
  // The network interface the ranks talk over (--distributed-interface, or STRATA_SOCKET_IFNAME);
  // empty: OpenMPI's choice.
  std::string interface;
  int world_size() const { return tensor_parallel_size * pipeline_parallel_size; }
};

void add_parallel_options(OptionSet& options);
Result<ParallelOptions> parallel_options_from_args(const Args& args);

// What the launcher set in this process's environment (read before MPI_Init).
struct LaunchEnv {
  std::string launcher;  // "mpirun", "srun" or "" (started by hand)
  int world_size = 1, world_rank = 0;
  int local_size = 1;  // ranks on this host
  bool under_launcher() const { return !launcher.empty(); }
};
LaunchEnv detect_launch_env();

// Ok when `name` is an interface of this host that is up with an IPv4 address; otherwise an error
// naming the usable ones (net/interfaces.h).
Status check_interface(const std::string& name);
// The interface this host would use to reach `host` (a name or address), as "eth0 10.0.0.2"; ""
// when it cannot tell.
std::string interface_towards(const std::string& host);
// A rank under a launcher, before MPI_Init: the interface to use (net::choose_interface: the named
// one, or the one whose route reaches mpirun's addresses; "" for MPI's default), why in *why.
Result<std::string> choose_rank_interface(const std::string& requested, std::string* why);

// Before MPI_Init in a rank: restricts OpenMPI's TCP transport to `interface` (checked first),
// through OMPI_MCA_btl_tcp_if_include.
Status use_interface(const std::string& interface);

// The self-launch: runs this very command line (/proc/self/cmdline) again as `world_size` ranks
// under `mpirun` on this host, forwarding SIGINT/SIGTERM to it, and returns the exit code rank 0
// reported (STRATA_DIST_EXIT_FILE), or 1 when it reported none. Prints why and returns 2 when
// mpirun is missing.
int self_launch(const ParallelOptions& options);
// Rank 0 of a self-launched job: records the process's exit code for the launching process.
void report_exit_code(int code);
// Every rank of a self-launched job, first thing: records its pid for the launching process,
// which watches the ranks until rank 0 has its groups (a rank lost before that ends the job
// with a message naming it, instead of leaving the others inside MPI_Init).
void report_started();

}  // namespace strata::dist
