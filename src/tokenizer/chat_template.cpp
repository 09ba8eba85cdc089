#include "tokenizer/chat_template.h"

#include "core/file_util.h"
#include "core/json.h"
#include "core/strings.h"
#include "io/gguf.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer/jinja/unicode.h"
#include "tokenizer/tokenizer.h"

namespace strata {

namespace {

using jinja::Value;

constexpr const char* kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                              "pad_token", "cls_token", "mask_token"};

// A special token in tokenizer_config.json: a string, an AddedToken object with "content", or
// null. Returns false when absent or null.
bool token_text(const Json& v, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    *out = v["content"].get<std::string>();
    return true;
  }
  return false;
}

void set_token(ChatTemplateSpecialTokens* st, const std::string& name, const std::string& text) {
  for (auto& [k, v] : st->tokens) {
    if (k == name) {
      v = text;
      return;
    }
  }
  st->tokens.emplace_back(name, text);
}

void read_special_tokens(const Json& config, ChatTemplateSpecialTokens* st) {
  for (const char* name : kSpecialTokenNames) {
    std::string text;
    if (config.contains(name) && token_text(config[name], &text)) set_token(st, name, text);
  }
  if (config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array()) {
    st->additional_special_tokens.clear();
    for (const auto& t : config["additional_special_tokens"]) {
      std::string text;
      if (token_text(t, &text)) st->additional_special_tokens.push_back(text);
    }
  }
}

struct Source {
  std::string text;
  std::string tool_use;  // optional named "tool_use" template
};

// The "chat_template" field: a string or a list of {"name", "template"}.
Result<Source> pick_template(const Json& field, const std::string& name, const std::string& where) {
  Source src;
  if (field.is_string()) {
    if (!name.empty() && name != "default") {
      return not_found(where + " has a single chat template, not one named '" + name + "'");
    }
    src.text = field.get<std::string>();
    return src;
  }
  if (!field.is_array()) {
    return invalid_argument(where +
                            ": \"chat_template\" must be a string or a list of "
                            "{\"name\", \"template\"} objects");
  }
  std::vector<std::string> names;
  bool found = false;
  for (const auto& entry : field) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("template") || !entry["template"].is_string()) {
      return invalid_argument(where +
                              ": every entry of \"chat_template\" needs string fields "
                              "\"name\" and \"template\"");
    }
    std::string n = entry["name"].get<std::string>();
    names.push_back(n);
    if (n == (name.empty() ? "default" : name)) {
      src.text = entry["template"].get<std::string>();
      found = true;
    }
    if (n == "tool_use" && name.empty()) src.tool_use = entry["template"].get<std::string>();
  }
  if (!found) {
    return not_found(where + " has no chat template named '" + (name.empty() ? "default" : name) +
                     "'; available: " + join(names, ", ") +
                     " (choose one with --chat-template-name)");
  }
  return src;
}

Result<std::string> read_override(const std::string& override_template) {
  if (file_exists(override_template)) {
    return read_file(override_template);
  }
  if (override_template.find_first_of("{}\n") != std::string::npos) return override_template;
  return not_found("chat template file '" + override_template +
                   "' not found (pass a readable file or the template text itself)");
}

Result<ChatTemplate> load_from_gguf(const std::string& path, const std::string& override_text,
                                    const std::string& name) {
  STRATA_ASSIGN_OR_RETURN(auto gguf, io::GgufFile::open(path));
  ChatTemplateSpecialTokens st;
  if (gguf->find("tokenizer.ggml.tokens") != nullptr) {
    STRATA_ASSIGN_OR_RETURN(auto tokens, gguf->get_string_array("tokenizer.ggml.tokens"));
    for (const char* key : {"bos", "eos", "unknown", "padding", "seperator", "cls", "mask"}) {
      std::string id_key = std::string("tokenizer.ggml.") + key + "_token_id";
      STRATA_ASSIGN_OR_RETURN(auto id, gguf->get_int(id_key));
      if (!id || *id < 0 || static_cast<size_t>(*id) >= tokens.size()) continue;
      std::string var = std::string(key) == "unknown"     ? "unk_token"
                        : std::string(key) == "padding"   ? "pad_token"
                        : std::string(key) == "seperator" ? "sep_token"
                                                          : std::string(key) + "_token";
      set_token(&st, var, std::string(tokens[static_cast<size_t>(*id)]));
    }
  }
  if (!override_text.empty()) return ChatTemplate::parse(override_text, std::move(st));
  std::string key = name.empty() || name == "default" ? "tokenizer.chat_template"
                                                      : "tokenizer.chat_template." + name;
  STRATA_ASSIGN_OR_RETURN(auto text, gguf->get_string(key));
  if (!text) {
    return not_found("'" + path + "' has no chat template (GGUF key " + key +
                     "); pass one with --chat-template FILE");
  }
  std::string tool_use;
  if (name.empty()) {
    STRATA_ASSIGN_OR_RETURN(auto tool, gguf->get_string("tokenizer.chat_template.tool_use"));
    if (tool) tool_use = *tool;
  }
  auto result = ChatTemplate::parse(*text, std::move(st), tool_use);
  if (!result.ok()) return result.status().with_context("'" + path + "'");
  return result;
}

}  // namespace

