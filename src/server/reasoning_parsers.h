// Reasoning parsers (--reasoning-parser): split a model's <think>...</think> span from its answer,
// streaming or not, as vLLM's parsers of the same names do, plus the per-choice pipeline that
// runs a reasoning parser, then a tool-call parser, over the generated text.
//
//   deepseek_r1  text up to </think> is reasoning, whether or not <think> was generated (the R1
//                templates open it in the prompt); a leading <think> is dropped.
//   qwen3        reasoning when the output opens with <think> or the prompt left a <think> open
//                (Qwen3 thinking templates), up to </think>; otherwise all content
//                (enable_thinking=false).
//   deepseek_v3  as deepseek_r1 when thinking is on (chat_template_kwargs thinking or
//                enable_thinking true, or the prompt ends in an open <think>), else all content.
//   deepseek_v4  as deepseek_v3; a DSML tool block (<｜DSML｜tool_calls>) inside the reasoning
//                also ends it, and is handed on as content for the tool-call parser.
//
// Like the tool parsers, feeding a text in any split and then finish() gives the same reasoning
// and content as feeding it whole.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/tool_parsers.h"

namespace strata::server {

class ReasoningParser {
 public:
  // `prompt`: the rendered prompt (an open <think> at its end starts the output in reasoning).
  // `thinking`: chat_template_kwargs thinking/enable_thinking when the request set one.
  static Result<std::unique_ptr<ReasoningParser>> create(const std::string& name,
                                                         std::string_view prompt,
                                                         std::optional<bool> thinking);

  // Returns the delta's reasoning and content parts.
  OutputDelta feed(std::string_view delta_text);
  OutputDelta finish();

  const std::string& reasoning() const { return reasoning_; }

 private:
  enum class Mode { kStart, kReasoning, kContent };
  ReasoningParser() = default;
  OutputDelta advance(bool final);

  Mode mode_ = Mode::kStart;
  bool may_open_ = true;  // a <think> at the very start of the output is allowed (and dropped)
  bool content_without_open_ = false;  // qwen3: no <think> at the start means no reasoning
  bool dsml_ends_ = false;             // deepseek_v4
  std::string pending_;                // text not yet classified
  std::string reasoning_;
  bool finished_ = false;
};

std::vector<std::string> reasoning_parser_names();
bool is_reasoning_parser_name(const std::string& name);

// The output pipeline of one chat choice: reasoning parser (optional), then tool-call parser
// (optional) on what the reasoning parser calls content.
class ChatOutputParser {
 public:
  ChatOutputParser(std::unique_ptr<ReasoningParser> reasoning,
                   std::unique_ptr<ToolCallParser> tools);
  ~ChatOutputParser();

  OutputDelta feed(std::string_view delta_text);
  OutputDelta finish();

  // Totals so far (complete after finish()).
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ToolCall>& tool_calls() const;
  bool has_reasoning_parser() const { return reasoning_parser_ != nullptr; }

 private:
  OutputDelta route(OutputDelta from_reasoning, bool final);

  std::unique_ptr<ReasoningParser> reasoning_parser_;
  std::unique_ptr<ToolCallParser> tool_parser_;
  std::string content_;
  std::string reasoning_;
};

}  // namespace strata::server
