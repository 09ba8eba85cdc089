#include "dist/dist_executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/clock.h"
#include "core/logging.h"

namespace strata::dist {
namespace {

using Header = MessageHeader;
constexpr MessageKind kStep = MessageKind::kStep, kHeartbeat = MessageKind::kHeartbeat,
                      kShutdown = MessageKind::kShutdown, kSubmit = MessageKind::kSubmit,
                      kComplete = MessageKind::kComplete;

struct Reply {
  int32_t code = 0;  // StatusCode; 0: ok
  int32_t length = 0;
  char message[504] = {};
};
static_assert(sizeof(Reply) == 512);

Reply make_reply(const Status& s) {
  Reply r;
  r.code = static_cast<int32_t>(s.code());
  const std::string& m = s.message();
  r.length = static_cast<int32_t>(std::min(m.size(), sizeof(r.message)));
  std::memcpy(r.message, m.data(), r.length);
  return r;
}

std::string bytes_text(int64_t b) {
  std::ostringstream o;
  o.precision(3);
  if (b >= (int64_t{1} << 30))
    o << b / double(int64_t{1} << 30) << " GiB";
  else if (b >= (1 << 20))
    o << b / double(1 << 20) << " MiB";
  else
    o << b / 1024.0 << " KiB";
  return o.str();
}

}  // namespace

Result<int> pp_max_in_flight_from_env(int fallback) {
  const char* v = std::getenv("STRATA_PP_MAX_INFLIGHT");
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 1 || n > 64)
    return invalid_argument(std::string("STRATA_PP_MAX_INFLIGHT=") + v +
                            ": expected the number of micro-batches kept in flight under pipeline "
                            "parallelism, 1 (no overlap) to 64");
  return static_cast<int>(n);
}

Result<std::vector<RankReport>> exchange_reports(Comm& world, const RankReport& mine) {
  std::vector<RankReport> all(world.size());
  STRATA_RETURN_IF_ERROR(world.all_gather(&mine, sizeof(RankReport), all.data()));
  return all;
}

std::string format_world_table(const Comm& world, const std::vector<RankReport>& reports) {
  std::ostringstream o;
  o << "world: " << reports.size() << " ranks\n";
  for (size_t r = 0; r < reports.size(); ++r) {
    const RankReport& p = reports[r];
    o << "  " << world.describe_rank(static_cast<int>(r));
    o << ", interface " << (p.interface[0] != '\0' ? std::string(p.interface) : "?");
    o << ", layers " << p.first_layer << ".." << p.end_layer - 1 << " ("
      << p.end_layer - p.first_layer << ")";
    if (p.end_expert > p.first_expert)
      o << ", experts " << p.first_expert << ".." << p.end_expert - 1 << " ("
        << p.end_expert - p.first_expert << ")";
    o << ", " << p.threads << " threads, weights " << bytes_text(p.weight_bytes) << " ("
      << p.weight_bytes << " bytes), KV pool " << p.num_blocks << " blocks";
    if (r + 1 < reports.size()) o << "\n";
  }
  return o.str();
}

