#include "server/generation.h"

#include <algorithm>
#include <cstdio>

#include "core/clock.h"
#include "core/logging.h"

namespace strata::server {
namespace {

// The prompt as a quoted, escaped string cut to `max_chars` code points (< 0: all).
std::string loggable(const std::string& text, int64_t max_chars) {
  std::string out = "'";
  int64_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) {
      if (max_chars >= 0 && chars >= max_chars) {
        out += "...";
        break;
      }
      ++chars;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

}  // namespace

std::string ServerState::new_id(const char* prefix) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx",
                static_cast<unsigned long long>(id_rng.next_u64()),
                static_cast<unsigned long long>(id_rng.next_u64()));
  return std::string(prefix) + buf;
}

Generation::Generation(ServerState* state, GenerationRequest request, net::ResponseWriter writer,
                       double arrival)
    : state_(state), request_(std::move(request)), writer_(std::move(writer)), arrival_(arrival) {
  const bool chat = request_.kind == ApiKind::kChat;
  id_ = state_->new_id(chat ? "chatcmpl-" : "cmpl-");
  ResponseContext ctx;
  ctx.id = id_;
  ctx.created = static_cast<int64_t>(wall_seconds());
  ctx.model = state_->config.model_name();
  ctx.tokenizer = state_->tokenizer;
  ctx.role = state_->config.response_role;
  assembler_ = std::make_unique<ResponseAssembler>(request_, std::move(ctx));
  const size_t num_choices = request_.prompts.size() * static_cast<size_t>(request_.params.n);
  timing_.resize(num_choices);
  finish_reasons_.resize(num_choices);
}

Generation::~Generation() = default;

void Generation::start(ServerState* state, GenerationRequest request, net::ResponseWriter writer,
                       double arrival) {
  std::shared_ptr<Generation> g(
      new Generation(state, std::move(request), std::move(writer), arrival));
  if (!g->submit()) return;
  state->live[g.get()] = g;
  std::weak_ptr<Generation> weak = g;
  g->writer_.on_disconnect([weak] {
    if (auto self = weak.lock()) self->on_disconnect();
  });
  if (state->config.request_timeout > 0) {
    g->timeout_timer_ = state->loop->run_after(state->config.request_timeout, [weak] {
      if (auto self = weak.lock()) self->on_timeout();
    });
  }
  if (g->request_.stream) {
    g->writer_.on_drain([weak] {
      if (auto self = weak.lock()) self->resume();
    });
    g->writer_.start_stream(200, net::sse_headers());
    g->writer_.write(g->assembler_->stream_begin());
  }
  // Chunks may already be waiting; set_notify runs the callback at once when they are.
  std::shared_ptr<std::atomic<bool>> flag = g->pump_scheduled_;
  net::EventLoop* loop = state->loop;
  for (auto& s : g->streams_) {
    s->set_notify([weak, flag, loop] {
      if (flag->exchange(true)) return;
      loop->post([weak, flag] {
        flag->store(false);
        if (auto self = weak.lock()) self->pump();
      });
    });
  }
}

bool Generation::submit() {
  const sampling::SamplingParams& p = request_.params;
  for (size_t i = 0; i < request_.prompts.size(); ++i) {
    engine::EngineRequest er;
    er.request_id = id_;
    if (request_.prompts.size() > 1) er.request_id.append("-").append(std::to_string(i));
    er.prompt_token_ids = request_.prompts[i].token_ids;
    er.params = p;
    er.priority = request_.priority;
    er.cache_salt = request_.cache_salt;
    er.arrival_time = arrival_;
    er.constraint = request_.constraint;
    const std::string engine_id = er.request_id;
    std::string param;  // the field at fault, as the engine names it
    auto stream = state_->engine->submit(std::move(er), &param);
    if (!stream.ok()) {
      abort_engine();
      const Status& s = stream.status();
      // Chat requests have no prompt or logprobs count of their own: name what they sent.
      if (request_.kind == ApiKind::kChat) {
        if (param == "prompt") param = "messages";
        if (param == "logprobs") param = "top_logprobs";
      }
      ApiError e = api_error_from_status(s, param);
      if (e.status == 503) state_->metrics.count_rejected("shutting_down");
      writer_.send(error_response(e));
      responded_ = true;
      return false;
    }
    engine_ids_.push_back(engine_id);
    streams_.push_back(*stream);
    stream_done_.push_back(false);
  }
  return true;
}

