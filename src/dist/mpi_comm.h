// The MPI runtime of one process (MpiWorld) and strata::Comm over MPI communicators (MpiComm).
//
// MpiWorld::init() starts MPI (MPI_Init_thread, MPI_ERRORS_RETURN on every communicator), learns
// where each rank runs (MPI_Get_processor_name, all-gathered) and hands out the world group;
// split() cuts it into the groups of a tensor x pipeline deployment (model/parallel.h: tp = the
// ranks of one stage, pp = the ranks with one tp_rank across stages; world rank = pp_rank * tp_size
// + tp_rank).
//
// No call waits forever: every operation is non-blocking MPI (MPI_Isend/MPI_Irecv) polled with
// MPI_Test against a deadline (the group's timeout: 30 s, or STRATA_DIST_TIMEOUT seconds). On
// expiry the call returns kUnavailable naming the peer that did not answer ("rank 2 on host c did
// not answer within 30 s"), and the group stays broken: later calls return the same error at once.
// Collectives are built from point-to-point messages, so a timed-out collective knows which ranks
// are missing. A process that uses MPI from several threads must serialize its calls on the
// groups (one at a time); DistExecutor does.
//
// Silent is not the same as busy. When the library gives MPI_THREAD_MULTIPLE, every rank runs a
// keep-alive thread that sends a byte to every other rank a few times a second over its own
// communicator. A wait that reaches the timeout then fails only when some rank of the job has
// not been heard from for the timeout (died, stopped, unreachable: it is named); while every
// rank is alive (a later pipeline stage computing a long forward, a slow shard load) the wait
// goes on, up to the wait limit (set_wait_limit; 0: none), after which the busy rank is named.
//
// Without MPI (STRATA_HAVE_MPI == 0) the same header compiles and init() returns an error that
// says how to get MPI.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/status.h"
#include "model/parallel.h"

namespace strata::dist {

// True when this binary was built with MPI.
bool have_mpi();

// The group timeout: STRATA_DIST_TIMEOUT (seconds, > 0) or 30.
Result<double> dist_timeout_seconds();

class MpiComm;
class Liveness;

class MpiWorld {
 public:
  // Starts MPI in this process (once). `timeout_seconds` bounds every call of the groups.
  static Result<std::unique_ptr<MpiWorld>> init(double timeout_seconds);
  ~MpiWorld();  // frees the groups and calls MPI_Finalize (unless abort() ran)

  int rank() const;
  int size() const;
  // The processor name of each world rank.
  const std::vector<std::string>& hosts() const { return hosts_; }
  Comm& world();
  // Changes the timeout of every group: how long a rank may stay silent (or, without a
  // keep-alive, how long any wait may last).
  void set_timeout(double seconds);
  // With a keep-alive: how long a wait on ranks that are alive may last (0: no bound).
  void set_wait_limit(double seconds);
  // Whether the keep-alive runs (MPI_THREAD_MULTIPLE).
  bool has_keep_alive() const;
  // With a keep-alive: until watch(nullptr), a rank silent for the timeout makes the keep-alive
  // thread call `on_lost` once with "rank R on host H did not answer within T s", even while
  // this rank computes (rank 0 loading its own shard). Without one, nothing.
  void watch(std::function<void(const std::string&)> on_lost);
  // Cuts the world into the tp and pp groups of `parallel` (tp_size x pp_size == size(); the
  // rank's tp_rank/pp_rank are filled from its world rank) and points parallel->tp / ->pp at them
  // (null for groups of one). Collective over the world; once.
  Status split(ModelParallel* parallel);
  // Ends every rank of the job now with `code` (MPI_Abort): after a peer failed, when
  // MPI_Finalize could wait for it.
  [[noreturn]] void abort(int code);

 private:
  MpiWorld() = default;
  std::vector<std::string> hosts_;
  std::vector<long> pids_;
  double timeout_ = 30, limit_ = 0;
  std::unique_ptr<Liveness> liveness_;  // the keep-alive; before the groups, which use it
  std::unique_ptr<MpiComm> world_, tp_, pp_;
};

}  // namespace strata::dist
