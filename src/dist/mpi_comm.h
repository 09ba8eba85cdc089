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
// are missing. A process that uses MPI from several threads must serialize its calls (one at a
// time); DistExecutor does.
//
// Without MPI (STRATA_HAVE_MPI == 0) the same header compiles and init() returns an error that
// says how to get MPI.
#pragma once

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
  // Changes the timeout of every group (start-up waits for the slowest rank's load with a longer
  // one).
  void set_timeout(double seconds);
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
  double timeout_ = 30;
  std::unique_ptr<MpiComm> world_, tp_, pp_;
};

}  // namespace strata::dist
