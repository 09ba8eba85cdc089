#include "server/tool_parsers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <random>

#include "core/json.h"
#include "core/logging.h"
#include "server/tool_formats.h"

namespace strata::server {

void OutputDelta::append(OutputDelta other) {
  content += other.content;
  reasoning += other.reasoning;
  for (auto& t : other.tool_calls) tool_calls.push_back(std::move(t));
}

namespace tool_formats {

// ---------------------------------------------------------------------------------------------
// Small text helpers.

std::string random_hex(int digits) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < digits; ++i) s += kHex[rng() & 15];
  return s;
}

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

// Built by appending: GCC 12 warns (-Wrestrict, a false positive) on "\"" + json_escape(s) once
// this is an out-of-line function.
std::string json_quoted(std::string_view s) {
  std::string out = "\"";
  out += json_escape(s);
  out += '"';
  return out;
}

}  // namespace tool_formats

namespace {

using tool_formats::json_quoted;
using tool_formats::random_hex;

void dumps_into(const OrderedJson& v, std::string* out) {
  if (v.is_object()) {
    *out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) *out += ", ";
      first = false;
      *out += json_quoted(it.key());
      *out += ": ";
      dumps_into(it.value(), out);
    }
    *out += '}';
  } else if (v.is_array()) {
    *out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) *out += ", ";
      dumps_into(v[i], out);
    }
    *out += ']';
  } else if (v.is_string()) {
    *out += json_quoted(v.get_ref<const std::string&>());
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) {
      *out += d != d ? "NaN" : (d > 0 ? "Infinity" : "-Infinity");
    } else {
      std::string s = v.dump();
      // Python writes integral floats with ".0" (nlohmann does too, but be sure).
      if (s.find_first_of(".eE") == std::string::npos) s += ".0";
      *out += s;
    }
  } else {
    *out += v.dump();
  }
}

const char* const kToolParserNames[] = {
    "deepseek_v3", "deepseek_v31", "deepseek_v32", "deepseek_v4", "hermes",
    "llama3_json", "llama4_json",  "mistral",      "qwen3_coder", "qwen3_xml"};

}  // namespace

std::string ToolFormat::make_id() const {
  return "chatcmpl-tool-" + random_hex(32);
}

std::string python_json_dumps(const OrderedJson& value) {
  std::string out;
  dumps_into(value, &out);
  return out;
}

ToolCallParser::ToolCallParser(std::unique_ptr<ToolFormat> format, bool parallel_tool_calls)
    : format_(std::move(format)), parallel_(parallel_tool_calls) {}

ToolCallParser::~ToolCallParser() = default;

OutputDelta ToolCallParser::feed(std::string_view delta_text, std::span<const int32_t>) {
  if (finished_) return {};
  text_.append(delta_text);
  return advance(false);
}

OutputDelta ToolCallParser::finish() {
  if (finished_) return {};
  OutputDelta d = advance(true);
  finished_ = true;
  return d;
}

OutputDelta ToolCallParser::advance(bool final) {
  OutputDelta d;
  std::string_view view(text_);
  ToolSnapshot snap = format_->parse(view.substr(base_), final);
  for (auto& c : snap.calls) c.name_done = c.name_done && !c.name.empty();  // nameless: no call
  // Not one readable call in the finished text: it was all content (as vLLM answers).
  if (final && std::none_of(snap.calls.begin(), snap.calls.end(),
                            [](const ToolSnapshot::Call& c) { return c.name_done; })) {
    snap.calls.clear();
    snap.content_len = view.size() - base_;
  }
  const size_t content_end = base_ + snap.content_len;
  if (content_end > content_.size()) {
    d.content = text_.substr(content_.size(), content_end - content_.size());
    content_ += d.content;
  }
  if (snap.calls.empty() && format_->marker_started()) base_ = content_end;
  size_t limit = parallel_ ? snap.calls.size() : std::min<size_t>(snap.calls.size(), 1);
  for (size_t i = 0; i < limit; ++i) {
    const ToolSnapshot::Call& c = snap.calls[i];
    if (!c.name_done) break;  // later calls wait for this one's name
    if (i >= calls_.size()) {
      ToolCall tc;
      tc.id = format_->make_id();
      tc.name = c.name;
      tc.arguments = c.arguments;
      ToolCallDelta td;
      td.index = static_cast<int>(i);
      td.first = true;
      td.id = tc.id;
      td.name = tc.name;
      td.arguments = tc.arguments;
      calls_.push_back(std::move(tc));
      d.tool_calls.push_back(std::move(td));
      continue;
    }
    ToolCall& tc = calls_[i];
    if (c.arguments.size() <= tc.arguments.size()) continue;
    if (c.arguments.compare(0, tc.arguments.size(), tc.arguments) != 0) {
      STRATA_LOG(WARNING) << "tool-call parser: arguments of call " << i
                          << " changed after being sent; keeping what was sent";
      continue;
    }
    ToolCallDelta td;
    td.index = static_cast<int>(i);
    td.arguments = c.arguments.substr(tc.arguments.size());
    tc.arguments = c.arguments;
    d.tool_calls.push_back(std::move(td));
  }
  return d;
}

