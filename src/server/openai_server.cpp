#include "server/openai_server.h"

#include "grammar/vocabulary.h"

#include <algorithm>
#include <thread>

#include "core/clock.h"
#include "core/json.h"
#include "core/logging.h"
#include "core/strings.h"
#include "net/socket.h"
#include "server/generation.h"
#include "server/routes.h"
#include "server/server_state.h"
#include "server/stats_logger.h"
#include "server/work_queue.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {

Result<std::unique_ptr<OpenAiServer>> OpenAiServer::create(ServerConfig config,
                                                           engine::EngineClient* engine,
                                                           net::EventLoop* loop) {
  std::unique_ptr<OpenAiServer> s(new OpenAiServer());
  const engine::EngineInfo& eng = engine->info();
  if (config.model_path.empty()) config.model_path = eng.model_path;
  s->state_ = std::make_unique<ServerState>(std::move(config), eng.max_model_len);
  ServerState& st = *s->state_;
  st.engine = engine;
  st.loop = loop;
  st.tokenizer = eng.tokenizer;
  st.vocab_size = static_cast<int32_t>(eng.vocab_size);
  st.priority_scheduling = eng.priority_scheduling;
  st.id_rng.seed(static_cast<uint64_t>(wall_seconds() * 1e6) ^
                 reinterpret_cast<uintptr_t>(s.get()));
  // Chat template: --chat-template, else the tokenizer's (or model's) own.
  auto tmpl = load_chat_template(eng.tokenizer_path, st.config.chat_template);
  if (tmpl.ok()) {
    st.chat_template = std::make_shared<const ChatTemplate>(std::move(tmpl).value());
  } else if (!st.config.chat_template.empty()) {
    return tmpl.status().with_context("--chat-template");
  } else if (st.config.tokenizer_mode == "deepseek_v4") {
    // No template needed: chat prompts come from the DeepSeek-V4 encoder.
  } else {
    st.parse.chat_template_error =
        "this model has no chat template, so /v1/chat/completions cannot be served; start the "
        "server with --chat-template FILE (" +
        tmpl.status().message() + ")";
    STRATA_LOG(WARNING) << "no chat template: " << tmpl.status().message()
                        << "; chat requests will be refused (use --chat-template)";
  }
  if (st.chat_template && st.config.tokenizer_mode != "deepseek_v4") {
    const std::string& fmt = st.config.chat_template_content_format;
    st.parse.content_format = fmt == "openai"   ? ContentFormat::kOpenAi
                              : fmt == "string" ? ContentFormat::kString
                                                : detect_content_format(st.chat_template->source());
    const char* name = st.parse.content_format == ContentFormat::kOpenAi ? "openai" : "string";
    if (fmt == "auto")
      STRATA_LOG(INFO) << "Chat template content format: '" << name
                       << "' (detected; --chat-template-content-format overrides it)";
  }
  st.parse.deepseek_v4_encoding = st.config.tokenizer_mode == "deepseek_v4";
  if (st.parse.deepseek_v4_encoding)
    STRATA_LOG(INFO) << "Chat prompts: DeepSeek-V4 encoding (--tokenizer-mode deepseek_v4); no "
                        "chat template is used";
  if (st.tokenizer) {
    st.constraints = std::make_unique<ConstraintCompiler>(
        grammar::make_token_vocabulary(*st.tokenizer, eng.vocab_size, eng.eos_token_ids));
    st.parse.constraints = st.constraints.get();
  }
  st.parse.tokenizer = st.tokenizer.get();
  st.parse.chat_template = st.chat_template.get();
  st.parse.defaults = eng.default_sampling_params;
  st.parse.response_role = st.config.response_role;
  st.parse.return_tokens_as_token_ids = st.config.return_tokens_as_token_ids;
  st.parse.enable_auto_tool_choice = st.config.enable_auto_tool_choice;
  st.parse.tool_call_parser = st.config.tool_call_parser;
  st.parse.reasoning_parser = st.config.reasoning_parser;
  st.parse.exclude_tools_when_tool_choice_none = st.config.exclude_tools_when_tool_choice_none;
  if (!st.config.tool_call_parser.empty() || !st.config.reasoning_parser.empty())
    STRATA_LOG(INFO) << "Output parsing: tool-call parser '"
                     << (st.config.tool_call_parser.empty() ? "none" : st.config.tool_call_parser)
                     << "' (tool_choice \"auto\" "
                     << (st.config.enable_auto_tool_choice ? "enabled"
                                                           : "disabled: no "
                                                             "--enable-auto-tool-choice")
                     << "), reasoning parser '"
                     << (st.config.reasoning_parser.empty() ? "none" : st.config.reasoning_parser)
                     << "'";
  st.parse.max_n = static_cast<int>(std::max<int64_t>(1, eng.max_num_seqs));

  net::HttpServerOptions ho;
  ho.host = st.config.host;
  ho.port = st.config.port;
  ho.limits.max_body_bytes = static_cast<size_t>(st.config.max_request_body_bytes);
  ho.write_high_watermark = static_cast<size_t>(st.config.stream_buffer_bytes);
  ho.socket_send_buffer = st.config.socket_send_buffer;
  // Every connection takes a descriptor: keep the cap under the open-file limit (raised to its
  // hard limit first), with room for the model files, the engine and the listening socket.
  ho.max_connections = static_cast<size_t>(st.config.max_connections);
  const uint64_t files = net::raise_open_file_limit();
  constexpr uint64_t kReservedFiles = 64;
  if (files > kReservedFiles &&
      (ho.max_connections == 0 || ho.max_connections > files - kReservedFiles)) {
    ho.max_connections = static_cast<size_t>(files - kReservedFiles);
    STRATA_LOG(WARNING) << "--max-connections " << st.config.max_connections
                        << " does not fit the open-file limit of " << files << "; using "
                        << ho.max_connections << " (raise the limit with `ulimit -n`)";
  }
  // Errors the HTTP layer answers by itself (400, 408, 413, 431, 501, 505) in the same shape.
  ho.error_response = [](int status, const std::string& message) {
    return error_response({status, message, ""});
  };
  s->http_ = std::make_unique<net::HttpServer>(loop, ho);
  st.http = s->http_.get();
  st.alive = s->alive_;
  // Parsing and tokenizing big bodies: a couple of threads (more on big machines), beside the
  // engine's compute threads.
  const int work_threads =
      std::clamp(static_cast<int>(std::thread::hardware_concurrency()) / 8, 2, 4);
  s->work_ = std::make_unique<WorkQueue>(work_threads);
  st.work = s->work_.get();
  OpenAiServer* self = s.get();
  s->http_->set_handler(
      [self](net::HttpRequest req, net::ResponseWriter w) { self->handle(std::move(req), w); });
  return s;
}

