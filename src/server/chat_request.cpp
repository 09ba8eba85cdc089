// /v1/chat/completions request parsing: messages (string or content-part arrays), tools and
// tool_choice, template flags, then the chat template and the tokenizer.
#include <algorithm>
#include <regex>
#include <vector>

#include "core/json.h"
#include "server/openai_request.h"
#include "server/request_common.h"
#include "server/tool_parsers.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/deepseek_v4_encoding.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {
namespace {

constexpr int64_t kInt32Max = 2147483647;

// Copies the messages with their content in `format`: string (text parts joined by "\n") or a
// list of text parts. Fails on anything a text-only model cannot take.
bool normalize_messages(const OrderedJson& in, ContentFormat format, OrderedJson* out,
                        JsonFields& f) {
  if (!in.is_array() || in.empty()) {
    f.fail("messages", "messages must be a non-empty array of message objects");
    return false;
  }
  *out = OrderedJson::array();
  for (size_t i = 0; i < in.size(); ++i) {
    const OrderedJson& m = in[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) {
      f.fail("messages", where + " must be an object, got " + json_type_name(m));
      return false;
    }
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      f.fail("messages", where + ".role is required and must be a string");
      return false;
    }
    OrderedJson copy = m;
    auto content = m.find("content");
    const bool parts = format == ContentFormat::kOpenAi;
    if (parts && content != m.end() && content->is_string()) {
      OrderedJson part;
      part["type"] = "text";
      part["text"] = *content;
      copy["content"] = OrderedJson::array({std::move(part)});
    } else if (parts && content != m.end() && content->is_null()) {
      copy["content"] = OrderedJson::array();
    } else if (content != m.end() && content->is_array()) {
      std::string text;
      OrderedJson list = OrderedJson::array();
      bool first = true;
      for (const auto& part : *content) {
        auto type = part.is_object() ? part.find("type") : part.end();
        if (!part.is_object() || type == part.end() || !type->is_string()) {
          f.fail("messages", where + ".content parts must be objects with a \"type\"");
          return false;
        }
        const std::string t = type->get<std::string>();
        if (t != "text") {
          f.fail("messages", where + ".content has a part of type '" + t +
                                 "'; only text parts are supported (this is a text-only model)");
          return false;
        }
        auto txt = part.find("text");
        if (txt == part.end() || !txt->is_string()) {
          f.fail("messages", where + ".content text parts need a string \"text\"");
          return false;
        }
        if (!first) text += "\n";
        text += txt->get<std::string>();
        first = false;
        OrderedJson p;
        p["type"] = "text";
        p["text"] = *txt;
        list.push_back(std::move(p));
      }
      if (parts)
        copy["content"] = std::move(list);
      else
        copy["content"] = text;
    } else if (content != m.end() && !content->is_string() && !content->is_null()) {
      f.fail("messages", where +
                             ".content must be a string, an array of content parts or null; "
                             "got " +
                             json_type_name(*content));
      return false;
    }
    out->push_back(std::move(copy));
  }
  return true;
}

// Assistant tool_calls carry their arguments as JSON text; templates expect the object (as vLLM
// gives it to them). `reasoning` and `reasoning_content` (older clients, DeepSeek's API) are
// made to mirror each other, since templates read one or the other.
// Returns true when a tool call's arguments were changed.
bool postprocess_messages(OrderedJson* messages) {
  bool changed = false;
  for (auto& m : *messages) {
    auto calls = m.find("tool_calls");
    if (m["role"] == "assistant" && calls != m.end() && calls->is_array()) {
      for (auto& call : *calls) {
        if (!call.is_object()) continue;
        auto fn = call.find("function");
        if (fn == call.end() || !fn->is_object()) continue;
        auto args = fn->find("arguments");
        if (args == fn->end() || args->is_null() ||
            (args->is_string() && args->get_ref<const std::string&>().empty())) {
          (*fn)["arguments"] = OrderedJson::object();
          changed = true;
          continue;
        }
        if (!args->is_string()) continue;
        auto parsed = parse_ordered_json(args->get<std::string>(), "tool call arguments");
        if (parsed.ok() && (parsed->is_object() || parsed->is_array())) {
          *args = std::move(parsed).value();
          changed = true;
        }
      }
    }
    auto r = m.find("reasoning");
    auto rc = m.find("reasoning_content");
    if (r != m.end() && r->is_string() && rc == m.end())
      m["reasoning_content"] = *r;
    else if (rc != m.end() && rc->is_string() && r == m.end())
      m["reasoning"] = *rc;
  }
  return changed;
}

bool truthy(const OrderedJson& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get<std::string>().empty();
  return !v.is_null();
}

