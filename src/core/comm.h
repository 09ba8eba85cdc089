// A group of ranks that exchange bytes: what tensor, pipeline and expert parallelism talk through.
// The model sees only this interface; the MPI implementation lives in dist/ (dist/mpi_comm.h),
// and make_local_group() runs a group as threads of one process (tests, and the same code paths).
//
// Collective calls (all_gather, broadcast, barrier) must be made by every rank of the group in the
// same order; send/recv pair up by (source, destination) in call order. Every call returns an
// error instead of waiting forever when a peer is gone or silent past the group's timeout
// (kUnavailable, naming the rank and its host), so a dead rank stops the server instead of
// hanging it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Where rank r runs ("host" or "host:pid"), for messages.
  virtual std::string describe_rank(int r) const = 0;

  // recv[size() * bytes]: every rank's `bytes` bytes of `send`, in rank order (rank r's at
  // r * bytes). `send` may alias recv + rank() * bytes.
  virtual Status all_gather(const void* send, size_t bytes, void* recv) = 0;
  // root's `bytes` bytes of data to every rank (every rank passes the same `bytes`).
  virtual Status broadcast(void* data, size_t bytes, int root) = 0;
  virtual Status barrier() = 0;
  // Point to point: `bytes` must match on both sides.
  virtual Status send(int dst, const void* data, size_t bytes) = 0;
  virtual Status recv(int src, void* data, size_t bytes) = 0;
  // A send that does not wait for the receiver: the bytes are copied (the caller may reuse
  // `data` at once) and arrive in order with this rank's other sends to `dst`. Pipeline stages
  // send activations and rank 0 sends steps this way, so that a stage can go on with the next
  // micro-batch while the receiver still works on the previous one. An error (a peer gone, or a
  // send still not taken after the group's timeout) is returned by this call or a later call of
  // the group. Default: send() (the local group's send never waits).
  virtual Status send_async(int dst, const void* data, size_t bytes) {
    return send(dst, data, bytes);
  }

  // Seconds this rank has spent inside the calls of this group so far (the transfers and the wait
  // for slower peers): the communication time the step trace reports.
  virtual double busy_seconds() const { return 0; }
};

// Helpers over the interface.
// root's string to every rank (its length first).
Status broadcast_string(Comm& comm, std::string* s, int root);
// Every rank's float rows: `send` [rows, cols] per rank -> recv [size(), rows, cols].
inline Status all_gather_floats(Comm& comm, const float* send, int64_t count, float* recv) {
  return comm.all_gather(send, static_cast<size_t>(count) * sizeof(float), recv);
}

// A group of `n` ranks that live as threads of this process, sharing memory: comms[r] is rank r's
// handle (each used by one thread). For tests of sharded models and executors without MPI.
std::vector<std::unique_ptr<Comm>> make_local_group(int n);

}  // namespace strata
