// Chat templates: turn an OpenAI-style conversation into the prompt string a model expects,
// exactly as Hugging Face transformers' apply_chat_template(tokenize=False) renders it (Jinja2
// with trim_blocks/lstrip_blocks, loop controls, raise_exception, strftime_now, tojson without
// ASCII escaping; see tokenizer/jinja/template.h).
//
// Typical use (server): load once, render per request from any thread:
//   STRATA_ASSIGN_OR_RETURN(ChatTemplate tmpl, load_chat_template(model_dir));
//   ChatTemplateInputs in{.messages = &request["messages"], .add_generation_prompt = true};
//   STRATA_ASSIGN_OR_RETURN(std::string prompt, tmpl.render(in));
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace strata {

namespace jinja {
class Template;
}
class Tokenizer;

// JSON inputs are nlohmann::ordered_json so that objects keep the client's key order: tojson in
// a template reproduces it, as Python dicts do (plain nlohmann::json would sort the keys).
struct ChatTemplateInputs {
  const nlohmann::ordered_json* messages = nullptr;   // required: array of message objects
  const nlohmann::ordered_json* tools = nullptr;      // optional: array of tool schemas
  const nlohmann::ordered_json* documents = nullptr;  // optional: array of documents (RAG)
  bool add_generation_prompt = false;
  // Leave the final (assistant) message open so the model continues it, like transformers'
  // continue_final_message. Incompatible with add_generation_prompt.
  bool continue_final_message = false;
  // Optional object: extra template variables such as {"enable_thinking": false}. They override
  // the special-token variables, like transformers' **kwargs.
  const nlohmann::ordered_json* extra_kwargs = nullptr;
};

// Special-token variables of a template (bos_token, eos_token, unk_token, pad_token, ...).
// Tokens the tokenizer config does not define stay undefined in the template, as in
// transformers.
struct ChatTemplateSpecialTokens {
  std::vector<std::pair<std::string, std::string>> tokens;  // {"bos_token", "<s>"}, ...
  std::vector<std::string> additional_special_tokens;
};

class ChatTemplate {
 public:
  // Parses `source`; syntax errors are InvalidArgument with the line number. `tool_use_source`
  // (optional, may be empty) is the template transformers picks when tools are given.
  static Result<ChatTemplate> parse(const std::string& source,
                                    ChatTemplateSpecialTokens special_tokens = {},
                                    const std::string& tool_use_source = "");

  // Renders a conversation. Thread-safe (const); a typical conversation takes microseconds.
  // Errors (InvalidArgument): bad inputs, template errors with their line, and the template's
  // own raise_exception(message), which is returned as `message`.
  Result<std::string> render(const ChatTemplateInputs& inputs) const;

  const std::string& source() const { return source_; }
  const ChatTemplateSpecialTokens& special_tokens() const { return special_tokens_; }

 private:
  std::string source_;
  ChatTemplateSpecialTokens special_tokens_;
  std::shared_ptr<const jinja::Template> template_;
  std::shared_ptr<const jinja::Template> tool_use_template_;  // may be null
};

// Loads the chat template of a model:
//  - a directory: chat_template.jinja if present, else the "chat_template" of tokenizer_config.json
//    (a string, or a list of {name, template} from which "default" is used, or `template_name`);
//  - a tokenizer_config.json file;
//  - a .gguf file: metadata "tokenizer.chat_template" (or "tokenizer.chat_template.<name>").
// Special tokens come from the same place (bos_token/eos_token may be strings or AddedToken
// objects with "content"; GGUF uses tokenizer.ggml.bos_token_id/eos_token_id).
// `override_template`, when not empty, replaces the model's template: a path to a file, or the
// template text itself (like vLLM's --chat-template). Missing templates are NotFound errors that
// say to pass --chat-template.
Result<ChatTemplate> load_chat_template(const std::string& model_or_tokenizer_path,
                                        const std::string& override_template = "",
                                        const std::string& template_name = "");

// The same from an already loaded Tokenizer (its TokenizerInfo carries the template sources and
// the bos/eos/unk/pad strings), for callers that load the tokenizer anyway.
Result<ChatTemplate> chat_template_from_tokenizer(const Tokenizer& tokenizer,
                                                  const std::string& override_template = "",
                                                  const std::string& template_name = "");

}  // namespace strata