// tools, tool_choice, parallel_tool_calls and the reasoning parser, as vLLM reads them. `auto`
// (the default when tools are given) needs --enable-auto-tool-choice and --tool-call-parser;
// `required` and a named function become a JSON-schema constraint on the output.
void read_tool_fields(JsonFields& f, const ParseContext& ctx, const OrderedJson* kwargs,
                      GenerationRequest* r) {
  ChatOutputOptions& o = r->chat_output;
  o.reasoning_parser = ctx.reasoning_parser;
  if (kwargs != nullptr) {
    for (const char* k : {"thinking", "enable_thinking"}) {
      auto it = kwargs->find(k);
      if (it != kwargs->end() && !it->is_null()) o.thinking = truthy(*it);
    }
  }
  const OrderedJson* tools = f.raw("tools");
  if (tools != nullptr) {
    if (!tools->is_array()) {
      f.fail("tools", "tools must be an array of tool definitions, got " + json_type_name(*tools));
      return;
    }
    for (size_t i = 0; i < tools->size(); ++i) {
      const OrderedJson& t = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) {
        f.fail("tools", where + " must be an object, got " + json_type_name(t));
        return;
      }
      auto type = t.find("type");
      if (type == t.end() || !type->is_string() || type->get<std::string>() != "function") {
        f.fail("tools", where + ".type must be \"function\"" +
                            (type == t.end() ? std::string(" (it is missing)")
                                             : ", got " + json_brief(*type)));
        return;
      }
      auto fn = t.find("function");
      if (fn == t.end() || !fn->is_object()) {
        f.fail("tools", where + ".function must be an object with a \"name\"");
        return;
      }
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
        f.fail("tools", where + ".function.name is required and must be a non-empty string");
        return;
      }
      auto params = fn->find("parameters");
      if (params != fn->end() && !params->is_null() && !params->is_object()) {
        f.fail("tools", where + ".function.parameters must be a JSON Schema object, got " +
                            json_type_name(*params));
        return;
      }
    }
    if (!tools->empty()) o.tools = std::make_shared<const OrderedJson>(*tools);
  }
  if (auto v = f.boolean("parallel_tool_calls")) o.parallel_tool_calls = *v;
  std::string choice = o.tools ? "auto" : "none";
  const OrderedJson* named = nullptr;
  if (const OrderedJson* tc = f.raw("tool_choice")) {
    if (tc->is_string()) {
      choice = tc->get<std::string>();
    } else if (tc->is_object()) {
      auto type = tc->find("type");
      auto fn = tc->find("function");
      auto name = (fn != tc->end() && fn->is_object()) ? fn->find("name") : tc->end();
      if (type == tc->end() || *type != "function" || fn == tc->end() || !fn->is_object() ||
          name == fn->end() || !name->is_string()) {
        f.fail("tool_choice",
               "a tool_choice object must be {\"type\": \"function\", \"function\": {\"name\": "
               "NAME}}");
        return;
      }
      choice = "named";
      o.named_tool = name->get<std::string>();
    } else {
      choice = "";
    }
    if (choice != "none" && choice != "auto" && choice != "required" && choice != "named") {
      f.fail("tool_choice",
             "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
             "\"function\": {\"name\": NAME}}; got " +
                 json_brief(*tc));
      return;
    }
  }
  if ((choice == "required" || choice == "named") && !o.tools) {
    f.fail("tool_choice",
           "tool_choice " +
               (choice == "named" ? "naming a function" : std::string("\"required\"")) +
               " needs a non-empty tools array");
    return;
  }
  if (choice == "named") {
    for (const auto& t : *o.tools)
      if (t["function"]["name"] == o.named_tool) named = &t;
    if (named == nullptr) {
      f.fail("tool_choice",
             "tool_choice names the function '" + o.named_tool + "', which is not among the tools");
      return;
    }
  }
  if (choice == "auto" && o.tools) {
    if (!ctx.enable_auto_tool_choice || ctx.tool_call_parser.empty()) {
      f.fail("tool_choice",
             "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to "
             "be set (or send tool_choice \"none\", \"required\" or a named function)");
      return;
    }
    o.tool_choice = ToolChoice::kAuto;
    o.tool_parser = ctx.tool_call_parser;
    r->params.skip_special_tokens = false;  // marker tokens must reach the parser
  } else if (choice == "required" || choice == "named") {
    if (r->structured.kind != StructuredOutput::Kind::kNone) {
      f.fail("tool_choice", "tool_choice \"" +
                                std::string(choice == "named" ? "function" : choice) +
                                "\" cannot be combined with " + r->structured.param +
                                " (both constrain the output)");
      return;
    }
    o.tool_choice = choice == "named" ? ToolChoice::kNamed : ToolChoice::kRequired;
    r->structured.kind = StructuredOutput::Kind::kJsonSchema;
    r->structured.text = choice == "named"
                             ? named_tool_choice_schema(*named)
                             : required_tool_choice_schema(*o.tools, o.parallel_tool_calls);
    r->structured.param = "tool_choice";
  }
}

