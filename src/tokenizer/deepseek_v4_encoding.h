// DeepSeek-V4 chat encoding: what `--tokenizer-mode deepseek_v4` uses instead of a Jinja chat
// template (DeepSeek-V4 ships none). It turns an OpenAI-style conversation into the prompt string,
// special tokens written as text (<｜begin▁of▁sentence｜>, <｜User｜>, <｜Assistant｜>, <think>,
// </think>, <｜end▁of▁sentence｜>, <｜latest_reminder｜>, the DSML marker ｜DSML｜); the caller
// tokenizes it WITHOUT adding special tokens (the BOS is in the text).
//
// Behaviour follows DeepSeek's reference encoder (encoding/encoding_dsv4.py in the DeepSeek-V4 HF
// repositories; the same file is vLLM's vllm/tokenizers/deepseek_v4_encoding.py@591f7b5eab1a) and
// vLLM's tokenizer wrapper (vllm/tokenizers/deepseek_v4.py):
//  - tools: a "## Tools" block (DSML calling instructions, one JSON schema per line) after the
//    system text. Request tools go to a leading system/developer message, else to a new empty
//    system message at the front; system/developer messages may also carry their own "tools".
//  - "tool" messages become <tool_result>…</tool_result> blocks of a user turn (consecutive
//    results and a following user message share the turn, blocks joined by a blank line); the
//    results are put in the order of the preceding assistant's tool_calls ids.
//  - assistant turns: {reasoning}</think>{content}, then "\n\n<｜DSML｜tool_calls>…" when it
//    called tools, then the EOS. In thinking mode, reasoning of turns before the last user message
//    is dropped (drop_thinking) unless tools are in play; a developer message before the last
//    user message is dropped too.
//  - after a user/developer turn: <｜Assistant｜><think> in thinking mode for the last user turn,
//    else <｜Assistant｜></think>.
//  - reasoning effort "max" puts a paragraph in front of the first message (thinking mode only).
//  - a system/developer message's "response_format" renders a "## Response Format" block.
//  - DeepSeek extensions: "latest_reminder" role, "task" on a message (action, query, authority,
//    domain, title, read_url), "prefix": true on a final assistant message (left open).
//
// Contract: inputs are never modified; any error is InvalidArgument naming the message/field at
// fault (the server returns it as a 400). Thread-safe (no shared state).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/status.h"

namespace strata {

// Thinking mode and reasoning effort of one request, resolved as vLLM's deepseek_v4 tokenizer
// does.
struct DeepseekV4Mode {
  bool thinking = true;          // "thinking" (<think> generation prompt) or "chat" mode
  std::string reasoning_effort;  // "max", "high" or "" (no effort given / chat mode)
  bool drop_thinking = true;     // drop the reasoning of turns before the last user message
};

// Resolves the mode from a chat request; each argument may be null (absent):
//  - `chat_template_kwargs`: `thinking` / `enable_thinking` (either truthy: thinking; present and
//    both falsy: chat; neither present: see `thinking_field`, then thinking by default),
//    `drop_thinking` (bool), `reasoning_effort` (used when the request field is absent).
//  - `reasoning_effort` (request field): "none" switches to chat mode, "max" is max, any other
//    string is high (the V4 encoder knows only max and high); absent: high when thinking.
//  - `thinking_field` (DeepSeek API's request field {"type": "enabled"|"disabled"}).
// Errors: a non-object kwargs, a non-string reasoning_effort, a non-bool drop_thinking, a bad
// `thinking` object.
Result<DeepseekV4Mode> deepseek_v4_mode(const nlohmann::ordered_json* chat_template_kwargs,
                                        const nlohmann::ordered_json* reasoning_effort,
                                        const nlohmann::ordered_json* thinking_field = nullptr);

struct DeepseekV4Inputs {
  // Required: array of message objects. `content` is a string, null or a list of text parts
  // (joined with "\n"); assistant `reasoning` or `reasoning_content`; assistant `tool_calls` in
  // OpenAI form (function.arguments a JSON-object string, an object, null or ""); `tool` messages
  // with `tool_call_id`.
  const nlohmann::ordered_json* messages = nullptr;
  const nlohmann::ordered_json* tools = nullptr;  // optional: OpenAI tools [{type, function}]
  // Optional: a response_format object to render as a "## Response Format" block on the leading
  // system message (like tools). The server does not pass the request's response_format here
  // (vLLM does not either; it is enforced by constrained decoding instead).
  const nlohmann::ordered_json* response_format = nullptr;
  DeepseekV4Mode mode;
  // false: no <｜Assistant｜><think> after a final user/developer message.
  bool add_generation_prompt = true;
  // Leave a final assistant message open (no EOS) so the model continues it.
  bool continue_final_message = false;
};

// The prompt string for `inputs`.
Result<std::string> encode_deepseek_v4(const DeepseekV4Inputs& inputs);

}  // namespace strata
