#include "server/reasoning_parsers.h"

#include <algorithm>

#include "server/tool_formats.h"

namespace strata::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kDsmlToolCalls = "<｜DSML｜tool_calls>";

const char* const kReasoningParserNames[] = {"deepseek_r1", "deepseek_v3", "deepseek_v4", "qwen3"};

using tool_formats::partial_marker;

// The prompt ends inside a think span: its last <think> has no </think> after it.
bool prompt_opens_think(std::string_view prompt) {
  size_t open = prompt.rfind(kThinkOpen);
  if (open == std::string_view::npos) return false;
  return prompt.find(kThinkClose, open) == std::string_view::npos;
}

}  // namespace

std::vector<std::string> reasoning_parser_names() {
  return {std::begin(kReasoningParserNames), std::end(kReasoningParserNames)};
}

bool is_reasoning_parser_name(const std::string& name) {
  for (const char* n : kReasoningParserNames)
    if (name == n) return true;
  return false;
}

Result<std::unique_ptr<ReasoningParser>> ReasoningParser::create(const std::string& name,
                                                                 std::string_view prompt,
                                                                 std::optional<bool> thinking) {
  std::unique_ptr<ReasoningParser> p(new ReasoningParser());
  const bool prompt_open = prompt_opens_think(prompt);
  if (name == "deepseek_r1") {
    // Reasoning until </think> either way.
  } else if (name == "qwen3") {
    p->content_without_open_ = !prompt_open;
  } else if (name == "deepseek_v3" || name == "deepseek_v4") {
    p->dsml_ends_ = name == "deepseek_v4";
    const bool on = thinking.value_or(false) || prompt_open;
    if (!on) p->mode_ = Mode::kContent;
  } else {
    std::string known;
    for (const char* n : kReasoningParserNames)
      known += (known.empty() ? "" : ", ") + std::string(n);
    return invalid_argument("unknown reasoning parser '" + name + "'; known parsers: " + known);
  }
  return p;
}

OutputDelta ReasoningParser::feed(std::string_view delta_text) {
  if (finished_) return {};
  pending_.append(delta_text);
  return advance(false);
}

OutputDelta ReasoningParser::finish() {
  if (finished_) return {};
  OutputDelta d = advance(true);
  finished_ = true;
  return d;
}

OutputDelta ReasoningParser::advance(bool final) {
  OutputDelta d;
  for (;;) {
    if (mode_ == Mode::kStart) {
      std::string_view p(pending_);
      if (!final && p.size() < kThinkOpen.size() && kThinkOpen.substr(0, p.size()) == p)
        return d;  // may still become <think>
      if (p.size() >= kThinkOpen.size() && p.substr(0, kThinkOpen.size()) == kThinkOpen) {
        pending_.erase(0, kThinkOpen.size());
        mode_ = Mode::kReasoning;
      } else {
        mode_ = content_without_open_ ? Mode::kContent : Mode::kReasoning;
      }
      continue;
    }
    if (mode_ == Mode::kContent) {
      d.content += pending_;
      pending_.clear();
      return d;
    }
    // Reasoning: up to </think> (dropped) or, for V4, a DSML tool block (kept, as content).
    std::string_view p(pending_);
    size_t close = p.find(kThinkClose);
    size_t dsml = dsml_ends_ ? p.find(kDsmlToolCalls) : std::string_view::npos;
    if (close == std::string_view::npos && dsml == std::string_view::npos) {
      size_t hold = final ? 0 : partial_marker(p, kThinkClose);
      if (dsml_ends_ && !final) hold = std::max(hold, partial_marker(p, kDsmlToolCalls));
      d.reasoning += pending_.substr(0, p.size() - hold);
      reasoning_ += pending_.substr(0, p.size() - hold);
      pending_.erase(0, p.size() - hold);
      return d;
    }
    const bool by_dsml = dsml < close;
    const size_t at = by_dsml ? dsml : close;
    d.reasoning += pending_.substr(0, at);
    reasoning_ += pending_.substr(0, at);
    pending_.erase(0, by_dsml ? at : at + kThinkClose.size());
    mode_ = Mode::kContent;
  }
}

ChatOutputParser::ChatOutputParser(std::unique_ptr<ReasoningParser> reasoning,
                                   std::unique_ptr<ToolCallParser> tools)
    : reasoning_parser_(std::move(reasoning)), tool_parser_(std::move(tools)) {}

ChatOutputParser::~ChatOutputParser() = default;

const std::vector<ToolCall>& ChatOutputParser::tool_calls() const {
  static const std::vector<ToolCall> kNone;
  return tool_parser_ ? tool_parser_->calls() : kNone;
}

OutputDelta ChatOutputParser::feed(std::string_view delta_text) {
  OutputDelta d;
  if (reasoning_parser_)
    d = reasoning_parser_->feed(delta_text);
  else
    d.content = std::string(delta_text);
  return route(std::move(d), false);
}

OutputDelta ChatOutputParser::finish() {
  OutputDelta d;
  if (reasoning_parser_) d = reasoning_parser_->finish();
  return route(std::move(d), true);
}

OutputDelta ChatOutputParser::route(OutputDelta from_reasoning, bool final) {
  OutputDelta out;
  out.reasoning = std::move(from_reasoning.reasoning);
  if (tool_parser_) {
    out.append(tool_parser_->feed(from_reasoning.content));
    if (final) out.append(tool_parser_->finish());
  } else {
    out.content = std::move(from_reasoning.content);
  }
  content_ += out.content;
  reasoning_ += out.reasoning;
  return out;
}

}  // namespace strata::server
