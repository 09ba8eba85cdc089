#include "tokenizer/deepseek_v4_encoding.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/json.h"
#include "tokenizer/jinja/value.h"

namespace strata {
namespace {

// The model's special tokens and fixed prompt text. These strings are the format the model was
// trained on, so they must be byte-exact: they follow DeepSeek's reference encoder
// (encoding_dsv4.py; vllm-project/vllm vllm/tokenizers/deepseek_v4_encoding.py@591f7b5eab1a).
constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kDsml = "｜DSML｜";

constexpr std::string_view kEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, "
    "considered alternative, and rejected hypothesis to ensure absolutely no assumption is left "
    "unchecked.\n\n";

constexpr std::string_view kResponseFormatHead =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

// The "## Tools" block; @D@ stands for the DSML marker and @S@ for the tool schemas.
constexpr std::string_view kToolsBlock = R"(## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<@D@tool_calls>" block like the following:

<@D@tool_calls>
<@D@invoke name="$TOOL_NAME">
<@D@parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</@D@parameter>
...
</@D@invoke>
<@D@invoke name="$TOOL_NAME2">
...
</@D@invoke>
</@D@tool_calls>

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.

Otherwise, output directly after </think> with tool calls or final response.

### Available Tool Schemas

@S@

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
)";

// Task tokens (DeepSeek's internal classification tasks), by the message's "task" value.
std::optional<std::string_view> task_token(const std::string& task) {
  if (task == "action") return "<｜action｜>";
  if (task == "query") return "<｜query｜>";
  if (task == "authority") return "<｜authority｜>";
  if (task == "domain") return "<｜domain｜>";
  if (task == "title") return "<｜title｜>";
  if (task == "read_url") return "<｜read_url｜>";
  return std::nullopt;
}

// Python's json.dumps(value, ensure_ascii=False) with its default ", " / ": " separators; object
// keys keep their order (ordered_json), as a Python dict does.
void append_py_json(std::string* out, const OrderedJson& v) {
  switch (v.type()) {
    case OrderedJson::value_t::null:
      *out += "null";
      return;
    case OrderedJson::value_t::boolean:
      *out += v.get<bool>() ? "true" : "false";
      return;
    case OrderedJson::value_t::number_integer:
      *out += std::to_string(v.get<int64_t>());
      return;
    case OrderedJson::value_t::number_unsigned:
      *out += std::to_string(v.get<uint64_t>());
      return;
    case OrderedJson::value_t::number_float:
      *out += jinja::float_repr(v.get<double>());
      return;
    case OrderedJson::value_t::string: {
      const std::string& s = v.get_ref<const std::string&>();
      *out += '"';
      for (unsigned char c : s) {
        switch (c) {
          case '"':
            *out += "\\\"";
            break;
          case '\\':
            *out += "\\\\";
            break;
          case '\n':
            *out += "\\n";
            break;
          case '\r':
            *out += "\\r";
            break;
          case '\t':
            *out += "\\t";
            break;
          case '\b':
            *out += "\\b";
            break;
          case '\f':
            *out += "\\f";
            break;
          default:
            if (c < 0x20) {
              static const char* kHex = "0123456789abcdef";
              *out += "\\u00";
              *out += kHex[c >> 4];
              *out += kHex[c & 15];
            } else {
              *out += static_cast<char>(c);
            }
        }
      }
      *out += '"';
      return;
    }
    case OrderedJson::value_t::array: {
      *out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (!first) *out += ", ";
        first = false;
        append_py_json(out, e);
      }
      *out += ']';
      return;
    }
    case OrderedJson::value_t::object: {
      *out += '{';
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) *out += ", ";
        first = false;
        append_py_json(out, OrderedJson(k));
        *out += ": ";
        append_py_json(out, e);
      }
      *out += '}';
      return;
    }
    default:  // binary / discarded: not produced by the JSON parser
      *out += "null";
      return;
  }
}

std::string py_json(const OrderedJson& v) {
  std::string s;
  append_py_json(&s, v);
  return s;
}

void replace_all(std::string* s, std::string_view from, std::string_view to) {
  for (size_t pos = s->find(from); pos != std::string::npos; pos = s->find(from, pos + to.size()))
    s->replace(pos, from.size(), to);
}

// Python truthiness of a JSON value.
bool truthy(const OrderedJson& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_float()) return v.get<double>() != 0;
  if (v.is_number()) return v.get<int64_t>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return false;
}

struct ToolCall {
  std::string id;
  std::string name;
  std::string dsml_arguments;  // the <｜DSML｜parameter …> lines
};