// --tokenizer-mode deepseek_v4: the prompt from the DeepSeek-V4 encoder instead of a template.
// Thinking and effort come from chat_template_kwargs and the request's reasoning_effort and
// thinking ({"type": ...}) fields.
ApiResult<std::string> deepseek_v4_prompt(const OrderedJson& body, const OrderedJson& messages,
                                          const OrderedJson* tools, const OrderedJson* kwargs,
                                          bool add_generation_prompt, bool continue_final) {
  auto field = [&](const char* name) -> const OrderedJson* {
    auto it = body.find(name);
    return it == body.end() ? nullptr : &*it;
  };
  auto mode = deepseek_v4_mode(kwargs, field("reasoning_effort"), field("thinking"));
  if (!mode.ok()) {
    const std::string& msg = mode.status().message();
    const char* param = msg.rfind("reasoning_effort", 0) == 0 ? "reasoning_effort"
                        : msg.rfind("thinking", 0) == 0       ? "thinking"
                                                              : "chat_template_kwargs";
    return ApiError{400, msg, param};
  }
  DeepseekV4Inputs in;
  in.messages = &messages;
  in.tools = tools;
  in.mode = *mode;
  in.add_generation_prompt = add_generation_prompt;
  in.continue_final_message = continue_final;
  auto prompt = encode_deepseek_v4(in);
  if (!prompt.ok()) {
    const std::string& msg = prompt.status().message();
    return ApiError{400, "DeepSeek-V4 chat encoding: " + msg,
                    msg.rfind("tools", 0) == 0 ? "tools" : "messages"};
  }
  return std::move(prompt).value();
}

}  // namespace