void Generation::abort_engine() {
  for (const auto& id : engine_ids_) state_->engine->abort(id);
}

void Generation::on_disconnect() {
  if (finished_ || disconnected_) return;
  disconnected_ = true;
  responded_ = true;
  set_paused(false);
  abort_engine();
  pump();  // what is waiting is counted, not sent
}

// True while a stream's output must wait: its connection already queues (with `pending_bytes`
// about to be written) --stream-buffer-size bytes or more.
bool Generation::holding_back(size_t pending_bytes) const {
  return request_.stream && !responded_ &&
         writer_.buffered_bytes() + pending_bytes >=
             static_cast<size_t>(state_->config.stream_buffer_bytes);
}

void Generation::set_paused(bool paused) {
  if (paused == paused_) return;
  paused_ = paused;
  state_->streams_paused += paused ? 1 : -1;
  if (!paused && stall_timer_ != 0) {
    state_->loop->cancel(stall_timer_);
    stall_timer_ = 0;
  }
}

void Generation::pause() {
  if (paused_ || finished_ || responded_) return;
  set_paused(true);
  for (const auto& id : engine_ids_) state_->engine->pause(id);
  if (state_->config.stream_stall_timeout > 0) {
    std::weak_ptr<Generation> weak = weak_from_this();
    stall_timer_ = state_->loop->run_after(state_->config.stream_stall_timeout, [weak] {
      if (auto self = weak.lock()) {
        self->stall_timer_ = 0;
        self->on_stall();
      }
    });
  }
}

void Generation::resume() {
  if (!paused_) return;
  set_paused(false);
  for (const auto& id : engine_ids_) state_->engine->resume(id);
  pump();  // what waited goes out first (and may pause the stream again)
}

// The client has read nothing for --stream-stall-timeout seconds: give its KV back and close.
// There is no point in an error event: it would wait behind what the client does not read.
void Generation::on_stall() {
  if (!paused_ || finished_) return;
  STRATA_LOG(WARNING) << "Request " << id_ << ": the client read nothing for "
                      << state_->config.stream_stall_timeout << " s (--stream-stall-timeout) with "
                      << writer_.buffered_bytes()
                      << " bytes waiting; aborting it and closing the connection";
  state_->metrics.count_stream_stalled();
  set_paused(false);
  disconnected_ = true;
  responded_ = true;
  abort_engine();
  writer_.abort();
  pump();
}

void Generation::on_timeout() {
  timeout_timer_ = 0;
  if (finished_ || responded_) return;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", state_->config.request_timeout);
  fail(
      {408,
       "the request ran longer than --request-timeout (" + std::string(buf) + " s) and was aborted",
       ""});
}

void Generation::fail(const ApiError& error) {
  set_paused(false);
  abort_engine();
  if (responded_) return;
  responded_ = true;
  if (request_.stream) {
    writer_.write(ResponseAssembler::stream_error(error));
    writer_.end_stream();
  } else {
    writer_.send(error_response(error));
  }
}

void Generation::pump() {
  if (finished_) return;
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (stream_done_[i]) continue;
    bool done = false;
    for (auto& c : streams_[i]->drain(&done))
      backlog_.emplace_back(static_cast<int>(i), std::move(c));
    if (done) stream_done_[i] = true;
  }
  // Stream output goes out while the connection has room; the rest waits in backlog_ and the
  // engine pauses the request until on_drain.
  for (;;) {
    std::string out;
    while (!backlog_.empty() && !holding_back(out.size())) {
      auto [index, chunk] = std::move(backlog_.front());
      backlog_.pop_front();
      handle_chunk(index, chunk, &out);
    }
    if (!out.empty() && !responded_) writer_.write(std::move(out));
    if (!request_.stream || responded_) break;
    if (!writer_.writable()) {
      pause();
      return;
    }
    if (backlog_.empty()) break;
  }
  if (backlog_.empty() &&
      std::all_of(stream_done_.begin(), stream_done_.end(), [](bool d) { return d; }))
    complete();
}