std::vector<std::string> tool_parser_names() {
  return {std::begin(kToolParserNames), std::end(kToolParserNames)};
}

bool is_tool_parser_name(const std::string& name) {
  for (const char* n : kToolParserNames)
    if (name == n) return true;
  return false;
}

Result<std::unique_ptr<ToolCallParser>> make_tool_parser(const std::string& name,
                                                         const OrderedJson* tools,
                                                         bool parallel_tool_calls) {
  std::unique_ptr<ToolFormat> f;
  if (name == "hermes") {
    f = tool_formats::make_hermes_format();
  } else if (name == "llama3_json" || name == "llama4_json") {
    f = tool_formats::make_llama_json_format();
  } else if (name == "mistral") {
    f = tool_formats::make_mistral_format();
  } else if (name == "qwen3_xml" || name == "qwen3_coder") {
    f = tool_formats::make_qwen3_xml_format(tools);
  } else if (name == "deepseek_v3") {
    f = tool_formats::make_deepseek_v3_format(false);
  } else if (name == "deepseek_v31") {
    f = tool_formats::make_deepseek_v3_format(true);
  } else if (name == "deepseek_v32") {
    f = tool_formats::make_dsml_format(tools, "function_calls");
  } else if (name == "deepseek_v4") {
    f = tool_formats::make_dsml_format(tools, "tool_calls");
  } else {
    std::string known;
    for (const char* n : kToolParserNames) known += (known.empty() ? "" : ", ") + std::string(n);
    return invalid_argument("unknown tool-call parser '" + name + "'; known parsers: " + known);
  }
  return std::make_unique<ToolCallParser>(std::move(f), parallel_tool_calls);
}

std::unique_ptr<ToolCallParser> make_required_tool_parser(bool parallel_tool_calls) {
  return std::make_unique<ToolCallParser>(tool_formats::make_required_json_format(),
                                          parallel_tool_calls);
}

std::unique_ptr<ToolCallParser> make_named_tool_parser(const std::string& name) {
  return std::make_unique<ToolCallParser>(tool_formats::make_named_json_format(name), false);
}

namespace {

OrderedJson parameters_schema(const OrderedJson& tool) {
  const OrderedJson& fn = tool["function"];
  auto p = fn.find("parameters");
  if (p != fn.end() && p->is_object() && !p->empty()) return *p;
  OrderedJson empty;
  empty["type"] = "object";
  empty["properties"] = OrderedJson::object();
  return empty;
}

}  // namespace

std::string required_tool_choice_schema(const OrderedJson& tools, bool parallel) {
  OrderedJson alternatives = OrderedJson::array();
  for (const auto& t : tools) {
    OrderedJson item;
    item["type"] = "object";
    item["properties"]["name"]["type"] = "string";
    item["properties"]["name"]["const"] = t["function"]["name"];
    item["properties"]["parameters"] = parameters_schema(t);
    item["required"] = OrderedJson::array({"name", "parameters"});
    alternatives.push_back(std::move(item));
  }
  OrderedJson schema;
  schema["type"] = "array";
  schema["minItems"] = 1;
  if (!parallel) schema["maxItems"] = 1;
  schema["items"]["type"] = "object";
  schema["items"]["anyOf"] = std::move(alternatives);
  return schema.dump();
}

std::string named_tool_choice_schema(const OrderedJson& tool) {
  return parameters_schema(tool).dump();
}

}  // namespace strata::server
