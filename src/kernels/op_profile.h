// Per-op timing for benchmarks: a KernelOps table that forwards every call to another table and
// adds up, per op, the calls and the wall time they took (and, for matmuls, the weight bytes
// they read), so `strata bench latency --profile` can say where a decode step goes.
//
// The totals are process-wide. Time is measured around each call on the calling thread, so an op
// called from inside another op's parallel region (MoE experts) is also inside that op's time.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace strata {

struct OpTime {
  const char* name;  // "gemv" (matmul with at most 4 rows), "gemm", "attention", ...
  int64_t calls = 0;
  double seconds = 0;
  double weight_bytes = 0;  // matmuls: bytes of weights passed in (each counted once per call)
};

// A table with the name of `inner` that times each call and then runs inner's op. Every call
// returns the same table; the inner table is the one of the latest call.
const KernelOps& profiling_ops(const KernelOps& inner);

// The totals since the last reset, in a fixed order, ops never called included.
std::vector<OpTime> op_times();
void reset_op_times();

}  // namespace strata