struct Block {
  bool tool_result = false;
  std::string text;
  std::string tool_use_id;
};

// One message after validation and tool-result merging.
struct Message {
  std::string role;
  std::string content;
  std::vector<Block> blocks;              // user messages
  std::vector<const OrderedJson*> tools;  // system/developer: arrays of OpenAI tools
  const OrderedJson* response_format = nullptr;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
  std::optional<std::string> task;
  bool wo_eos = false;
};

Status bad(const std::string& where, const std::string& what) {
  return invalid_argument(where + ": " + what);
}

// Message content as one string: a string, null/absent (""), or a list of text parts joined with
// "\n" (vLLM's "string" content format).
Result<std::string> content_text(const OrderedJson& m, const std::string& where) {
  auto it = m.find("content");
  if (it == m.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array())
    return bad(where + ".content", "must be a string, a list of text parts or null");
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const OrderedJson& part = (*it)[i];
    auto type = part.is_object() ? part.find("type") : part.end();
    auto txt = part.is_object() ? part.find("text") : part.end();
    if (type == part.end() || *type != "text" || txt == part.end() || !txt->is_string())
      return bad(where + ".content[" + std::to_string(i) + "]",
                 "only {\"type\": \"text\", \"text\": \"...\"} parts are supported");
    if (i) text += "\n";
    text += txt->get<std::string>();
  }
  return text;
}

// function.arguments → DSML parameter lines: strings verbatim with string="true", everything
// else as JSON with string="false". Null, "" or an absent value means no parameters.
Result<std::string> dsml_arguments(const OrderedJson& fn, const std::string& where) {
  auto it = fn.find("arguments");
  OrderedJson parsed;
  const OrderedJson* args = nullptr;
  if (it == fn.end() || it->is_null()) return std::string();
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    if (s.empty()) return std::string();
    auto p = parse_ordered_json(s, where + ".arguments");
    if (!p.ok())
      return bad(where + ".arguments", "is not valid JSON (" + p.status().message() + ")");
    parsed = std::move(p).value();
    args = &parsed;
  } else {
    args = &*it;
  }
  if (!args->is_object())
    return bad(where + ".arguments", "must be a JSON object (or a string holding one), got " +
                                         std::string(args->type_name()));
  std::string out;
  bool first = true;
  for (const auto& [key, value] : args->items()) {
    if (!first) out += "\n";
    first = false;
    out += "<";
    out += kDsml;
    out += "parameter name=\"" + key + "\" string=\"";
    out += value.is_string() ? "true\">" + value.get<std::string>() : "false\">" + py_json(value);
    out += "</";
    out += kDsml;
    out += "parameter>";
  }
  return out;
}

Status check_tools(const OrderedJson& tools, const std::string& where) {
  if (!tools.is_array()) return bad(where, "must be an array of tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const OrderedJson& t = tools[i];
    auto fn = t.is_object() ? t.find("function") : t.end();
    if (fn == t.end() || !fn->is_object())
      return bad(where + "[" + std::to_string(i) + "]",
                 "each tool must be an object with a \"function\" object");
  }
  return ok_status();
}