Result<std::unique_ptr<DistExecutor>> DistExecutor::create(Comm* world,
                                                           std::unique_ptr<engine::Worker> worker,
                                                           std::vector<RankReport> reports,
                                                           DistExecutorOptions options) {
  if (world->rank() != 0) return invalid_argument("DistExecutor runs on rank 0 only");
  if (static_cast<int>(reports.size()) != world->size())
    return invalid_argument("DistExecutor: one report per rank expected");
  std::unique_ptr<DistExecutor> e(new DistExecutor());
  e->world_ = world;
  e->worker_ = std::move(worker);
  e->reports_ = std::move(reports);
  e->options_ = options;
  e->info_ = e->worker_->info();
  for (const RankReport& r : e->reports_)
    e->info_.memory.num_blocks = std::min(e->info_.memory.num_blocks, r.num_blocks);
  // Per-sequence state slots: every rank keeps every sequence's state (DeepSeek-V4 under tensor
  // parallelism), so the scheduler gets the fewest running and snapshot slots of any rank.
  engine::MemoryPlan& m = e->info_.memory;
  if (m.num_state_slots > 0) {
    int64_t running = m.num_state_slots - m.num_snapshot_slots, snapshots = m.num_snapshot_slots;
    for (const RankReport& r : e->reports_) {
      if (r.state_slots <= 0) continue;  // a report without them (tests, older ranks)
      running = std::min<int64_t>(running, r.state_slots - r.snapshot_slots);
      snapshots = std::min<int64_t>(snapshots, r.snapshot_slots);
    }
    m.num_state_slots = running + snapshots;
    m.num_snapshot_slots = snapshots;
    if (m.max_running_seqs > 0) m.max_running_seqs = std::min(m.max_running_seqs, running);
  }
  // Pipeline overlap: rank 0 is on the first stage; it can split steps when its worker can.
  const ModelParallel& par = e->worker_->parallel();
  if (world->size() > 1 && e->worker_->can_overlap()) {
    int n = options.max_in_flight;
    if (n <= 0) {
      STRATA_ASSIGN_OR_RETURN(n, pp_max_in_flight_from_env(par.pp_size));
    }
    e->max_in_flight_ = std::max(1, n);
  }
  for (int r = 1; r < world->size(); ++r) {
    e->others_.push_back(r);
    if (r / std::max(1, par.tp_size) < par.pp_size - 1) e->split_ranks_.push_back(r);
  }
  e->last_contact_ = now_seconds();
  if (world->size() > 1) e->heartbeat_ = std::thread([p = e.get()] { p->heartbeat_loop(); });
  return e;
}

DistExecutor::~DistExecutor() {
  // Steps still in flight are completed (their outputs dropped), so every rank ends in step.
  while (in_flight_.load() > 0 && health().ok()) {
    engine::StepOutput dropped;
    (void)complete(&dropped);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (!health().ok() || world_->size() == 1) return;
  std::lock_guard<std::mutex> lock(mu_);
  Header h;
  h.kind = kShutdown;
  for (int r = 1; r < world_->size(); ++r) {
    Status s = world_->send(r, &h, sizeof(h));
    if (!s.ok()) {
      STRATA_LOG(WARNING) << "could not tell " << world_->describe_rank(r)
                          << " to stop: " << s.message();
      break;
    }
  }
}

Status DistExecutor::health() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return failed_;
}

void DistExecutor::set_failure_callback(std::function<void(const Status&)> callback) {
  std::lock_guard<std::mutex> lock(state_mu_);
  callback_ = std::move(callback);
}

void DistExecutor::fail(const Status& why) {
  std::function<void(const Status&)> callback;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (!failed_.ok()) return;
    failed_ = why;
    callback = callback_;
  }
  STRATA_LOG(ERROR) << "the group of " << world_->size() << " ranks failed: " << why.message();
  if (callback) callback(why);
}

Status DistExecutor::round_trip(MessageKind kind, const std::string& payload,
                                const std::function<Status()>& own) {
  STRATA_RETURN_IF_ERROR(health());
  const int n = world_->size();
  Header h;
  h.kind = kind;
  h.bytes = payload.size();
  for (int r = 1; r < n; ++r) {
    Status s = world_->send(r, &h, sizeof(h));
    if (s.ok() && !payload.empty()) s = world_->send(r, payload.data(), payload.size());
    if (!s.ok()) {
      fail(s);
      return s;
    }
  }
  return collect_replies(own ? own() : ok_status());
}

Status DistExecutor::send_to(const std::vector<int>& ranks, MessageKind kind,
                             const std::string& payload) {
  Header h;
  h.kind = kind;
  h.bytes = payload.size();
  for (int r : ranks) {
    Status s = world_->send_async(r, &h, sizeof(h));
    if (s.ok() && !payload.empty()) s = world_->send_async(r, payload.data(), payload.size());
    if (!s.ok()) {
      fail(s);
      return s;
    }
  }
  return ok_status();
}