OpenAiServer::~OpenAiServer() {
  *alive_ = false;
  work_.reset();  // waits for a parse in progress; its result is then dropped (alive_ expires)
  if (stats_timer_ != 0) state_->loop->cancel(stats_timer_);
  if (engine_stopper_.joinable()) engine_stopper_.join();
  http_.reset();
  // Requests still held (their streams never finished) are dropped with the state.
}

Status OpenAiServer::start() {
  STRATA_RETURN_IF_ERROR(http_->listen());
  const std::string host = state_->config.host.empty() ? "0.0.0.0" : state_->config.host;
  STRATA_LOG(INFO) << "Strata OpenAI-compatible server listening on http://" << host << ":"
                   << http_->port() << " (model '" << state_->config.model_name()
                   << "', max_model_len " << state_->max_model_len << ")";
  STRATA_LOG(INFO) << "Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, "
                      "POST /tokenize, POST /detokenize, GET /health, GET /version, GET /metrics";
  if (state_->config.log_stats) {
    stats_ = std::make_unique<StatsLogger>(state_->engine->stats(), now_seconds());
    schedule_stats();
  }
  return ok_status();
}

int OpenAiServer::port() const {
  return http_->port();
}

void OpenAiServer::schedule_stats() {
  std::weak_ptr<bool> alive = alive_;
  stats_timer_ = state_->loop->run_after(state_->config.log_stats_interval, [this, alive] {
    if (alive.expired()) return;
    stats_timer_ = 0;
    log_stats();
    if (!state_->draining) schedule_stats();
  });
}

void OpenAiServer::log_stats() {
  bool busy = false;
  StatsLine line = stats_->tick(state_->engine->stats(), now_seconds(), &busy);
  if (busy)
    STRATA_LOG(INFO) << format_stats_line(line);
  else
    STRATA_LOG(DEBUG) << format_stats_line(line);
}

void OpenAiServer::shutdown(std::function<void()> done) {
  std::weak_ptr<bool> alive = alive_;
  state_->loop->post([this, alive, done = std::move(done)]() mutable {
    if (alive.expired() || state_->draining) return;
    state_->draining = true;
    const double grace = state_->config.shutdown_timeout;
    STRATA_LOG(INFO) << "Shutting down: no new connections; " << state_->live.size()
                     << " request(s) in flight get up to " << grace << " s to finish";
    // The engine drains (or aborts with an error after the grace period) on its own thread so
    // the loop keeps streaming meanwhile; aborted requests answer with their error.
    engine::EngineClient* engine = state_->engine;
    engine_stopper_ = std::thread(
        [engine, grace] { engine->shutdown(grace, unavailable("the server is shutting down")); });
    http_->shutdown(grace + 5, std::move(done));
  });
}

void OpenAiServer::set_work_hook(std::function<void(bool finished)> hook) {
  state_->work_hook = std::move(hook);
}

void OpenAiServer::handle(net::HttpRequest req, net::ResponseWriter w) {
  Routes routes{state_.get()};
  routes.dispatch(std::move(req), std::move(w), http_ ? http_->num_connections() : 0);
}

}  // namespace strata::server