// Validates one OpenAI message and converts it (tool messages become user blocks later).
Result<Message> read_message(const OrderedJson& m, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return bad(where, "must be an object");
  auto role = m.find("role");
  if (role == m.end() || !role->is_string()) return bad(where + ".role", "must be a string");
  Message msg;
  msg.role = role->get<std::string>();
  static const char* kRoles[] = {"system",    "developer", "user",
                                 "assistant", "tool",      "latest_reminder"};
  if (std::none_of(std::begin(kRoles), std::end(kRoles),
                   [&](const char* r) { return msg.role == r; }))
    return bad(where + ".role",
               "'" + msg.role +
                   "' is not a role of the DeepSeek-V4 encoding (system, developer, user, "
                   "assistant, tool, latest_reminder)");
  STRATA_ASSIGN_OR_RETURN(msg.content, content_text(m, where));
  if (msg.role == "developer" && msg.content.empty())
    return bad(where, "a developer message needs non-empty content");
  if (msg.role == "system" || msg.role == "developer") {
    auto tools = m.find("tools");
    if (tools != m.end() && !tools->is_null()) {
      STRATA_RETURN_IF_ERROR(check_tools(*tools, where + ".tools"));
      if (!tools->empty()) msg.tools.push_back(&*tools);
    }
    auto rf = m.find("response_format");
    if (rf != m.end() && truthy(*rf)) msg.response_format = &*rf;
  }
  if (msg.role == "assistant") {
    for (const char* key : {"reasoning", "reasoning_content"}) {
      auto r = m.find(key);
      if (r == m.end() || r->is_null()) continue;
      if (!r->is_string()) return bad(where + "." + key, "must be a string");
      if (msg.reasoning.empty()) msg.reasoning = r->get<std::string>();
    }
    auto calls = m.find("tool_calls");
    if (calls != m.end() && !calls->is_null()) {
      if (!calls->is_array()) return bad(where + ".tool_calls", "must be an array");
      for (size_t j = 0; j < calls->size(); ++j) {
        const OrderedJson& c = (*calls)[j];
        const std::string cw = where + ".tool_calls[" + std::to_string(j) + "]";
        auto fn = c.is_object() ? c.find("function") : c.end();
        if (fn == c.end() || !fn->is_object())
          return bad(cw, "each tool call must be an object with a \"function\" object");
        auto name = fn->find("name");
        if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
          return bad(cw + ".function.name", "must be a non-empty string");
        ToolCall tc;
        tc.name = name->get<std::string>();
        for (const OrderedJson* holder : {&c, &*fn}) {
          auto id = holder->find("id");
          if (id != holder->end() && id->is_string() &&
              !id->get_ref<const std::string&>().empty()) {
            tc.id = id->get<std::string>();
            break;
          }
        }
        STRATA_ASSIGN_OR_RETURN(tc.dsml_arguments, dsml_arguments(*fn, cw + ".function"));
        msg.tool_calls.push_back(std::move(tc));
      }
    }
    auto prefix = m.find("prefix");
    auto wo_eos = m.find("wo_eos");
    msg.wo_eos = (prefix != m.end() && truthy(*prefix)) || (wo_eos != m.end() && truthy(*wo_eos));
  }
  if (msg.role == "tool") {
    auto id = m.find("tool_call_id");
    if (id != m.end() && !id->is_null()) {
      if (!id->is_string()) return bad(where + ".tool_call_id", "must be a string");
      msg.blocks.push_back({true, msg.content, id->get<std::string>()});
    } else {
      msg.blocks.push_back({true, msg.content, ""});
    }
  }
  auto task = m.find("task");
  if (task != m.end() && !task->is_null()) {
    if (!task->is_string() || !task_token(task->get<std::string>()))
      return bad(where + ".task",
                 "must be one of action, query, authority, domain, title, read_url");
    msg.task = task->get<std::string>();
  }
  return msg;
}

// Tool messages → <tool_result> blocks of user turns; a user message right after such a turn
// (or after another user message) joins it as a text block, unless that turn carries a task.
std::vector<Message> merge_tool_messages(std::vector<Message> in) {
  std::vector<Message> out;
  for (Message& m : in) {
    const bool prev_user = !out.empty() && out.back().role == "user";
    if (m.role == "tool") {
      if (prev_user) {
        out.back().blocks.push_back(std::move(m.blocks.front()));
      } else {
        Message u;
        u.role = "user";
        u.blocks = std::move(m.blocks);
        out.push_back(std::move(u));
      }
    } else if (m.role == "user") {
      Block text{false, m.content, ""};
      if (prev_user && !out.back().task) {
        out.back().blocks.push_back(std::move(text));
      } else {
        m.blocks.push_back(std::move(text));
        out.push_back(std::move(m));
      }
    } else {
      out.push_back(std::move(m));
    }
  }
  return out;
}

// Orders the tool results of each user turn as the calls of the latest assistant message with
// tool calls (results with unknown ids count as position 0; the sort is stable).
void sort_tool_results(std::vector<Message>* messages) {
  std::unordered_map<std::string, size_t> order;
  for (Message& m : *messages) {
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      order.clear();
      for (size_t i = 0; i < m.tool_calls.size(); ++i)
        if (!m.tool_calls[i].id.empty()) order[m.tool_calls[i].id] = i;
    } else if (m.role == "user" && !order.empty()) {
      std::vector<Block> results;
      for (const Block& b : m.blocks)
        if (b.tool_result) results.push_back(b);
      if (results.size() < 2) continue;
      auto rank = [&](const Block& b) {
        auto it = order.find(b.tool_use_id);
        return it == order.end() ? size_t{0} : it->second;
      };
      std::stable_sort(results.begin(), results.end(),
                       [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
      size_t next = 0;
      for (Block& b : m.blocks)
        if (b.tool_result) b = results[next++];
    }
  }
}

int last_user_index(const std::vector<Message>& messages) {
  for (int i = static_cast<int>(messages.size()) - 1; i >= 0; --i)
    if (messages[i].role == "user" || messages[i].role == "developer") return i;
  return -1;
}

// Thinking mode with drop_thinking: before the last user message, assistant reasoning is removed
// and developer messages are dropped.
std::vector<Message> drop_earlier_thinking(std::vector<Message> in) {
  const int last_user = last_user_index(in);
  std::vector<Message> out;
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    Message& m = in[i];
    if (i >= last_user || m.role == "user" || m.role == "system" || m.role == "latest_reminder") {
      out.push_back(std::move(m));
    } else if (m.role == "assistant") {
      m.reasoning.clear();
      out.push_back(std::move(m));
    }
  }
  return out;
}

