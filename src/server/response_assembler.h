// Turns engine output chunks into OpenAI responses: server-sent events for streams (completion
// chunks or chat.completion.chunk deltas, the usage chunk, "data: [DONE]") or one JSON body
// (text_completion / chat.completion) with usage, logprobs in each endpoint's shape, echo,
// finish_reason and vLLM's stop_reason.
//
// One assembler per HTTP request; not thread-safe (the server drives it from its loop thread).
// Choice indexes are prompt_index * n + choice, as OpenAI numbers a batch of prompts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_types.h"
#include "server/openai_request.h"

namespace strata {
class Tokenizer;
}

namespace strata::server {

class ChatOutputParser;

struct ResponseContext {
  std::string id;                              // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;                         // Unix seconds
  std::string model;                           // the served model name
  std::shared_ptr<const Tokenizer> tokenizer;  // for logprob token strings; may be null
  std::string role = "assistant";
};

class ResponseAssembler {
 public:
  ResponseAssembler(const GenerationRequest& request, ResponseContext context);
  ~ResponseAssembler();

  // --- Streaming ---
  // What to send before any chunk: chat streams open each choice with its role (and echo).
  std::string stream_begin();
  // The events for one engine chunk of prompt `prompt_index` ("" when there is nothing to send).
  std::string stream_chunk(int prompt_index, const engine::OutputChunk& chunk);
  // After every choice finished: the usage chunk when include_usage, then "data: [DONE]".
  std::string stream_end();
  // An error event ({"error": {...}}) followed by "data: [DONE]".
  static std::string stream_error(const ApiError& error);

  // --- One response body ---
  void add(int prompt_index, const engine::OutputChunk& chunk);
  std::string final_body() const;

  int64_t prompt_tokens() const;
  int64_t completion_tokens() const;
  bool all_finished() const;

 private:
  struct Choice;
  struct Prompt;
  std::string render_chunk(int prompt_index, const engine::OutputChunk& chunk);
  void absorb(int prompt_index, const engine::OutputChunk& chunk, Choice& c);
  std::string token_text(int32_t id) const;
  // The parser pipeline for a chat choice of prompt `prompt_index` (request_.chat_output).
  std::unique_ptr<ChatOutputParser> make_output_parser(int prompt_index) const;

  GenerationRequest request_;
  ResponseContext ctx_;
  std::vector<Prompt> prompts_;
  std::vector<Choice> choices_;
  int num_finished_ = 0;
};

}  // namespace strata::server