void Generation::handle_chunk(int prompt_index, engine::OutputChunk& chunk, std::string* out) {
  const int idx = prompt_index * request_.params.n + chunk.index;
  ChoiceTiming& t = timing_[idx];
  if (!chunk.token_ids.empty()) {
    if (t.first_token < 0) {
      t.first_token = chunk.time;
      state_->metrics.observe_ttft(chunk.time - arrival_);
    } else {
      state_->metrics.observe_inter_token_latency(chunk.time - t.last_token);
    }
    t.last_token = chunk.time;
  }
  if (chunk.finished) finish_reasons_[idx] = chunk.finish_reason;
  if (!chunk.error.ok()) {
    if (!responded_) {
      ApiError e = api_error_from_status(chunk.error);
      if (e.status == 503)
        e.message += " (the request was aborted after " + std::to_string(chunk.num_output_tokens) +
                     " generated tokens)";
      if (request_.stream && !out->empty()) {
        writer_.write(std::move(*out));
        out->clear();
      }
      fail(e);
    }
    return;
  }
  if (chunk.finished && chunk.finish_reason != "abort") {
    FinishedSequence s;
    s.finish_reason = chunk.finish_reason;
    s.e2e = chunk.time - arrival_;
    const engine::RequestTimes& rt = chunk.times;
    if (rt.first_scheduled >= 0) s.queue = std::max(0.0, rt.first_scheduled - rt.arrival);
    if (rt.first_token >= 0 && rt.first_scheduled >= 0) {
      s.prefill = rt.first_token - rt.first_scheduled;
      s.decode = rt.last_token - rt.first_token;
      s.inference = rt.last_token - rt.first_scheduled;
      if (chunk.num_output_tokens > 1)
        s.tpot = s.decode / static_cast<double>(chunk.num_output_tokens - 1);
    }
    s.prompt_tokens = chunk.num_prompt_tokens;
    s.generation_tokens = chunk.num_output_tokens;
    s.max_tokens_param = request_.params.max_tokens.value_or(0);
    s.n = request_.params.n;
    state_->metrics.observe_finished(s);
  }
  if (responded_) return;
  if (request_.stream)
    *out += assembler_->stream_chunk(prompt_index, chunk);
  else
    assembler_->add(prompt_index, chunk);
}

void Generation::complete() {
  if (finished_) return;
  finished_ = true;
  set_paused(false);
  if (timeout_timer_ != 0) state_->loop->cancel(timeout_timer_);
  timeout_timer_ = 0;
  if (!responded_) {
    responded_ = true;
    if (request_.stream) {
      writer_.write(assembler_->stream_end());
      writer_.end_stream();
    } else {
      writer_.send(net::HttpResponse::json(200, assembler_->final_body()));
    }
  }
  if (state_->config.log_requests) log_request();
  state_->live.erase(this);  // may destroy *this: nothing after this line
}

void Generation::log_request() const {
  double ttft = -1;
  for (const auto& t : timing_)
    if (t.first_token >= 0 && (ttft < 0 || t.first_token - arrival_ < ttft))
      ttft = t.first_token - arrival_;
  std::vector<std::string> reasons;
  for (const auto& r : finish_reasons_)
    if (std::find(reasons.begin(), reasons.end(), r) == reasons.end()) reasons.push_back(r);
  std::string reason;
  for (const auto& r : reasons) {
    if (!reason.empty()) reason += ',';
    reason += r;
  }
  if (disconnected_) reason += " (client disconnected)";
  std::string prompt = request_.prompts.empty() ? "" : request_.prompts.front().text;
  char times[96];
  if (ttft >= 0)
    std::snprintf(times, sizeof(times), "ttft: %.3f s, total: %.3f s", ttft,
                  now_seconds() - arrival_);
  else
    std::snprintf(times, sizeof(times), "ttft: n/a, total: %.3f s", now_seconds() - arrival_);
  STRATA_LOG(INFO) << "Finished request " << id_
                   << ": prompt: " << loggable(prompt, state_->config.max_log_len)
                   << (request_.prompts.size() > 1
                           ? " (+" + std::to_string(request_.prompts.size() - 1) + " prompts)"
                           : "")
                   << ", prompt_tokens: " << assembler_->prompt_tokens()
                   << ", output_tokens: " << assembler_->completion_tokens() << ", " << times
                   << ", finish_reason: " << reason;
}

}  // namespace strata::server
