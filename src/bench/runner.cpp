#include "bench/runner.h"

#include <deque>
#include <memory>

#include "bench/arrivals.h"
#include "core/clock.h"
#include "net/event_loop.h"
#include "net/http_client.h"
#include "net/sse.h"

namespace strata::bench {

namespace {

constexpr size_t kMaxErrorBody = 2000;

class Runner {
 public:
  Runner(const RunnerOptions& o, const std::vector<std::string>& payloads,
         const std::vector<int64_t>& prompt_lens, Progress* progress, net::EventLoop* loop)
      : o_(o),
        payloads_(payloads),
        loop_(loop),
        client_(loop, client_options()),
        progress_(progress),
        states_(payloads.size()) {
    result_.outputs.resize(payloads.size());
    for (size_t i = 0; i < payloads.size(); ++i) result_.outputs[i].prompt_len = prompt_lens[i];
  }

  RunResult run() {
    size_t n = payloads_.size();
    if (n == 0) return std::move(result_);
    offsets_ = run_arrival_offsets(n, o_.request_rate, o_.burstiness, o_.seed);
    start_ = now_seconds();
    if (progress_) {
      progress_->start(start_);
      schedule_progress();
    }
    schedule_arrivals();
    loop_->run();
    result_.duration_s = now_seconds() - start_;
    if (progress_) progress_->finish(now_seconds());
    return std::move(result_);
  }

 private:
  struct State {
    net::SseParser sse;
    int status = 0;
    std::string error_body;
    std::string stream_error;
    bool got_token = false;
    double last_token = 0;
    double arrival = 0;
  };

  static net::HttpClientOptions client_options() {
    net::HttpClientOptions c;
    c.connect_timeout_s = 30;
    c.user_agent = "strata-bench";
    return c;
  }

  void schedule_progress() {
    loop_->run_after(progress_->tick_interval(), [this] {
      if (done_ == payloads_.size()) return;
      progress_->tick(now_seconds());
      schedule_progress();
    });
  }

  // Arrivals are chained: one timer at a time, each releasing every request now due.
  void schedule_arrivals() {
    double now = now_seconds();
    while (next_arrival_ < payloads_.size() && start_ + offsets_[next_arrival_] <= now) {
      states_[next_arrival_].arrival = now;
      pending_.push_back(next_arrival_++);
    }
    dispatch();
    if (next_arrival_ < payloads_.size()) {
      loop_->run_at(start_ + offsets_[next_arrival_], [this] { schedule_arrivals(); });
    }
  }

  void dispatch() {
    while (!pending_.empty() &&
           (o_.max_concurrency <= 0 || in_flight_ < static_cast<size_t>(o_.max_concurrency))) {
      size_t i = pending_.front();
      pending_.pop_front();
      send(i);
    }
  }

  void send(size_t i) {
    in_flight_++;
    net::ClientRequest req;
    req.method = "POST";
    req.url = o_.api_url;
    req.headers.add("Content-Type", "application/json");
    for (const auto& [k, v] : o_.headers) req.headers.add(k, v);
    req.body = payloads_[i];
    req.timeout_s = o_.request_timeout_s;
    RequestOutput& out = result_.outputs[i];
    out.start_time = now_seconds();
    out.queue_time = out.start_time - states_[i].arrival;
    net::ClientCallbacks cb;
    cb.on_head = [this, i](const net::ClientResponse& head) { states_[i].status = head.status; };
    cb.on_data = [this, i](std::string_view data, double t) { on_data(i, data, t); };
    cb.on_done = [this, i](Status s, net::ClientResponse r) { on_done(i, std::move(s), r); };
    client_.start(std::move(req), std::move(cb));
  }

  void on_data(size_t i, std::string_view data, double t) {
    State& st = states_[i];
    if (st.status != 200) {
      if (st.error_body.size() < kMaxErrorBody) st.error_body.append(data.substr(0, kMaxErrorBody));
      return;
    }
    st.sse.feed(data, [&](const net::SseEvent& ev) { on_event(i, ev, t); });
  }

  void on_event(size_t i, const net::SseEvent& ev, double t) {
    State& st = states_[i];
    RequestOutput& out = result_.outputs[i];
    StreamChunk c = parse_stream_chunk(ev.data, o_.backend);
    if (c.done) return;
    if (!c.error.empty()) {
      if (st.stream_error.empty()) st.stream_error = c.error;
      return;
    }
    if (c.has_choices) {
      if (!st.got_token) {
        st.got_token = true;
        out.ttft = t - out.start_time;
      } else {
        out.itl.push_back(t - st.last_token);
      }
      st.last_token = t;
      out.generated_text += c.text;
      if (progress_) progress_->add_tokens(1);
    }
    if (c.completion_tokens >= 0) {
      out.output_tokens = c.completion_tokens;
      out.output_tokens_from_usage = true;
    }
    if (c.prompt_tokens >= 0) out.prompt_len = c.prompt_tokens;
  }

  void on_done(size_t i, Status s, const net::ClientResponse& r) {
    State& st = states_[i];
    RequestOutput& out = result_.outputs[i];
    if (s.ok() && st.status == 200) {
      st.sse.finish([&](const net::SseEvent& ev) { on_event(i, ev, now_seconds()); });
    }
    if (!s.ok()) {
      out.error = s.message();
    } else if (st.status != 200) {
      std::string body = st.error_body.empty() ? r.body : st.error_body;
      out.error = "HTTP " + std::to_string(st.status) + " " + r.reason +
                  (body.empty() ? "" : ": " + body.substr(0, 500));
    } else if (!st.stream_error.empty()) {
      out.error = st.stream_error;
    } else if (!st.got_token) {
      out.error =
          "the response stream ended without any token chunk (no \"choices\"), so TTFT "
          "cannot be measured; the request counts as failed";
    }
    out.success = out.error.empty();
    if (st.got_token) out.latency = st.last_token - out.start_time;
    if (!out.success) {
      out.itl.clear();
    }
    st.sse.reset();
    st.error_body.clear();
    in_flight_--;
    done_++;
    if (progress_) progress_->request_done(out.success);
    if (done_ == payloads_.size()) {
      loop_->stop();
      return;
    }
    dispatch();
  }

  const RunnerOptions& o_;
  const std::vector<std::string>& payloads_;
  net::EventLoop* loop_;
  net::HttpClient client_;
  Progress* progress_;
  std::vector<State> states_;
  RunResult result_;
  std::vector<double> offsets_;
  double start_ = 0;
  size_t next_arrival_ = 0;
  std::deque<size_t> pending_;
  size_t in_flight_ = 0;
  size_t done_ = 0;
};

}  // namespace

Result<RunResult> run_requests(const RunnerOptions& options,
                               const std::vector<std::string>& payloads,
                               const std::vector<int64_t>& prompt_lens, Progress* progress) {
  if (payloads.size() != prompt_lens.size()) {
    return internal_error("run_requests: payloads and prompt_lens differ in size");
  }
  if (!(options.request_rate > 0)) return invalid_argument("--request-rate must be positive");
  if (!(options.burstiness > 0)) return invalid_argument("--burstiness must be positive");
  auto loop = net::EventLoop::create();
  if (!loop.ok()) return loop.status();
  RunResult result;
  {
    Runner runner(options, payloads, prompt_lens, progress, loop->get());
    result = runner.run();
  }
  return result;
}

}  // namespace strata::bench