std::string render_tools(const std::vector<const OrderedJson*>& tool_lists) {
  std::string schemas;
  for (const OrderedJson* list : tool_lists)
    for (const OrderedJson& t : *list) {
      if (!schemas.empty()) schemas += "\n";
      append_py_json(&schemas, t["function"]);
    }
  std::string block(kToolsBlock);
  replace_all(&block, "@D@", kDsml);
  replace_all(&block, "@S@", schemas);
  return block;
}

// System/developer extras: "\n\n## Tools…" and "\n\n## Response Format…".
std::string render_extras(const Message& m) {
  std::string s;
  if (!m.tools.empty()) s += "\n\n" + render_tools(m.tools);
  if (m.response_format != nullptr) {
    s += "\n\n";
    s += kResponseFormatHead;
    append_py_json(&s, *m.response_format);
  }
  return s;
}

struct RenderOptions {
  bool thinking;
  bool drop_thinking;
  bool effort_max;
  bool add_generation_prompt;
};

void render_message(size_t index, const std::vector<Message>& messages, const RenderOptions& o,
                    std::string* out) {
  const Message& m = messages[index];
  const int last_user = last_user_index(messages);
  if (index == 0 && o.thinking && o.effort_max) *out += kEffortMax;
  if (m.role == "system") {
    *out += m.content;
    *out += render_extras(m);
  } else if (m.role == "developer") {
    *out += kUser;
    *out += m.content;
    *out += render_extras(m);
  } else if (m.role == "user") {
    *out += kUser;
    for (size_t i = 0; i < m.blocks.size(); ++i) {
      if (i) *out += "\n\n";
      if (m.blocks[i].tool_result) *out += "<tool_result>";
      *out += m.blocks[i].text;
      if (m.blocks[i].tool_result) *out += "</tool_result>";
    }
  } else if (m.role == "latest_reminder") {
    *out += kLatestReminder;
    *out += m.content;
  } else {  // assistant
    const bool after_task = index > 0 && messages[index - 1].task.has_value();
    if (o.thinking && !after_task && (!o.drop_thinking || static_cast<int>(index) > last_user)) {
      *out += m.reasoning;
      *out += kThinkEnd;
    }
    *out += m.content;
    if (!m.tool_calls.empty()) {
      *out += "\n\n<";
      *out += kDsml;
      *out += "tool_calls>\n";
      for (size_t i = 0; i < m.tool_calls.size(); ++i) {
        if (i) *out += "\n";
        *out += "<";
        *out += kDsml;
        *out += "invoke name=\"" + m.tool_calls[i].name + "\">\n";
        *out += m.tool_calls[i].dsml_arguments;
        *out += "\n</";
        *out += kDsml;
        *out += "invoke>";
      }
      *out += "\n</";
      *out += kDsml;
      *out += "tool_calls>";
    }
    if (!m.wo_eos) *out += kEos;
  }

  // What follows the message: nothing when the next one is not an assistant/reminder turn; a task
  // token; or the assistant header after a user/developer turn.
  if (index + 1 < messages.size() && messages[index + 1].role != "assistant" &&
      messages[index + 1].role != "latest_reminder")
    return;
  if (m.task) {
    if (*m.task != "action") {
      *out += *task_token(*m.task);
    } else {
      *out += kAssistant;
      *out += o.thinking ? kThinkStart : kThinkEnd;
      *out += *task_token(*m.task);
    }
  } else if (m.role == "user" || m.role == "developer") {
    if (index + 1 == messages.size() && !o.add_generation_prompt) return;
    *out += kAssistant;
    const bool open_think =
        o.thinking && (!o.drop_thinking || static_cast<int>(index) >= last_user);
    *out += open_think ? kThinkStart : kThinkEnd;
  }
}

}  // namespace

