// Tool-call parsers: turn a chat model's raw output text into OpenAI tool calls, streaming or
// not, for the formats vLLM names with --tool-call-parser (hermes, llama3_json/llama4_json,
// mistral, qwen3_xml/qwen3_coder, deepseek_v3, deepseek_v31, deepseek_v32, deepseek_v4), and
// for the JSON that constrained decoding produces under tool_choice "required" or a named tool.
//
// Streaming contract (as vLLM emits deltas): text goes out as `content` until a call starts;
// the first delta of call i carries index i, its id, type "function" and the whole function name
// (a name is never split); later deltas of the call carry `arguments` fragments whose
// concatenation is the call's arguments JSON text. Only text before the first call is content.
// Feeding a text in any split, then finish(), gives the same content and calls as feeding it
// whole (the non-streaming extraction), so clients see the same result either way.
//
// The parsers read the text (markers such as <tool_call> or <｜tool▁call▁begin｜> must survive
// detokenization: the server decodes with skip_special_tokens=false when a parser is active).
// Delta token ids are accepted for interface parity with vLLM but not needed.
//
// JSON formats (hermes, llama3_json, mistral, deepseek_v3/v31, required) report the model's
// arguments text as written; the XML/DSML formats (qwen3_xml, deepseek_v32/v4) build the JSON
// object themselves, with parameter values coerced to the types of the tool's JSON schema.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace strata::server {

// One entry of a streaming delta's `tool_calls`.
struct ToolCallDelta {
  int index = 0;
  bool first = false;     // the call's first delta: carries id, type "function" and name
  std::string id;         // set when first
  std::string name;       // set when first
  std::string arguments;  // a fragment (may be empty)
};

// What one step of output adds: content, reasoning and tool-call fragments.
struct OutputDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
  // Appends `other` after this delta.
  void append(OutputDelta other);
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};

// A view of the whole output so far, as one format reads it. Produced afresh for every longer
// text; the streaming wrapper sends what grew. Contract for implementations: as the text grows,
// content_len never shrinks below what was reported before, a named call keeps its name, and
// each call's `arguments` only grows by appending (the stable part: nothing that a later byte
// could change). With final=true everything held back (partial markers, unterminated values) is
// settled.
struct ToolSnapshot {
  struct Call {
    std::string name;
    bool name_done = false;  // `name` is complete
    std::string arguments;   // stable prefix of the arguments JSON text
  };
  size_t content_len = 0;   // content is text[0, content_len)
  std::vector<Call> calls;  // calls started (a call may not be named yet)
};

class ToolFormat {
 public:
  virtual ~ToolFormat() = default;
  virtual ToolSnapshot parse(std::string_view text, bool final) const = 0;
  // True when content is the text before a start marker: a parse may then begin at any point
  // of the text already reported as content (the wrapper skips it, keeping streaming linear).
  virtual bool marker_started() const { return true; }
  // A fresh tool-call id in this format's style.
  virtual std::string make_id() const;
};

// Streaming wrapper around a ToolFormat: feed text deltas, get OpenAI deltas.
class ToolCallParser {
 public:
  // parallel_tool_calls=false keeps only the first call.
  ToolCallParser(std::unique_ptr<ToolFormat> format, bool parallel_tool_calls);
  ~ToolCallParser();

  OutputDelta feed(std::string_view delta_text, std::span<const int32_t> delta_token_ids = {});
  // The output ended: flushes what was held back.
  OutputDelta finish();

  // Everything sent so far (after finish(): the complete extraction).
  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  OutputDelta advance(bool final);

  std::unique_ptr<ToolFormat> format_;
  bool parallel_;
  std::string text_;
  size_t base_ = 0;  // text_[0, base_) is content with no call after it so far
  bool finished_ = false;
  std::string content_;
  std::vector<ToolCall> calls_;
};

// --tool-call-parser names, as vLLM spells them.
std::vector<std::string> tool_parser_names();
bool is_tool_parser_name(const std::string& name);

// A parser for `name` (one of tool_parser_names()). `tools` (may be null) is the request's
// `tools` array: the XML/DSML formats read parameter types from it.
Result<std::unique_ptr<ToolCallParser>> make_tool_parser(const std::string& name,
                                                         const nlohmann::ordered_json* tools,
                                                         bool parallel_tool_calls);

// tool_choice "required": the output is a JSON array of {"name": ..., "parameters": {...}}.
std::unique_ptr<ToolCallParser> make_required_tool_parser(bool parallel_tool_calls);
// tool_choice naming one function: the whole output is that function's arguments object.
std::unique_ptr<ToolCallParser> make_named_tool_parser(const std::string& name);

// The JSON Schema that constrained decoding enforces for tool_choice "required" (an array of
// calls, one object per tool: {"name": {"const": NAME}, "parameters": PARAMS}) with minItems 1
// (and maxItems 1 when parallel_tool_calls is false); `tools` is the validated tools array.
std::string required_tool_choice_schema(const nlohmann::ordered_json& tools, bool parallel);
// The schema for a named tool_choice: that tool's parameters (an empty object schema when none).
std::string named_tool_choice_schema(const nlohmann::ordered_json& tool);

// JSON text as Python's json.dumps(value, ensure_ascii=False) writes it (", " and ": "), the
// spelling vLLM's parsers produce for arguments they build.
std::string python_json_dumps(const nlohmann::ordered_json& value);

}  // namespace strata::server