Result<ChatTemplate> load_chat_template(const std::string& path,
                                        const std::string& override_template,
                                        const std::string& template_name) {
  std::string override_text;
  if (!override_template.empty()) {
    STRATA_ASSIGN_OR_RETURN(override_text, read_override(override_template));
  }
  if (!file_exists(path) && !is_directory(path)) {
    return not_found("model or tokenizer path '" + path + "' does not exist");
  }
  if (!is_directory(path) && ends_with(to_lower(path), ".gguf")) {
    return load_from_gguf(path, override_text, template_name);
  }
  std::string dir = path;
  std::string config_path = path;
  if (is_directory(path)) {
    config_path = path_join(path, "tokenizer_config.json");
  } else {
    size_t slash = path.rfind('/');
    dir = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  ChatTemplateSpecialTokens st;
  Json config = Json::object();
  if (file_exists(config_path)) {
    STRATA_ASSIGN_OR_RETURN(config, read_json_file(config_path));
    if (!config.is_object()) return invalid_argument("'" + config_path + "' is not a JSON object");
    read_special_tokens(config, &st);
  }
  std::string map_path = path_join(dir, "special_tokens_map.json");
  if (is_directory(path) && file_exists(map_path)) {
    STRATA_ASSIGN_OR_RETURN(Json map, read_json_file(map_path));
    if (map.is_object()) read_special_tokens(map, &st);
  }
  if (!override_text.empty()) return ChatTemplate::parse(override_text, std::move(st));

  Source src;
  std::string where;
  std::string jinja_path = path_join(dir, "chat_template.jinja");
  std::string json_path = path_join(dir, "chat_template.json");
  if (is_directory(path) && file_exists(jinja_path)) {
    STRATA_ASSIGN_OR_RETURN(src.text, read_file(jinja_path));
    where = "'" + jinja_path + "'";
  } else if (config.contains("chat_template") && !config["chat_template"].is_null()) {
    where = "'" + config_path + "'";
    STRATA_ASSIGN_OR_RETURN(src, pick_template(config["chat_template"], template_name, where));
  } else if (is_directory(path) && file_exists(json_path)) {
    where = "'" + json_path + "'";
    STRATA_ASSIGN_OR_RETURN(Json j, read_json_file(json_path));
    if (!j.is_object() || !j.contains("chat_template")) {
      return invalid_argument(where + " has no \"chat_template\" field");
    }
    STRATA_ASSIGN_OR_RETURN(src, pick_template(j["chat_template"], template_name, where));
  } else {
    return not_found(
        "'" + path + "' has no chat template (no chat_template in " +
        (file_exists(config_path) ? "'" + config_path + "'" : "tokenizer_config.json") +
        "); pass one with --chat-template FILE");
  }
  auto result = ChatTemplate::parse(src.text, std::move(st), src.tool_use);
  if (!result.ok()) return result.status().with_context(where);
  return result;
}

Result<ChatTemplate> chat_template_from_tokenizer(const Tokenizer& tokenizer,
                                                  const std::string& override_template,
                                                  const std::string& template_name) {
  const TokenizerInfo& info = tokenizer.info();
  ChatTemplateSpecialTokens st;
  const std::pair<const char*, const std::string*> tokens[] = {{"bos_token", &info.bos_token},
                                                               {"eos_token", &info.eos_token},
                                                               {"unk_token", &info.unk_token},
                                                               {"pad_token", &info.pad_token}};
  for (const auto& [name, text] : tokens) {
    if (!text->empty()) set_token(&st, name, *text);
  }
  if (!override_template.empty()) {
    STRATA_ASSIGN_OR_RETURN(std::string text, read_override(override_template));
    return ChatTemplate::parse(text, std::move(st));
  }
  std::string wanted = template_name.empty() ? "default" : template_name;
  const std::string* source = nullptr;
  std::string tool_use;
  std::vector<std::string> names;
  for (const auto& [name, text] : info.chat_templates) {
    names.push_back(name);
    if (name == wanted) source = &text;
    if (name == "tool_use" && template_name.empty()) tool_use = text;
  }
  if (source == nullptr) {
    if (info.chat_templates.empty()) {
      return not_found("'" + info.source +
                       "' has no chat template; pass one with --chat-template FILE");
    }
    return not_found("'" + info.source + "' has no chat template named '" + wanted +
                     "'; available: " + join(names, ", "));
  }
  auto result = ChatTemplate::parse(*source, std::move(st), tool_use);
  if (!result.ok()) return result.status().with_context("'" + info.source + "'");
  return result;
}

Result<ChatTemplate> ChatTemplate::parse(const std::string& source,
                                         ChatTemplateSpecialTokens special_tokens,
                                         const std::string& tool_use_source) {
  ChatTemplate t;
  auto parsed = jinja::Template::parse(source);
  if (!parsed.ok()) return parsed.status();
  t.template_ = std::make_shared<const jinja::Template>(std::move(parsed).value());
  if (!tool_use_source.empty()) {
    auto tool = jinja::Template::parse(tool_use_source);
    if (!tool.ok()) return tool.status().with_context("the tool_use chat template");
    t.tool_use_template_ = std::make_shared<const jinja::Template>(std::move(tool).value());
  }
  t.source_ = source;
  t.special_tokens_ = std::move(special_tokens);
  return t;
}

namespace {

Result<Value> optional_json(const nlohmann::ordered_json* j) {
  if (j == nullptr || j->is_null()) return Value::none();
  return jinja::value_from_json(*j);
}

// transformers' continue_final_message: cut the render right after the final message's text.
Result<std::string> continue_final(const OrderedJson& messages, std::string rendered) {
  if (messages.empty())
    return invalid_argument("continue_final_message needs at least one message");
  const OrderedJson& last = messages.back();
  std::string final_text;
  const OrderedJson* content =
      last.is_object() && last.contains("content") ? &last["content"] : nullptr;
  if (content != nullptr && content->is_string()) {
    final_text = content->get<std::string>();
  } else if (content != nullptr && content->is_array()) {
    bool found = false;
    for (auto it = content->rbegin(); it != content->rend() && !found; ++it) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
        final_text = (*it)["text"].get<std::string>();
        found = true;
      }
    }
    if (!found) {
      return invalid_argument(
          "continue_final_message is set but the final message has no text to continue");
    }
  } else {
    return invalid_argument(
        "continue_final_message is set but the final message has no text content");
  }
  std::string stripped(jinja::unicode::strip(final_text, true, true, nullptr));
  std::string lstripped(jinja::unicode::strip(final_text, true, false, nullptr));
  size_t loc = rendered.rfind(stripped);
  if (loc == std::string::npos) {
    return invalid_argument(
        "continue_final_message is set but the final message does not appear in the rendered chat; "
        "the chat template may rewrite or drop parts of the final message");
  }
  if (rendered.compare(loc, lstripped.size(), lstripped) == 0) {
    rendered.resize(loc + lstripped.size());
  } else {
    rendered.resize(loc + stripped.size());
  }
  return rendered;
}

}  // namespace