Status DistExecutor::collect_replies(const Status& mine) {
  const int n = world_->size();
  // This rank's own step lost a peer (a group's call timed out or failed): that is the failure,
  // now; waiting for the replies would add another timeout before /health turns 503.
  if (mine.code() == StatusCode::kUnavailable) {
    fail(mine);
    return mine;
  }
  // Every rank ran the same step on the same state: they agree (all ok, or all the same error,
  // such as a batch over the workspace). Anything else leaves the ranks out of step: fatal.
  bool differ = false;
  std::string first_other;
  for (int r = 1; r < n; ++r) {
    Reply reply;
    Status s = world_->recv(r, &reply, sizeof(reply));
    if (!s.ok()) {
      fail(s);
      return s;
    }
    const std::string msg(reply.message, std::clamp<int32_t>(reply.length, 0, 504));
    if (reply.code != static_cast<int32_t>(mine.code()) ||
        (reply.code != 0 && msg != mine.message())) {
      differ = true;
      if (first_other.empty())
        first_other = world_->describe_rank(r) + ": " + (reply.code == 0 ? "ok" : msg);
    }
  }
  last_contact_ = now_seconds();
  if (differ) {
    Status s =
        internal_error("the ranks disagree on a step (rank 0: " +
                       (mine.ok() ? std::string("ok") : mine.message()) + "; " + first_other + ")");
    fail(s);
    return s;
  }
  return mine;
}

Status DistExecutor::execute(const engine::StepInput& input, engine::StepOutput* output) {
  std::lock_guard<std::mutex> lock(mu_);
  if (world_->size() == 1) return worker_->execute(input, output);
  encoded_ = engine::encode_step_input(input);
  return round_trip(kStep, encoded_, [&] { return worker_->execute(input, output); });
}

Status DistExecutor::submit(const engine::StepInput& input) {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_in_flight_ <= 1) return internal_error("DistExecutor::submit: steps run whole here");
  STRATA_RETURN_IF_ERROR(health());
  encoded_ = engine::encode_step_input(input);
  STRATA_RETURN_IF_ERROR(send_to(others_, kSubmit, encoded_));
  ++in_flight_;
  // Errors of the step itself come back from complete() (every rank reports one then).
  const Status mine = worker_->submit(input);
  if (mine.code() == StatusCode::kUnavailable) fail(mine);
  return mine.code() == StatusCode::kUnavailable ? mine : ok_status();
}

Status DistExecutor::complete(engine::StepOutput* output) {
  std::lock_guard<std::mutex> lock(mu_);
  if (in_flight_.load() == 0) return internal_error("DistExecutor::complete: no step in flight");
  --in_flight_;
  STRATA_RETURN_IF_ERROR(health());
  STRATA_RETURN_IF_ERROR(send_to(split_ranks_, kComplete, std::string()));
  return collect_replies(worker_->complete(output));
}

void DistExecutor::heartbeat_loop() {
  const auto interval = std::chrono::duration<double>(options_.heartbeat_seconds);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, interval, [&] { return stop_; });
    if (stop_) break;
    if (!health().ok()) break;
    if (in_flight_.load() > 0) continue;  // the steps in flight will answer
    if (now_seconds() - last_contact_ < options_.heartbeat_seconds) continue;
    (void)round_trip(kHeartbeat, std::string(), nullptr);
  }
}

Status run_worker_loop(Comm& world, engine::Worker& worker) {
  std::string payload;
  engine::StepOutput output;
  for (;;) {
    Header h;
    Status s = world.recv(0, &h, sizeof(h));
    if (!s.ok()) return s.with_context("waiting for the next step");
    payload.resize(h.bytes);
    if (h.bytes > 0) STRATA_RETURN_IF_ERROR(world.recv(0, payload.data(), payload.size()));
    if (h.kind == kShutdown) return ok_status();
    Status result;
    if (h.kind == kSubmit && worker.can_overlap()) {  // the reply comes with kComplete
      auto input = engine::decode_step_input(payload);
      if (!input.ok()) return input.status().with_context("a step from rank 0");
      (void)worker.submit(*input);  // its errors come back from complete()
      continue;
    }
    if (h.kind == kStep || h.kind == kSubmit) {
      auto input = engine::decode_step_input(payload);
      result = input.ok() ? worker.execute(*input, &output) : input.status();
    } else if (h.kind == kComplete) {
      result = worker.complete(&output);
    } else if (h.kind != kHeartbeat) {
      result = internal_error("unknown message kind " +
                              std::to_string(static_cast<uint32_t>(h.kind)) + " from rank 0");
    }
    Reply reply = make_reply(result);
    STRATA_RETURN_IF_ERROR(world.send(0, &reply, sizeof(reply)));
  }
}

}  // namespace strata::dist
