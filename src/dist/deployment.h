// One process's part in a tensor x pipeline (x expert) parallel deployment, for the commands that
// run an engine (`strata serve`, `strata generate`):
//
//   auto start = dist::start_distributed(args, &engine_config, "strata serve");
//   if (start.exit_code) return *start.exit_code;   // the self-launcher, or a rank > 0: done
//   if (start.deployment)                            // rank 0 of several
//     engine = Engine::create(config, start.deployment->executor_factory(on_failure));
//   else ...                                         // one process, as before
//   ...
//   return start.deployment ? start.deployment->finish(code) : code;
//
// Without --tensor-parallel-size/--pipeline-parallel-size above 1 and outside mpirun, nothing
// changes. Outside a launcher with more than one rank asked for, the command re-runs itself under
// `mpirun -np TP*PP` on this host (launch.h). Under mpirun or srun, the world size must be TP x PP;
// rank 0 runs the engine (and the HTTP server), the others run their Worker on the steps rank 0
// sends (dist_executor.h). Compute threads default to this host's cores / its ranks.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "core/options.h"
#include "core/status.h"
#include "dist/dist_executor.h"
#include "dist/launch.h"
#include "dist/mpi_comm.h"
#include "engine/engine.h"

namespace strata::dist {

class Deployment;
struct DistStart;
// See the header comment. `config` gets this rank's thread count when --threads is not given.
// Errors are printed (prefixed with `command`) and come back as an exit code.
DistStart start_distributed(const Args& args, engine::EngineConfig* config, const char* command);

class Deployment {
 public:
  ~Deployment();
  int rank() const { return world_->rank(); }
  const ModelParallel& parallel() const { return parallel_; }

  // Rank 0: builds the engine's executor: loads this rank's Worker, gathers every rank's report,
  // logs the world table and returns a DistExecutor; `on_failure` runs once if the group fails
  // later (a rank died or hangs): the caller stops serving and exits non-zero.
  engine::ExecutorFactory executor_factory(std::function<void(const Status&)> on_failure);
  // Rank 0, at the end: reports `code` to a self-launching parent and returns it; after a failure
  // of the group it ends every rank (MPI_Abort) with exit code 1 instead of returning.
  int finish(int code);
  bool failed() const { return failed_.load(); }

 private:
  friend DistStart start_distributed(const Args&, engine::EngineConfig*, const char*);
  Deployment() = default;
  int run_worker(const engine::EngineConfig& config);  // ranks > 0: the exit code
  RankReport report_for(engine::Worker& worker) const;

  ParallelOptions options_;
  ModelParallel parallel_;
  std::unique_ptr<MpiWorld> world_;
  std::string interface_;         // towards rank 0, for the world table
  std::string interface_choice_;  // which, and why (rank 0's log)
  int64_t num_experts_ = 0;
  double timeout_ = 30, start_timeout_ = 600;
  std::vector<RankReport> reports_;
  DistExecutor* executor_ = nullptr;
  std::atomic<bool> failed_{false};
  bool finished_ = false;
};

struct DistStart {
  std::unique_ptr<Deployment> deployment;  // rank 0 of several ranks
  std::optional<int> exit_code;            // this process is done: return this
};

}  // namespace strata::dist