ContentFormat detect_content_format(const std::string& src) {
  // Names that hold a message's content: `message.content`, `m['content']`, or a variable set
  // from one of those.
  static const std::regex kContent(
      R"(^\s*\w+(\s*\[\s*\d+\s*\])?\s*(\.\s*content\b|\[\s*['"]content['"]\s*\]))");
  static const std::regex kSet(R"(\{%-?\s*set\s+(\w+)\s*=\s*([^%]*?)\s*-?%\})");
  static const std::regex kFor(R"(\{%-?\s*for\s+[\w\s,]+?\s+in\s+([^%]*?)\s*-?%\})");
  std::vector<std::string> vars;
  for (std::sregex_iterator it(src.begin(), src.end(), kSet), end; it != end; ++it)
    if (std::regex_search((*it)[2].str(), kContent)) vars.push_back((*it)[1].str());
  for (std::sregex_iterator it(src.begin(), src.end(), kFor), end; it != end; ++it) {
    const std::string iter = (*it)[1].str();
    if (std::regex_search(iter, kContent)) return ContentFormat::kOpenAi;
    std::smatch name;
    if (std::regex_search(iter, name, std::regex(R"(^\s*(\w+)\s*(\||$))")) &&
        std::find(vars.begin(), vars.end(), name[1].str()) != vars.end())
      return ContentFormat::kOpenAi;
  }
  return ContentFormat::kString;
}

ApiResult<GenerationRequest> parse_chat_request(const std::string& body, const ParseContext& ctx) {
  auto parsed = detail::parse_body(body);
  if (!parsed.ok()) return parsed.error();
  const OrderedJson& j = parsed.value();
  JsonFields f(j);
  GenerationRequest r;
  r.kind = ApiKind::kChat;
  detail::read_common_fields(f, ctx, &r);
  // Chat has no default length limit: generation runs to EOS or max_model_len.
  r.params.max_tokens = std::nullopt;
  if (auto v = f.integer("max_tokens", 0, kInt32Max)) r.params.max_tokens = static_cast<int>(*v);
  if (auto v = f.integer("max_completion_tokens", 0, kInt32Max))
    r.params.max_tokens = static_cast<int>(*v);
  bool logprobs = false;
  if (auto v = f.boolean("logprobs")) logprobs = *v;
  auto top = f.integer("top_logprobs", 0, kInt32Max);
  if (top && !logprobs) f.fail("top_logprobs", "top_logprobs needs logprobs set to true");
  if (logprobs) r.logprobs = static_cast<int>(top.value_or(0));
  r.params.logprobs = r.logprobs;
  if (auto v = f.boolean("echo")) r.echo = *v;
  bool add_generation_prompt = true, continue_final = false, add_special = false;
  if (auto v = f.boolean("add_generation_prompt")) add_generation_prompt = *v;
  if (auto v = f.boolean("continue_final_message")) continue_final = *v;
  if (auto v = f.boolean("add_special_tokens")) add_special = *v;
  if (continue_final && add_generation_prompt && f.has("add_generation_prompt"))
    f.fail("continue_final_message",
           "continue_final_message and add_generation_prompt cannot both be true");
  if (continue_final) add_generation_prompt = false;
  if (f.has("chat_template"))
    f.fail("chat_template",
           "a per-request chat_template is not supported; start the server with --chat-template");
  const OrderedJson* kwargs = f.object("chat_template_kwargs");
  const OrderedJson* tools = f.raw("tools");
  read_tool_fields(f, ctx, kwargs, &r);
  if (f.failed()) return f.error();
  if (r.chat_output.tool_choice == ToolChoice::kNone && ctx.exclude_tools_when_tool_choice_none)
    tools = nullptr;
  // reasoning_effort reaches a Jinja template as a variable (gpt-oss style templates); the
  // DeepSeek-V4 encoder reads and checks it itself.
  OrderedJson merged_kwargs;
  const OrderedJson* template_kwargs = kwargs;
  if (auto effort = ctx.deepseek_v4_encoding ? std::nullopt : f.string("reasoning_effort")) {
    static const char* const kEfforts[] = {"none", "minimal", "low", "medium",
                                           "high", "xhigh",   "max"};
    if (std::find_if(std::begin(kEfforts), std::end(kEfforts),
                     [&](const char* e) { return *effort == e; }) == std::end(kEfforts))
      f.fail("reasoning_effort",
             "reasoning_effort must be one of none, minimal, low, medium, "
             "high, xhigh or max; got '" +
                 *effort + "'");
    merged_kwargs = kwargs ? *kwargs : OrderedJson::object();
    if (!merged_kwargs.contains("reasoning_effort")) merged_kwargs["reasoning_effort"] = *effort;
    template_kwargs = &merged_kwargs;
  }
  const OrderedJson* documents = f.raw("documents");
  if (documents != nullptr && !documents->is_array())
    f.fail("documents", "documents must be an array, got " + json_type_name(*documents));
  detail::check_fan_out(f, ctx, r.params.n, 1);
  if (f.failed()) return f.error();
  const OrderedJson* messages_in = f.raw("messages");
  if (messages_in == nullptr) return ApiError{400, "messages is required", "messages"};
  OrderedJson messages;
  const ContentFormat format =
      ctx.deepseek_v4_encoding ? ContentFormat::kString : ctx.content_format;
  if (!normalize_messages(*messages_in, format, &messages, f)) return f.error();
  if (ctx.chat_template == nullptr && !ctx.deepseek_v4_encoding)
    return ApiError{400, ctx.chat_template_error, "messages"};
  if (ctx.tokenizer == nullptr)
    return ApiError{400, "this model has no tokenizer, so chat requests cannot be served",
                    "messages"};
  Result<std::string> prompt = std::string();
  if (ctx.deepseek_v4_encoding) {
    auto p = deepseek_v4_prompt(j, messages, tools, kwargs, add_generation_prompt, continue_final);
    if (!p.ok()) return p.error();
    prompt = std::move(p).value();
    add_special = false;  // the BOS is in the text (vLLM encodes with add_special_tokens=False)
  } else {
    OrderedJson templated = messages;
    const bool changed = postprocess_messages(&templated);
    ChatTemplateInputs in;
    in.messages = &templated;
    in.tools = tools;
    in.documents = documents;
    in.add_generation_prompt = add_generation_prompt;
    in.continue_final_message = continue_final;
    in.extra_kwargs = template_kwargs;
    prompt = ctx.chat_template->render(in);
    if (!prompt.ok() && changed) {
      // Some templates (DeepSeek V3/V3.1's own) join the arguments as text: give them the text.
      in.messages = &messages;
      auto retry = ctx.chat_template->render(in);
      if (retry.ok()) prompt = std::move(retry);
    }
    if (!prompt.ok())
      return ApiError{400, "chat template: " + prompt.status().message(), "messages"};
  }
  auto ids = ctx.tokenizer->encode(*prompt, add_special);
  if (!ids.ok()) return ApiError{400, ids.status().message(), "messages"};
  r.prompts.push_back({std::move(ids).value(), std::move(prompt).value()});
  if (r.echo) {
    const OrderedJson& last = messages.back();
    if (last["role"] == ctx.response_role && last.contains("content")) {
      const OrderedJson& c = last["content"];
      if (c.is_string()) {
        r.echo_text = c.get<std::string>();
      } else if (c.is_array()) {  // openai content format: the parts' text, as a string
        for (size_t i = 0; i < c.size(); ++i)
          r.echo_text += (i ? "\n" : "") + c[i]["text"].get<std::string>();
      }
    }
  }
  return r;
}

}  // namespace strata::server
