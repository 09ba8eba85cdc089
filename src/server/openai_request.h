// Parsing and validation of OpenAI (and vLLM extension) request bodies into plain structs:
// /v1/completions, /v1/chat/completions, /tokenize and /detokenize. Every failure is an ApiError
// whose message says what was wrong and whose `param` names the field. Nothing here throws.
//
// Parsing tokenizes prompts (and renders chat templates), so it needs the tokenizer and template;
// it does not check limits that belong to the engine (prompt length against max_model_len,
// sampling ranges): EngineClient::submit validates those.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sampling/sampling_params.h"
#include "server/api_error.h"

namespace strata {
class Tokenizer;
class ChatTemplate;
}  // namespace strata

namespace strata::grammar {
class CompiledGrammar;
}

namespace strata::server {

class ConstraintCompiler;

// A value or the error to answer with.
template <typename T>
class ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}         // NOLINT(implicit)
  ApiResult(ApiError error) : v_(std::move(error)) {}  // NOLINT(implicit)
  bool ok() const { return std::holds_alternative<T>(v_); }
  T& value() { return std::get<T>(v_); }
  const T& value() const { return std::get<T>(v_); }
  const ApiError& error() const { return std::get<ApiError>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

enum class ApiKind { kCompletion, kChat };

// Caps on request fields, checked before any prompt is tokenized (400 naming the field). The
// fan-out, n x the number of prompts, is capped at ParseContext::max_n.
inline constexpr size_t kMaxStopStrings = 64;
inline constexpr size_t kMaxStopStringBytes = 1024;
inline constexpr size_t kMaxStopTokenIds = 1024;

struct PromptInput {
  std::vector<int32_t> token_ids;  // what the engine runs (BOS etc. applied)
  std::string text;                // the prompt as text (decoded when given as ids)
};

// A constraint on the output (response_format, structured_outputs, guided_*, tool_choice
// required/named), compiled by the server against the vocabulary before submit.
struct StructuredOutput {
  enum class Kind { kNone, kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kNone;
  std::string text;  // kJsonSchema: the schema as JSON text; kRegex: the regex; kGrammar: EBNF
  std::vector<std::string> choices;  // kChoice
  bool strict = false;               // response_format json_schema "strict"
  bool disable_any_whitespace = false;
  bool disable_additional_properties = false;
  std::string param = "response_format";  // the request field it came from (for 400s)
};

// How a chat choice's output is read (tools, tool_choice, --tool-call-parser,
// --reasoning-parser); the response assembler runs the parsers of server/reasoning_parsers.h.
enum class ToolChoice { kNone, kAuto, kRequired, kNamed };
struct ChatOutputOptions {
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_parser;  // kAuto: the --tool-call-parser name ("" when tools are not parsed)
  std::string named_tool;   // kNamed: the function's name
  bool parallel_tool_calls = true;
  std::shared_ptr<const nlohmann::ordered_json> tools;  // the validated `tools` (null: none)
  std::string reasoning_parser;                         // --reasoning-parser ("" none)
  std::optional<bool> thinking;  // chat_template_kwargs thinking / enable_thinking, when set
  // True when the output goes through a parser (otherwise it is plain content).
  bool parsed() const {
    return !reasoning_parser.empty() ||
           (tool_choice == ToolChoice::kAuto && !tool_parser.empty()) ||
           tool_choice == ToolChoice::kRequired || tool_choice == ToolChoice::kNamed;
  }
};

struct GenerationRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;                 // as sent; empty when absent
  std::vector<PromptInput> prompts;  // completions: one per prompt of a batch; chat: one
  sampling::SamplingParams params;   // defaults applied, not yet validated
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool continuous_usage_stats = false;  // stream_options.continuous_usage_stats (vLLM)
  bool echo = false;
  // Completions: `logprobs` = number of alternatives. Chat: set when "logprobs": true, holding
  // top_logprobs (0 when absent).
  std::optional<int> logprobs;
  bool report_prompt_logprobs = false;  // vLLM's prompt_logprobs field was asked for
  bool return_tokens_as_token_ids = false;
  int64_t priority = 0;
  std::string user;
  std::string cache_salt;
  std::string echo_text;  // chat echo: the final message's content to prepend
  StructuredOutput structured;
  // `structured` compiled (attach_constraint); null when unconstrained.
  std::shared_ptr<const grammar::CompiledGrammar> constraint;
  ChatOutputOptions chat_output;  // chat only
};

// How message content reaches the chat template (vLLM's --chat-template-content-format):
// kString joins the text parts of a content array into one string ("\n" between parts); kOpenAi
// gives the template a list of {"type": "text", "text": ...} parts (a string content becomes one
// part, null none), for templates that loop over message content.
enum class ContentFormat { kString, kOpenAi };

// --chat-template-content-format auto, as vLLM decides it: kOpenAi when the template loops over
// a message's content (`{% for part in message['content'] %}`, `message.content`, or a variable
// set from it), otherwise kString.
ContentFormat detect_content_format(const std::string& template_source);

// What parsing needs from the running server.
struct ParseContext {
  const Tokenizer* tokenizer = nullptr;         // null: text prompts are rejected
  const ChatTemplate* chat_template = nullptr;  // null: chat requests are rejected
  std::string chat_template_error;              // why there is none (shown to clients)
  // --tokenizer-mode deepseek_v4: chat prompts come from encode_deepseek_v4 (no template needed)
  // and are tokenized without added special tokens.
  bool deepseek_v4_encoding = false;
  ContentFormat content_format = ContentFormat::kString;
  sampling::SamplingParams defaults;  // generation_config.json defaults
  std::string response_role = "assistant";
  bool return_tokens_as_token_ids = false;    // server default (--return-tokens-as-token-ids)
  int max_n = 256;                            // largest n (and prompts x n) per request
  ConstraintCompiler* constraints = nullptr;  // null: no tokenizer, structured outputs refused
  // --enable-auto-tool-choice, --tool-call-parser, --reasoning-parser and
  // --exclude-tools-when-tool-choice-none.
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  std::string reasoning_parser;
  bool exclude_tools_when_tool_choice_none = false;
};

ApiResult<GenerationRequest> parse_completion_request(const std::string& body,
                                                      const ParseContext& ctx);
ApiResult<GenerationRequest> parse_chat_request(const std::string& body, const ParseContext& ctx);
// Compiles r->structured into r->constraint (ctx.constraints' cache); the 400 to answer when
// the constraint is invalid or unsupported. Run after parsing, off the event loop.
std::optional<ApiError> attach_constraint(const ParseContext& ctx, GenerationRequest* r);

struct TokenizeRequest {
  std::string model;
  std::vector<int32_t> token_ids;
  bool return_token_strs = false;
  // llama.cpp's shape ({"content": ...}): answered as llama-server does, with "tokens" only,
  // each an {"id", "piece"} object when with_pieces.
  bool llama_cpp_shape = false;
  bool with_pieces = false;
};
// {"prompt": "...", "add_special_tokens": true} or {"messages": [...], ...} (chat template), or
// llama.cpp's {"content": "...", "add_special": false, "with_pieces": false}.
ApiResult<TokenizeRequest> parse_tokenize_request(const std::string& body, const ParseContext& ctx);

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> token_ids;
};
ApiResult<DetokenizeRequest> parse_detokenize_request(const std::string& body);

}  // namespace strata::server
