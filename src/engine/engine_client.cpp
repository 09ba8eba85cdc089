#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "core/logging.h"
#include "engine/engine.h"

namespace strata::engine {
namespace {

// A now_seconds() value as a steady_clock time point (for timed waits).
std::chrono::steady_clock::time_point steady_time_point(double seconds) {
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(seconds)));
}

}  // namespace

std::optional<OutputChunk> RequestStream::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !chunks_.empty() || finished_choices_ >= num_choices_; });
  if (chunks_.empty()) return std::nullopt;
  OutputChunk c = std::move(chunks_.front());
  chunks_.pop_front();
  return c;
}

std::vector<OutputChunk> RequestStream::drain(bool* done) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<OutputChunk> out(std::make_move_iterator(chunks_.begin()),
                               std::make_move_iterator(chunks_.end()));
  chunks_.clear();
  *done = finished_choices_ >= num_choices_;
  return out;
}

void RequestStream::set_notify(std::function<void()> notify) {
  bool pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    notify_ = std::move(notify);
    pending = !chunks_.empty() || finished_choices_ >= num_choices_;
  }
  if (pending && notify_) notify_();
}

void RequestStream::push(OutputChunk chunk) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (chunk.finished) ++finished_choices_;
    chunks_.push_back(std::move(chunk));
    notify = notify_;
  }
  cv_.notify_all();
  if (notify) notify();
}

Result<std::unique_ptr<EngineClient>> EngineClient::create(const EngineConfig& config) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::create(config));
  return start(std::move(engine));
}

std::unique_ptr<EngineClient> EngineClient::start(std::unique_ptr<Engine> engine) {
  std::unique_ptr<EngineClient> c(new EngineClient());
  c->engine_ = std::move(engine);
  c->info_ = c->engine_->info();
  c->stats_ = c->engine_->stats();
  c->thread_ = std::thread([p = c.get()] { p->loop(); });
  return c;
}

EngineClient::~EngineClient() {
  shutdown(0, unavailable("the engine is shutting down"));
}

Result<std::shared_ptr<RequestStream>> EngineClient::submit(EngineRequest request,
                                                            std::string* bad_field) {
  STRATA_RETURN_IF_ERROR(engine_->validate(request, bad_field));
  if (bad_field != nullptr) bad_field->clear();
  if (request.arrival_time < 0) request.arrival_time = now_seconds();
  auto stream = std::make_shared<RequestStream>(request.request_id, request.params.n);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) return unavailable("the server is shutting down");
    pending_.push_back({std::move(request), stream});
    unfinished_++;
  }
  cv_.notify_one();
  return stream;
}

void EngineClient::abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborts_.push_back(request_id);
  }
  cv_.notify_one();
}

void EngineClient::pause(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pauses_.emplace_back(request_id, true);
  }
  cv_.notify_one();
}

void EngineClient::resume(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pauses_.emplace_back(request_id, false);
  }
  cv_.notify_one();
}

EngineStats EngineClient::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status EngineClient::health() const {
  return engine_->executor().health();
}

void EngineClient::set_step_limit(int64_t max_steps) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    step_limit_ = max_steps;
  }
  cv_.notify_one();
}

void EngineClient::shutdown(double grace_seconds, const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    accepting_ = false;
    stopping_ = true;
    drain_deadline_ = now_seconds() + grace_seconds;
    stop_reason_ = why;
  }
  cv_.notify_one();
  thread_.join();
}

void EngineClient::loop() {
  for (;;) {
    std::vector<Pending> pending;
    std::vector<std::string> aborts;
    std::vector<std::pair<std::string, bool>> pauses;
    bool stop_now = false;
    bool below_limit = true;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto has_input = [&] { return !pending_.empty() || !aborts_.empty() || !pauses_.empty(); };
      // A step may run when a request is runnable (paused ones are not work) unless the test
      // hook holds the engine at its step limit.
      auto may_step = [&] {
        return engine_->has_runnable_requests() &&
               (step_limit_ < 0 || steps_run_.load() < step_limit_);
      };
      auto ready = [&] {
        return has_input() || may_step() || (stopping_ && !engine_->has_unfinished_requests());
      };
      const double wait_start = engine_->tracing() ? now_seconds() : 0;
      if (stopping_ && engine_->has_unfinished_requests()) {
        // Draining: wake at the deadline even when nothing else happens (held or paused
        // requests are aborted then).
        cv_.wait_until(lock, steady_time_point(drain_deadline_), ready);
      } else if (!stopping_) {
        cv_.wait(lock, [&] { return ready() || stopping_; });
      }
      if (engine_->tracing()) engine_->add_trace_wait(now_seconds() - wait_start);
      pending.swap(pending_);
      aborts.swap(aborts_);
      pauses.swap(pauses_);
      below_limit = step_limit_ < 0 || steps_run_.load() < step_limit_;
      if (stopping_ && (now_seconds() >= drain_deadline_ ||
                        (!engine_->has_unfinished_requests() && pending.empty())))
        stop_now = true;
    }
    for (auto& p : pending) {
      std::string id = p.request.request_id;
      auto stream = p.stream;
      Status s = engine_->add_request(std::move(p.request), stream);
      if (!s.ok()) {
        // Rejected by the scheduler (duplicate id, ...): finish every choice with the error.
        for (int i = 0; i < stream->num_choices(); ++i) {
          OutputChunk c;
          c.index = i;
          c.finished = true;
          c.finish_reason = "abort";
          c.error = s;
          c.time = now_seconds();
          stream->push(std::move(c));
        }
      }
    }
    for (const auto& id : aborts) engine_->abort_request(id);
    for (const auto& [id, paused] : pauses) {
      if (paused)
        engine_->pause_request(id);
      else
        engine_->resume_request(id);
    }
    if (stop_now) {
      engine_->abort_all(stop_reason_);
      engine_->flush_trace();
      std::lock_guard<std::mutex> lock(mu_);
      stats_ = engine_->stats();
      unfinished_ = 0;
      return;
    }
    if (engine_->has_runnable_requests() && below_limit) {
      Status s = engine_->step();
      steps_run_++;
      if (!s.ok()) {
        STRATA_LOG(ERROR) << "engine step failed: " << s.to_string() << "; aborting all requests";
        // The step's own code: a lost rank (kUnavailable) is a 503 to the clients, not a 500.
        engine_->abort_all(
            Status(s.code() == StatusCode::kUnavailable ? s.code() : StatusCode::kInternal,
                   "engine step failed: " + s.message()));
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = engine_->stats();
    unfinished_ = static_cast<int64_t>(pending_.size()) + engine_->num_requests();
  }
}

}  // namespace strata::engine
