// Options of `strata serve` beyond the engine's (vLLM's names), and the flags accepted only for
// compatibility with vLLM command lines (they log a one-line warning and change nothing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/status.h"

namespace strata::server {

struct ServerConfig {
  std::string host = "0.0.0.0";
  int port = 8000;  // 0 picks a free port
  // Names clients may use in "model"; the first one is reported in responses. Empty: the model
  // path as given on the command line.
  std::vector<std::string> served_model_names;
  std::string model_path;     // the MODEL argument (reported as "root" by /v1/models)
  std::string api_key;        // empty: no authentication
  std::string chat_template;  // file or inline template; empty: the model's
  // --chat-template-content-format: auto (detected from the template), string or openai.
  std::string chat_template_content_format = "auto";
  // --tokenizer-mode: "auto" (also for hf/slow) or "deepseek_v4" (chat prompts from the
  // DeepSeek-V4 encoder, tokenizer/deepseek_v4_encoding.h, instead of a chat template).
  std::string tokenizer_mode = "auto";
  std::string response_role = "assistant";
  int64_t max_log_len = -1;        // prompt characters / ids in request logs; < 0: all
  double log_stats_interval = 10;  // seconds between stats lines; <= 0: never
  bool log_requests = true;        // one line per finished request
  bool log_stats = true;
  int64_t max_queued_requests = 0;  // waiting requests beyond which new ones get 503; 0: no limit
  // Open connections beyond which new ones get 503 + Retry-After; 0: no limit. Lowered at start
  // to fit the open-file limit.
  int64_t max_connections = 4096;
  double request_timeout = 0;    // seconds a request may run before it is aborted; 0: none
  double shutdown_timeout = 30;  // grace period for in-flight requests on SIGINT/SIGTERM
  int64_t max_request_body_bytes = 32 << 20;
  // Back-pressure: a stream whose connection queues this many unread bytes pauses in the engine
  // (resuming when the client has read three quarters of them); paused for stream_stall_timeout
  // seconds, it is aborted and its connection closed (0: never).
  int64_t stream_buffer_bytes = 1 << 20;
  double stream_stall_timeout = 60;
  int socket_send_buffer = 0;  // SO_SNDBUF of client sockets; 0: the kernel's (no flag: tests)
  bool return_tokens_as_token_ids = false;  // logprob tokens as "token_id:N"
  bool enable_auto_tool_choice = false;     // tool_choice "auto" allowed
  std::string tool_call_parser;             // "" none; else a name from tool_parser_names()
  std::string reasoning_parser;             // "" none; else from reasoning_parser_names()
  bool exclude_tools_when_tool_choice_none = false;
  std::string version;  // reported by GET /version

  // The name reported in responses.
  const std::string& model_name() const {
    return served_model_names.empty() ? model_path : served_model_names.front();
  }
  // True when `name` may be used in a request's "model" field.
  bool serves(const std::string& name) const;
};

// Declares the server options and the compatibility flags (the engine's are added separately with
// engine::add_engine_options).
void add_server_options(OptionSet& options);
// Reads them back; MODEL is positional()[0]. Warnings for accepted-but-ignored values (such as
// --tensor-parallel-size 2) are appended to *warnings.
Result<ServerConfig> server_config_from_args(const Args& args, std::vector<std::string>* warnings);

}  // namespace strata::server