Result<DeepseekV4Mode> deepseek_v4_mode(const OrderedJson* kwargs,
                                        const OrderedJson* reasoning_effort,
                                        const OrderedJson* thinking_field) {
  DeepseekV4Mode mode;
  if (kwargs != nullptr && kwargs->is_null()) kwargs = nullptr;
  if (kwargs != nullptr && !kwargs->is_object())
    return invalid_argument("chat_template_kwargs must be an object");
  auto kw = [&](const char* key) -> const OrderedJson* {
    if (kwargs == nullptr) return nullptr;
    auto it = kwargs->find(key);
    return it == kwargs->end() ? nullptr : &*it;
  };
  const OrderedJson* thinking = kw("thinking");
  const OrderedJson* enable_thinking = kw("enable_thinking");
  if (thinking != nullptr || enable_thinking != nullptr) {
    mode.thinking = (thinking != nullptr && truthy(*thinking)) ||
                    (enable_thinking != nullptr && truthy(*enable_thinking));
  } else if (thinking_field != nullptr && !thinking_field->is_null()) {
    auto type = thinking_field->is_object() ? thinking_field->find("type") : thinking_field->end();
    if (type == thinking_field->end() || !type->is_string() ||
        (*type != "enabled" && *type != "disabled"))
      return invalid_argument(
          "thinking must be an object {\"type\": \"enabled\"} or {\"type\": \"disabled\"}");
    mode.thinking = *type == "enabled";
  }
  if (const OrderedJson* drop = kw("drop_thinking"); drop != nullptr && !drop->is_null()) {
    if (!drop->is_boolean())
      return invalid_argument("chat_template_kwargs.drop_thinking must be a boolean");
    mode.drop_thinking = drop->get<bool>();
  }
  const OrderedJson* effort = reasoning_effort;
  if (effort == nullptr || effort->is_null()) effort = kw("reasoning_effort");
  if (effort == nullptr || effort->is_null()) {
    mode.reasoning_effort = mode.thinking ? "high" : "";
  } else if (!effort->is_string()) {
    return invalid_argument("reasoning_effort must be a string such as \"high\" or \"max\"");
  } else if (*effort == "none") {
    mode.thinking = false;
    mode.reasoning_effort = "";
  } else if (*effort == "max") {
    mode.reasoning_effort = "max";
  } else {
    mode.reasoning_effort = "high";
  }
  return mode;
}

Result<std::string> encode_deepseek_v4(const DeepseekV4Inputs& in) {
  if (in.messages == nullptr || !in.messages->is_array())
    return invalid_argument("messages must be an array of message objects");
  std::vector<Message> messages;
  messages.reserve(in.messages->size() + 1);
  for (size_t i = 0; i < in.messages->size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(Message m, read_message((*in.messages)[i], i));
    messages.push_back(std::move(m));
  }
  const bool request_tools = in.tools != nullptr && !in.tools->is_null() && !in.tools->empty();
  if (in.tools != nullptr && !in.tools->is_null())
    STRATA_RETURN_IF_ERROR(check_tools(*in.tools, "tools"));
  const bool request_format = in.response_format != nullptr && truthy(*in.response_format);
  if (request_tools || request_format) {
    // Request-level tools/response_format join a leading system or developer message, or a new
    // empty system message at the front.
    if (messages.empty() || (messages[0].role != "system" && messages[0].role != "developer")) {
      Message sys;
      sys.role = "system";
      messages.insert(messages.begin(), std::move(sys));
    }
    if (request_tools) messages[0].tools.push_back(in.tools);
    if (request_format) messages[0].response_format = in.response_format;
  }
  if (in.continue_final_message) {
    if (messages.empty() || messages.back().role != "assistant")
      return invalid_argument("continue_final_message needs a final assistant message to continue");
    messages.back().wo_eos = true;
  }
  messages = merge_tool_messages(std::move(messages));
  sort_tool_results(&messages);

  RenderOptions o;
  o.thinking = in.mode.thinking;
  // Reasoning is kept in every turn when tools are in play.
  const bool any_tools = std::any_of(messages.begin(), messages.end(),
                                     [](const Message& m) { return !m.tools.empty(); });
  o.drop_thinking = in.mode.drop_thinking && !any_tools;
  o.effort_max = in.mode.reasoning_effort == "max";
  o.add_generation_prompt = in.add_generation_prompt;
  if (o.thinking && o.drop_thinking) messages = drop_earlier_thinking(std::move(messages));

  std::string prompt(kBos);
  for (size_t i = 0; i < messages.size(); ++i) render_message(i, messages, o, &prompt);
  return prompt;
}

}  // namespace strata
