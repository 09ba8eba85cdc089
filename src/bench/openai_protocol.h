// The two OpenAI-compatible request shapes the benchmark sends, and parsing of their streamed
// chunks. Every request streams and asks for usage (stream_options.include_usage) so token
// counts come from the server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/dataset.h"
#include "core/status.h"

namespace strata::bench {

enum class Backend {
  kCompletions,  // --backend openai (also vllm): POST /v1/completions with "prompt"
  kChat,         // --backend openai-chat: POST /v1/chat/completions with "messages"
};

// "openai", "vllm" -> kCompletions; "openai-chat" -> kChat.
Result<Backend> parse_backend(const std::string& name);
const char* default_endpoint(Backend backend);

struct PayloadOptions {
  std::string model;
  bool ignore_eos = false;
  std::optional<int> logprobs;
  // A JSON object merged into every body (sampling parameters, --extra-body).
  std::string extra_body_json;
};

// One JSON body per request; errors only for an invalid extra body.
Result<std::vector<std::string>> build_payloads(Backend backend, const PayloadOptions& options,
                                                const std::vector<SampleRequest>& requests);

// What one SSE data payload carried.
struct StreamChunk {
  bool done = false;               // "[DONE]"
  bool has_choices = false;        // a token chunk (its text may be empty)
  std::string text;                // completion text, or chat delta content (+ reasoning)
  int64_t prompt_tokens = -1;      // from usage, -1 when absent
  int64_t completion_tokens = -1;  // from usage, -1 when absent
  std::string error;               // an error event, or a payload that is not valid JSON
};
StreamChunk parse_stream_chunk(std::string_view data, Backend backend);

}  // namespace strata::bench
