// The Executor runs whole steps for the engine: it takes the step's input (the plan and the new
// requests' data) and returns the sampled tokens and logprobs for every entry. The engine loop
// talks only to the scheduler and its executor; how and where the workers run is the executor's
// business. UniprocExecutor runs one Worker in this process; a multi-process executor (MPI) sends
// the encoded input to a Worker per rank and gathers rank 0's output; tests run two workers on
// halves of a batch.
#pragma once

#include <functional>
#include <memory>

#include "engine/step_io.h"
#include "engine/worker.h"

namespace strata::engine {

class Executor {
 public:
  virtual ~Executor() = default;
  // What the workers decided at start (the smallest KV pool across them).
  virtual const WorkerInfo& info() const = 0;
  // One step. Errors are internal failures (a worker rejected the step).
  virtual Status execute(const StepInput& input, StepOutput* output) = 0;
  // Pipeline parallelism with overlap: how many steps the engine may keep outstanding (1: every
  // step is execute()d whole). Above 1, the engine submit()s up to that many steps, with
  // disjoint requests, before it complete()s the oldest; outputs come back in submission order,
  // and every submitted step is completed (an error ends the engine anyway).
  virtual int max_concurrent_batches() const { return 1; }
  virtual Status submit(const StepInput& /*input*/) {
    return internal_error("this executor runs one step at a time");
  }
  virtual Status complete(StepOutput* /*output*/) {
    return internal_error("this executor runs one step at a time");
  }
  // Steps submitted and not completed yet.
  virtual int num_in_flight() const { return 0; }
  // The KV tiers the scheduler looks blocks up in (rank 0's worker's); nullptr when none.
  virtual kv::KvTiers* kv_tiers() { return nullptr; }
  // Ok while the workers can run steps; an executor whose workers are gone (a dead rank) returns
  // why, for good. Thread-safe: the server's /health calls it.
  virtual Status health() const { return ok_status(); }
  // Whether requests with an output grammar (NewRequestData::constraint) can run: an executor
  // that ships steps to other processes cannot send the compiled grammar yet.
  virtual bool supports_constraints() const { return true; }
};

class UniprocExecutor final : public Executor {
 public:
  static Result<std::unique_ptr<UniprocExecutor>> create(const WorkerConfig& config);
  const WorkerInfo& info() const override { return worker_->info(); }
  Status execute(const StepInput& input, StepOutput* output) override {
    return worker_->execute(input, output);
  }
  kv::KvTiers* kv_tiers() override { return worker_->kv_tiers(); }
  Worker& worker() { return *worker_; }

 private:
  std::unique_ptr<Worker> worker_;
};

// Builds an executor from the worker configuration: the engine's choice of executor (one
// in-process worker today).
using ExecutorFactory = std::function<Result<std::unique_ptr<Executor>>(const WorkerConfig&)>;
ExecutorFactory default_executor_factory();

}  // namespace strata::engine