Result<std::string> ChatTemplate::render(const ChatTemplateInputs& in) const {
  if (template_ == nullptr) return failed_precondition("render() called on an empty ChatTemplate");
  if (in.messages == nullptr || !in.messages->is_array()) {
    return invalid_argument("chat template: messages must be a JSON array of message objects");
  }
  if (in.add_generation_prompt && in.continue_final_message) {
    return invalid_argument(
        "continue_final_message and add_generation_prompt cannot both be set: "
        "continue_final_message extends the last message instead of starting a "
        "new assistant turn");
  }
  if (in.tools != nullptr && !in.tools->is_null() && !in.tools->is_array()) {
    return invalid_argument("chat template: tools must be a JSON array");
  }
  if (in.extra_kwargs != nullptr && !in.extra_kwargs->is_null() && !in.extra_kwargs->is_object()) {
    return invalid_argument("chat template: extra template arguments must be a JSON object");
  }
  jinja::Variables vars;
  STRATA_ASSIGN_OR_RETURN(Value messages, jinja::value_from_json(*in.messages));
  STRATA_ASSIGN_OR_RETURN(Value tools, optional_json(in.tools));
  STRATA_ASSIGN_OR_RETURN(Value documents, optional_json(in.documents));
  vars.emplace_back("messages", std::move(messages));
  vars.emplace_back("tools", std::move(tools));
  vars.emplace_back("documents", std::move(documents));
  vars.emplace_back("add_generation_prompt", Value::boolean(in.add_generation_prompt));
  for (const auto& [name, text] : special_tokens_.tokens)
    vars.emplace_back(name, Value::string(text));
  if (!special_tokens_.additional_special_tokens.empty()) {
    jinja::List list;
    for (const auto& t : special_tokens_.additional_special_tokens)
      list.push_back(Value::string(t));
    vars.emplace_back("additional_special_tokens", Value::list(std::move(list)));
  }
  if (in.extra_kwargs != nullptr && in.extra_kwargs->is_object()) {
    for (auto it = in.extra_kwargs->begin(); it != in.extra_kwargs->end(); ++it) {
      const std::string& key = it.key();
      if (key == "messages" || key == "tools" || key == "documents" ||
          key == "add_generation_prompt") {
        return invalid_argument("chat template argument '" + key +
                                "' cannot be passed as an extra keyword argument");
      }
      STRATA_ASSIGN_OR_RETURN(Value v, jinja::value_from_json(it.value()));
      bool replaced = false;
      for (auto& [name, value] : vars) {
        if (name == key) {
          value = v;
          replaced = true;
        }
      }
      if (!replaced) vars.emplace_back(key, std::move(v));
    }
  }
  bool has_tools = in.tools != nullptr && !in.tools->is_null();
  const jinja::Template& tmpl =
      (has_tools && tool_use_template_ != nullptr) ? *tool_use_template_ : *template_;
  STRATA_ASSIGN_OR_RETURN(std::string rendered, tmpl.render(vars));
  if (in.continue_final_message) return continue_final(*in.messages, std::move(rendered));
  return rendered;
}

}  // namespace strata
