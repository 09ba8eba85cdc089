// The executor of a multi-rank deployment (DESIGN.md section 8): rank 0's engine calls
// DistExecutor::execute(), which sends the encoded step (engine/step_io.h) to every other rank,
// runs rank 0's own Worker and waits for every rank's verdict; ranks > 0 sit in run_worker_loop(),
// running each step they receive on their Worker until rank 0 says stop. Every rank's Worker
// samples the same tokens (tensor parallelism ends each forward with the full logits on every
// rank, pipeline parallelism broadcasts them from the last stage), so rank 0's output is the
// step's output and the workers' request states stay in step.
//
// Liveness: while no step runs, rank 0 sends a heartbeat round trip every few seconds, so a rank
// that died or hangs is noticed within the group's timeout even with no traffic, and the ranks
// > 0 notice a dead rank 0 the same way (no message within the timeout). A failure of the group
// is final: health() returns it from then on, execute() fails with it, and the failure callback
// runs once (the server turns unhealthy and exits). Messages name the rank and its host.
//
// Wire format (over Comm::send/recv of the world group, rank 0 to each rank): a 16-byte header
// {kind, payload bytes}, the payload (a step's encoded StepInput), then each rank's 512-byte reply
// {status code, message}. Grammar-constrained requests are refused at validation
// (supports_constraints() is false): their compiled grammar is not part of the encoding.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "engine/executor.h"
#include "engine/worker.h"

namespace strata::dist {

// The header's kind (the wire format above).
// kStep: run the step whole and reply. kSubmit (pipeline overlap): a rank of a stage before the
// last runs Worker::submit() and does not reply; a rank of the last stage runs the step whole and
// replies. kComplete: a rank of a stage before the last runs Worker::complete() and replies.
enum class MessageKind : uint32_t {
  kStep = 1,
  kHeartbeat = 2,
  kShutdown = 3,
  kSubmit = 4,
  kComplete = 5
};
struct MessageHeader {
  MessageKind kind = MessageKind::kHeartbeat;
  uint32_t reserved = 0;
  uint64_t bytes = 0;  // payload bytes that follow
};
static_assert(sizeof(MessageHeader) == 16);

// What each rank reports once its Worker is loaded (all-gathered at start; rank 0 prints them).
struct RankReport {
  int64_t num_blocks = 0;    // the Worker's KV pool
  int64_t weight_bytes = 0;  // Model::weight_bytes_total()
  int64_t first_layer = 0, end_layer = 0;
  int64_t first_expert = 0, end_expert = 0;  // routed experts held (expert parallelism); 0, 0: none
  int32_t threads = 0;
  char interface[36] = {};  // the network interface towards rank 0 ("" when unknown)
  // The per-sequence state slots of the rank's memory plan (models with state: DeepSeek-V4),
  // all of them and those for prefix-cache snapshots; 0, 0: none.
  int32_t state_slots = 0, snapshot_slots = 0;
};
static_assert(sizeof(RankReport) == 96);

// Every rank's report, in rank order (collective over `world`).
Result<std::vector<RankReport>> exchange_reports(Comm& world, const RankReport& mine);

// The start-up table: one line per rank (host, interface, layers, experts, threads, weights).
std::string format_world_table(const Comm& world, const std::vector<RankReport>& reports);

struct DistExecutorOptions {
  double heartbeat_seconds = 5;  // idle time after which rank 0 checks on every rank
  // Pipeline overlap: the steps kept in flight under pipeline parallelism. 0: the
  // STRATA_PP_MAX_INFLIGHT environment variable, or else the pipeline's size. 1: no overlap.
  // Steps run whole (1) without pipeline parallelism, with speculative decoding or KV tiers.
  int max_in_flight = 0;
};

// STRATA_PP_MAX_INFLIGHT (an integer >= 1), or `fallback` when unset.
Result<int> pp_max_in_flight_from_env(int fallback);

class DistExecutor final : public engine::Executor {
 public:
  // Rank 0 of `world` (which must outlive the executor), with its own worker and every rank's
  // report (exchange_reports): the scheduler gets the smallest KV pool of all ranks.
  static Result<std::unique_ptr<DistExecutor>> create(Comm* world,
                                                      std::unique_ptr<engine::Worker> worker,
                                                      std::vector<RankReport> reports,
                                                      DistExecutorOptions options = {});
  // Stops the heartbeat and tells every rank to stop (unless the group failed).
  ~DistExecutor() override;

  const engine::WorkerInfo& info() const override { return info_; }
  Status execute(const engine::StepInput& input, engine::StepOutput* output) override;
  int max_concurrent_batches() const override { return max_in_flight_; }
  Status submit(const engine::StepInput& input) override;
  Status complete(engine::StepOutput* output) override;
  int num_in_flight() const override { return in_flight_.load(); }
  kv::KvTiers* kv_tiers() override { return worker_->kv_tiers(); }
  Status health() const override;
  bool supports_constraints() const override { return world_->size() == 1; }

  // Runs once, on the thread that noticed, when the group fails (set before the first step).
  void set_failure_callback(std::function<void(const Status&)> callback);
  engine::Worker& worker() { return *worker_; }
  const std::vector<RankReport>& reports() const { return reports_; }

 private:
  DistExecutor() = default;
  void heartbeat_loop();
  // Sends `kind` (and `payload`) to every other rank, runs `own` (if any) and collects the
  // replies. Called with mu_ held. Group failures go to fail().
  Status round_trip(MessageKind kind, const std::string& payload,
                    const std::function<Status()>& own);
  // Sends `kind` (and `payload`) to `ranks` without waiting for them; failures go to fail().
  Status send_to(const std::vector<int>& ranks, MessageKind kind, const std::string& payload);
  // Collects one reply from every other rank and compares it with this rank's own result.
  Status collect_replies(const Status& mine);
  void fail(const Status& why);

  Comm* world_ = nullptr;
  std::unique_ptr<engine::Worker> worker_;
  std::vector<RankReport> reports_;
  engine::WorkerInfo info_;
  DistExecutorOptions options_;
  std::string encoded_;
  int max_in_flight_ = 1;
  std::vector<int> others_;        // ranks 1 .. n-1
  std::vector<int> split_ranks_;   // ranks > 0 of the stages before the last (they get kComplete)
  std::atomic<int> in_flight_{0};  // steps submitted and not completed

  std::mutex mu_;  // one user of the group at a time (steps, heartbeats); guards the fields below
  std::condition_variable cv_;
  bool stop_ = false;
  double last_contact_ = 0;  // now_seconds() of the last round trip
  std::thread heartbeat_;

  mutable std::mutex state_mu_;  // guards failed_ and callback_ (health() from any thread)
  Status failed_;
  std::function<void(const Status&)> callback_;
};

// Ranks > 0: runs the steps rank 0 sends on `worker` until it says stop (ok) or the group fails
// (the error names the rank that did not answer, usually rank 0).
Status run_worker_loop(Comm& world, engine::Worker& worker);

}  // namespace strata::dist
