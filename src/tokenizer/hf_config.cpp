#include "tokenizer/hf_config.h"

#include "core/file_util.h"
#include "core/json.h"

namespace strata::tok {

namespace {

// A special token field: "..." or {"content": "...", ...}; null/absent -> nullopt.
std::optional<std::string> token_string(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

std::optional<bool> bool_field(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

Status read_chat_templates(const Json& value, const std::string& what,
                           std::vector<std::pair<std::string, std::string>>* out) {
  if (value.is_string()) {
    out->emplace_back("default", value.get<std::string>());
    return ok_status();
  }
  if (value.is_array()) {
    for (const auto& e : value) {
      if (!e.is_object() || !e.contains("name") || !e.contains("template") ||
          !e["name"].is_string() || !e["template"].is_string()) {
        return invalid_argument(what +
                                ": chat_template list entries need string 'name' and "
                                "'template' fields");
      }
      out->emplace_back(e["name"].get<std::string>(), e["template"].get<std::string>());
    }
    // The default template goes first.
    for (size_t i = 1; i < out->size(); ++i) {
      if ((*out)[i].first == "default") std::swap((*out)[0], (*out)[i]);
    }
    return ok_status();
  }
  if (value.is_null()) return ok_status();
  return invalid_argument(what + ": chat_template must be a string or a list of templates");
}

}  // namespace

Result<HfTokenizerConfig> read_hf_tokenizer_config(const std::string& dir) {
  HfTokenizerConfig cfg;
  std::string path = path_join(dir, "tokenizer_config.json");
  if (file_exists(path)) {
    STRATA_ASSIGN_OR_RETURN(cfg.raw, read_file(path));
    STRATA_ASSIGN_OR_RETURN(Json j, parse_json(cfg.raw, "'" + path + "'"));
    if (!j.is_object()) return invalid_argument("'" + path + "' must hold a JSON object");
    cfg.present = true;
    if (j.contains("tokenizer_class") && j["tokenizer_class"].is_string()) {
      cfg.tokenizer_class = j["tokenizer_class"].get<std::string>();
    }
    cfg.bos_token = token_string(j, "bos_token");
    cfg.eos_token = token_string(j, "eos_token");
    cfg.unk_token = token_string(j, "unk_token");
    cfg.pad_token = token_string(j, "pad_token");
    cfg.add_bos_token = bool_field(j, "add_bos_token");
    cfg.add_eos_token = bool_field(j, "add_eos_token");
    cfg.add_prefix_space = bool_field(j, "add_prefix_space");
    cfg.legacy = bool_field(j, "legacy");
    cfg.clean_up_tokenization_spaces = bool_field(j, "clean_up_tokenization_spaces");
    if (j.contains("chat_template")) {
      STRATA_RETURN_IF_ERROR(
          read_chat_templates(j["chat_template"], "'" + path + "'", &cfg.chat_templates));
    }
    if (auto it = j.find("added_tokens_decoder"); it != j.end() && it->is_object()) {
      for (const auto& [key, value] : it->items()) {
        AddedToken t;
        try {
          size_t used = 0;
          long id = std::stol(key, &used);
          if (used != key.size() || id < 0 || id > INT32_MAX) throw std::invalid_argument(key);
          t.id = static_cast<int32_t>(id);
        } catch (const std::exception&) {
          return invalid_argument("'" + path + "': added_tokens_decoder key '" + key +
                                  "' is not a token id");
        }
        if (!value.is_object() || !value.contains("content") || !value["content"].is_string()) {
          return invalid_argument("'" + path + "': added_tokens_decoder[" + key +
                                  "] needs a string 'content'");
        }
        t.content = value["content"].get<std::string>();
        // bool_field, not value(): a flag that is not a boolean must not throw out of here.
        t.special = bool_field(value, "special").value_or(false);
        t.lstrip = bool_field(value, "lstrip").value_or(false);
        t.rstrip = bool_field(value, "rstrip").value_or(false);
        t.single_word = bool_field(value, "single_word").value_or(false);
        t.normalized = bool_field(value, "normalized").value_or(!t.special);
        cfg.added_tokens_decoder.push_back(std::move(t));
      }
    }
  }
  // special_tokens_map.json fills special token strings the config does not set.
  std::string map_path = path_join(dir, "special_tokens_map.json");
  if (file_exists(map_path)) {
    STRATA_ASSIGN_OR_RETURN(Json m, read_json_file(map_path));
    if (m.is_object()) {
      if (!cfg.bos_token) cfg.bos_token = token_string(m, "bos_token");
      if (!cfg.eos_token) cfg.eos_token = token_string(m, "eos_token");
      if (!cfg.unk_token) cfg.unk_token = token_string(m, "unk_token");
      if (!cfg.pad_token) cfg.pad_token = token_string(m, "pad_token");
    }
  }
  // Newer transformers keep the template in its own file, which takes precedence.
  std::string jinja_path = path_join(dir, "chat_template.jinja");
  std::string ct_json_path = path_join(dir, "chat_template.json");
  if (file_exists(jinja_path)) {
    STRATA_ASSIGN_OR_RETURN(std::string text, read_file(jinja_path));
    cfg.chat_templates.clear();
    cfg.chat_templates.emplace_back("default", std::move(text));
  } else if (file_exists(ct_json_path)) {
    STRATA_ASSIGN_OR_RETURN(Json c, read_json_file(ct_json_path));
    if (c.is_object() && c.contains("chat_template")) {
      cfg.chat_templates.clear();
      STRATA_RETURN_IF_ERROR(
          read_chat_templates(c["chat_template"], "'" + ct_json_path + "'", &cfg.chat_templates));
    }
  }
  return cfg;
}

std::optional<int32_t> find_token(const TokenizerParts& parts, std::string_view piece) {
  for (const auto& t : parts.added_tokens) {
    if (t.content == piece) return t.id;
  }
  return parts.model ? parts.model->piece_to_id(piece) : std::nullopt;
}

void finish_special_token_info(TokenizerParts* parts) {
  TokenizerInfo& info = parts->info;
  info.add_bos = !parts->prefix_ids.empty();
  info.add_eos = !parts->suffix_ids.empty();
  // Without a configured BOS/EOS, the token the post-processor adds is the best statement of it.
  auto piece = [&](int32_t id) {
    for (const auto& t : parts->added_tokens) {
      if (t.id == id) return t.content;
    }
    return parts->model ? parts->model->id_to_piece(id) : std::string();
  };
  if (!info.bos_id && parts->prefix_ids.size() == 1) {
    info.bos_id = parts->prefix_ids[0];
    info.bos_token = piece(*info.bos_id);
  }
  if (!info.eos_id && parts->suffix_ids.size() == 1) {
    info.eos_id = parts->suffix_ids[0];
    info.eos_token = piece(*info.eos_id);
  }
}

Status apply_hf_tokenizer_config(const HfTokenizerConfig& config, TokenizerParts* parts) {
  TokenizerInfo& info = parts->info;
  info.config_json = config.raw;
  info.tokenizer_class = config.tokenizer_class;
  info.chat_templates = config.chat_templates;
  if (config.clean_up_tokenization_spaces) {
    info.clean_up_tokenization_spaces = *config.clean_up_tokenization_spaces;
  }
  auto resolve = [&](const std::optional<std::string>& s, std::string* text,
                     std::optional<int32_t>* id) {
    if (!s) return;
    *text = *s;
    *id = find_token(*parts, *s);
  };
  resolve(config.bos_token, &info.bos_token, &info.bos_id);
  resolve(config.eos_token, &info.eos_token, &info.eos_id);
  resolve(config.unk_token, &info.unk_token, &info.unk_id);
  resolve(config.pad_token, &info.pad_token, &info.pad_id);

  // transformers' Llama/Gemma fast tokenizers rebuild the post-processor from these flags
  // (defaults: BOS on, EOS off); other classes keep the tokenizer's own post-processor.
  const std::string& cls = config.tokenizer_class;
  bool rebuilds = cls == "LlamaTokenizer" || cls == "LlamaTokenizerFast" ||
                  cls == "CodeLlamaTokenizer" || cls == "CodeLlamaTokenizerFast" ||
                  cls == "GemmaTokenizer" || cls == "GemmaTokenizerFast";
  if (rebuilds) {
    bool add_bos = config.add_bos_token.value_or(true);
    bool add_eos = config.add_eos_token.value_or(false);
    if (add_bos && !info.bos_id) {
      return invalid_argument(
          "tokenizer_config.json asks for a BOS token but bos_token is not "
          "set or not in the vocabulary");
    }
    if (add_eos && !info.eos_id) {
      return invalid_argument(
          "tokenizer_config.json asks for an EOS token but eos_token is not "
          "set or not in the vocabulary");
    }
    parts->prefix_ids.clear();
    parts->suffix_ids.clear();
    if (add_bos) parts->prefix_ids.push_back(*info.bos_id);
    if (add_eos) parts->suffix_ids.push_back(*info.eos_id);
  }
  finish_special_token_info(parts);
  return ok_status();
}

}  // namespace strata::tok
