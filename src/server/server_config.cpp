#include "server/server_config.h"

#include <algorithm>

#include "server/reasoning_parsers.h"
#include "server/tool_parsers.h"

namespace strata::server {
namespace {

const char* kGroup = "Server";
const char* kCompat = "Accepted for compatibility with vLLM";

struct Ignored {
  const char* name;
  bool takes_value;
  const char* reason;
};

// vLLM flags with no meaning on Strata's CPU backend, or for features not built yet. Each is
// accepted and logs one warning line with its reason.
constexpr Ignored kIgnored[] = {
    // Meaningless on a CPU backend (or handled differently here).
    {"trust-remote-code", false, "Strata never runs model code from the checkpoint"},
    {"enforce-eager", false, "there are no CUDA graphs on the CPU backend"},
    {"compilation-config", true, "Strata does not compile the model"},
    {"enable-flashinfer-autotune", false, "there is no FlashInfer on the CPU backend"},
    {"device", true, "Strata always runs on the CPU"},
    {"distributed-executor-backend", true, "Strata runs in one process"},
    {"disable-custom-all-reduce", false, "Strata runs in one process"},
    {"worker-cls", true, "Strata runs in one process"},
    {"max-parallel-loading-workers", true, "weights are memory-mapped"},
    {"download-dir", true, "Strata loads local model directories only"},
    {"revision", true, "Strata loads local model directories only"},
    {"code-revision", true, "Strata loads local model directories only"},
    {"tokenizer-revision", true, "Strata loads local model directories only"},
    {"config-format", true, "config.json (or GGUF metadata) is always read"},
    {"model-impl", true, "Strata has its own model implementations"},
    {"max-seq-len-to-capture", true, "there are no CUDA graphs on the CPU backend"},
    {"cuda-graph-sizes", true, "there are no CUDA graphs on the CPU backend"},
    {"enable-chunked-prefill", false, "chunked prefill is always on"},
    {"uvicorn-log-level", true, "Strata's HTTP server is not uvicorn (see STRATA_LOG_LEVEL)"},
    {"disable-uvicorn-access-log", false, "Strata's HTTP server is not uvicorn"},
    {"disable-frontend-multiprocessing", false, "the HTTP front end is a thread"},
    {"disable-fastapi-docs", false, "there are no FastAPI docs"},
    {"allow-credentials", false, "CORS headers are not sent"},
    {"allowed-origins", true, "CORS headers are not sent"},
    {"allowed-methods", true, "CORS headers are not sent"},
    {"allowed-headers", true, "CORS headers are not sent"},
    {"root-path", true, "routes are served at the root"},
    {"middleware", true, "there is no ASGI middleware"},
    {"block-allocator", true, "Strata has one block allocator"},
    {"prefix-caching-hash-algo", true, "prefix hashes are always collision-resistant (xxh3-128)"},
    {"calculate-kv-scales", false, "fp8 KV scales are computed as blocks are written"},
    {"preemption-mode", true, "preemption is always by recompute"},
    {"num-scheduler-steps", true, "the engine schedules every step"},
    {"async-scheduling", false, "the engine schedules every step"},
    {"scheduler-delay-factor", true, "requests are admitted at once"},
    {"enable-server-load-tracking", false, "not needed: see /metrics"},
    {"enable-prompt-tokens-details", false, "usage reports token totals only"},
    {"disable-async-output-proc", false, "outputs are processed on the engine thread"},
    {"enable-sleep-mode", false, "there is no GPU memory to release"},
    // Features not built yet.
    {"swap-space", true, "CPU swap space for preempted requests is not built yet"},
    {"cpu-offload-gb", true, "weight offloading is not built yet (weights live in RAM)"},
    {"num-gpu-blocks-override", true, "the KV pool size comes from --kv-cache-memory"},
    {"tool-parser-plugin", true,
     "parser plugins are Python modules; use a built-in --tool-call-parser"},
    {"speculative-config", true, "speculative decoding is not built yet"},
    {"guided-decoding-backend", true, "guided decoding is not built yet"},
    {"structured-outputs-config", true, "structured outputs are not built yet"},
    {"enable-lora", false, "LoRA adapters are not built yet"},
    {"lora-modules", true, "LoRA adapters are not built yet"},
    {"max-loras", true, "LoRA adapters are not built yet"},
    {"max-lora-rank", true, "LoRA adapters are not built yet"},
    {"limit-mm-per-prompt", true, "multimodal inputs are not built yet"},
    {"mm-processor-kwargs", true, "multimodal inputs are not built yet"},
    {"disable-mm-preprocessor-cache", false, "multimodal inputs are not built yet"},
    {"kv-transfer-config", true, "KV transfer between instances is not built yet"},
    {"kv-events-config", true, "KV cache events are not built yet"},
    {"otlp-traces-endpoint", true, "tracing is not built yet"},
    {"collect-detailed-traces", true, "tracing is not built yet"},
    {"override-generation-config", true, "use --generation-config none and request fields"},
    {"enable-request-id-headers", false, "request ids are generated by the server"},
    {"api-server-count", true, "one HTTP front end serves every connection"},
};

struct SizeFlag {
  const char* name;
  const char* what;
};
constexpr SizeFlag kParallelSizes[] = {
    {"tensor-parallel-size", "tensor parallelism"},
    {"pipeline-parallel-size", "pipeline parallelism"},
    {"data-parallel-size", "data parallelism"},
};

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

bool ServerConfig::serves(const std::string& name) const {
  if (served_model_names.empty()) return name == model_path;
  return std::find(served_model_names.begin(), served_model_names.end(), name) !=
         served_model_names.end();
}

void add_server_options(OptionSet& o) {
  o.add_string("host", "0.0.0.0", "address to listen on", kGroup);
  o.add_int("port", 8000, "port to listen on (0: a free port, printed at start-up)", kGroup);
  o.add({.name = "served-model-name",
         .help = "name clients use in \"model\" (repeat for aliases; the first is reported); "
                 "default: the MODEL argument",
         .group = kGroup,
         .repeated = true,
         .metavar = "NAME"});
  o.add({.name = "api-key",
         .help = "require \"Authorization: Bearer KEY\" on /v1 routes",
         .group = kGroup,
         .metavar = "KEY"});
  o.add({.name = "chat-template",
         .help = "chat template file, or the template text itself (default: the model's)",
         .group = kGroup,
         .metavar = "FILE"});
  o.add_string("chat-template-content-format", "auto",
               "how message content is given to the template: string (text parts joined into "
               "one string), openai (a list of {type, text} parts), or auto (openai when the "
               "template loops over message content)",
               kGroup);
  o.add_string("tokenizer-mode", "auto",
               "auto, hf or slow: the model's tokenizer and chat template (Strata has one "
               "tokenizer implementation); deepseek_v4: chat prompts from the DeepSeek-V4 "
               "encoder instead of a chat template (DeepSeek-V4 ships none)",
               kGroup);
  o.add_string("response-role", "assistant", "role of the generated chat message", kGroup);
  o.add_int("max-log-len", -1,
            "prompt characters (or token ids) shown in request log lines (-1: all)", kGroup);
  o.add_float("log-stats-interval", 10, "seconds between stats lines while busy (0: never)",
              kGroup);
  o.add_bool("disable-log-stats", false, "no periodic stats lines", kGroup);
  o.add_bool("disable-log-requests", false, "no per-request log lines", kGroup);
  o.add_bool("enable-log-requests", true, "one log line per finished request", kGroup);
  o.add_int("max-queued-requests", 0,
            "waiting requests beyond which new ones get 503 with Retry-After (0: no limit)",
            kGroup);
  o.add_int("max-connections", 4096,
            "open HTTP connections beyond which new ones get 503 with Retry-After (0: no limit; "
            "lowered to fit the open-file limit)",
            kGroup);
  o.add_float("request-timeout", 0,
              "seconds a request may run before it is aborted with an error (0: no limit)", kGroup);
  o.add_float("shutdown-timeout", 30,
              "on SIGINT/SIGTERM, seconds in-flight requests may take to finish before they are "
              "aborted",
              kGroup);
  o.add({.name = "max-request-body-size",
         .default_value = "32MiB",
         .help = "largest request body accepted (413 above it)",
         .group = kGroup,
         .metavar = "BYTES"});
  o.add({.name = "stream-buffer-size",
         .default_value = "1MiB",
         .help = "unread bytes a streaming response may queue in the server; beyond them the "
                 "request pauses (keeping its KV) until the client reads",
         .group = kGroup,
         .metavar = "BYTES"});
  o.add_float("stream-stall-timeout", 60,
              "seconds a stream may stay paused for a client that reads nothing before it is "
              "aborted, its KV freed and its connection closed (0: no limit)",
              kGroup);
  const char* kTools = "Tool calls and reasoning";
  o.add_bool(
      "enable-auto-tool-choice", false,
      "let the model choose its tool calls (tool_choice \"auto\", the default when a request "
      "has tools); needs --tool-call-parser",
      kTools);
  o.add({.name = "tool-call-parser",
         .help = "how tool calls are read from the output: " + join_names(tool_parser_names()),
         .group = kTools,
         .metavar = "NAME"});
  o.add({.name = "reasoning-parser",
         .help = "split the model's reasoning into the message's \"reasoning\" (and "
                 "\"reasoning_content\"): " +
                 join_names(reasoning_parser_names()),
         .group = kTools,
         .metavar = "NAME"});
  o.add_bool("exclude-tools-when-tool-choice-none", false,
             "leave the tools out of the prompt when a request says tool_choice \"none\"", kTools);
  o.add_bool("return-tokens-as-token-ids", false,
             "logprob tokens are \"token_id:N\" instead of text", kGroup);
  for (const auto& s : kParallelSizes)
    o.add_int(s.name, 1,
              std::string(s.what) +
                  " size; Strata runs one process, sizes above 1 are accepted "
                  "with a warning",
              kCompat);
  o.add_ignored("enable-expert-parallel", false, "expert parallelism is not built yet", kCompat);
  for (const auto& f : kIgnored) o.add_ignored(f.name, f.takes_value, f.reason, kCompat);
  o.add({.name = "ssl-keyfile",
         .help = "TLS is not supported: refused (terminate TLS in a reverse proxy)",
         .group = kCompat,
         .metavar = "FILE"});
  o.add({.name = "ssl-certfile",
         .help = "TLS is not supported: refused (terminate TLS in a reverse proxy)",
         .group = kCompat,
         .metavar = "FILE"});
}

Result<ServerConfig> server_config_from_args(const Args& args, std::vector<std::string>* warnings) {
  ServerConfig c;
  if (!args.positional().empty()) c.model_path = args.positional()[0];
  c.host = args.get("host");
  int64_t port = args.get_int("port");
  if (port < 0 || port > 65535)
    return invalid_argument("--port must be in [0, 65535], got " + std::to_string(port));
  c.port = static_cast<int>(port);
  c.served_model_names = args.get_all("served-model-name");
  for (const auto& n : c.served_model_names)
    if (n.empty()) return invalid_argument("--served-model-name cannot be empty");
  c.api_key = args.get("api-key");
  if (c.api_key.empty()) {
    // vLLM's variable, for deployment notes that set it.
    if (const char* env = std::getenv("VLLM_API_KEY"); env != nullptr) c.api_key = env;
  }
  c.chat_template = args.get("chat-template");
  c.chat_template_content_format = args.get("chat-template-content-format");
  const std::string& fmt = c.chat_template_content_format;
  if (fmt != "auto" && fmt != "string" && fmt != "openai")
    return invalid_argument("--chat-template-content-format must be auto, string or openai, got '" +
                            fmt + "'");
  c.tokenizer_mode = args.get("tokenizer-mode");
  if (c.tokenizer_mode != "auto" && c.tokenizer_mode != "hf" && c.tokenizer_mode != "slow" &&
      c.tokenizer_mode != "deepseek_v4") {
    warnings->push_back("--tokenizer-mode " + c.tokenizer_mode +
                        " is accepted but has no effect: Strata's modes are auto (= hf, slow) "
                        "and deepseek_v4; using the model's tokenizer and chat template");
    c.tokenizer_mode = "auto";
  }
  c.response_role = args.get("response-role");
  if (c.response_role.empty()) return invalid_argument("--response-role cannot be empty");
  c.max_log_len = args.get_int("max-log-len");
  c.log_stats_interval = args.get_float("log-stats-interval");
  c.log_stats = !args.get_bool("disable-log-stats") && c.log_stats_interval > 0;
  c.log_requests = !args.get_bool("disable-log-requests") && args.get_bool("enable-log-requests");
  c.max_queued_requests = args.get_int("max-queued-requests");
  if (c.max_queued_requests < 0)
    return invalid_argument("--max-queued-requests must be >= 0 (0: no limit)");
  c.max_connections = args.get_int("max-connections");
  if (c.max_connections < 0)
    return invalid_argument("--max-connections must be >= 0 (0: no limit)");
  c.request_timeout = args.get_float("request-timeout");
  if (c.request_timeout < 0) return invalid_argument("--request-timeout must be >= 0 (0: none)");
  c.shutdown_timeout = args.get_float("shutdown-timeout");
  if (c.shutdown_timeout < 0) return invalid_argument("--shutdown-timeout must be >= 0");
  STRATA_ASSIGN_OR_RETURN(
      c.max_request_body_bytes,
      parse_byte_size(args.get("max-request-body-size"), "--max-request-body-size"));
  if (c.max_request_body_bytes < 1024)
    return invalid_argument("--max-request-body-size must be at least 1KiB");
  STRATA_ASSIGN_OR_RETURN(c.stream_buffer_bytes,
                          parse_byte_size(args.get("stream-buffer-size"), "--stream-buffer-size"));
  if (c.stream_buffer_bytes < 1024)
    return invalid_argument("--stream-buffer-size must be at least 1KiB");
  c.stream_stall_timeout = args.get_float("stream-stall-timeout");
  if (!(c.stream_stall_timeout >= 0))
    return invalid_argument("--stream-stall-timeout must be >= 0 (0: no limit)");
  c.return_tokens_as_token_ids = args.get_bool("return-tokens-as-token-ids");
  c.enable_auto_tool_choice = args.get_bool("enable-auto-tool-choice");
  c.tool_call_parser = args.get("tool-call-parser");
  c.reasoning_parser = args.get("reasoning-parser");
  c.exclude_tools_when_tool_choice_none = args.get_bool("exclude-tools-when-tool-choice-none");
  if (!c.tool_call_parser.empty() && !is_tool_parser_name(c.tool_call_parser))
    return invalid_argument("--tool-call-parser: unknown parser '" + c.tool_call_parser +
                            "'; known parsers: " + join_names(tool_parser_names()));
  if (!c.reasoning_parser.empty() && !is_reasoning_parser_name(c.reasoning_parser))
    return invalid_argument("--reasoning-parser: unknown parser '" + c.reasoning_parser +
                            "'; known parsers: " + join_names(reasoning_parser_names()));
  if (c.enable_auto_tool_choice && c.tool_call_parser.empty())
    return invalid_argument(
        "--enable-auto-tool-choice needs --tool-call-parser NAME to read the tool calls (one of " +
        join_names(tool_parser_names()) + ")");
  for (const auto& s : kParallelSizes) {
    int64_t v = args.get_int(s.name);
    if (v < 1) return invalid_argument("--" + std::string(s.name) + " must be at least 1");
    if (v > 1)
      warnings->push_back("--" + std::string(s.name) + " " + std::to_string(v) +
                          " is accepted but has no effect: " + s.what +
                          " is not built yet; running on one process");
  }
  if (args.is_set("ssl-keyfile") || args.is_set("ssl-certfile"))
    return unimplemented(
        "TLS (--ssl-keyfile/--ssl-certfile) is not supported: serve plain HTTP behind a reverse "
        "proxy that terminates TLS");
  return c;
}

}  // namespace strata::server
