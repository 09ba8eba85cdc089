#include "tokenizer/hf_json.h"

#include <algorithm>

#include "core/json.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/hf_config.h"
#include "tokenizer/sp_models.h"

namespace strata::tok {

namespace {

// Parsing context: names the file and the component in every error.
struct Ctx {
  std::string what;
  Status error(const std::string& where, const std::string& msg) const {
    return invalid_argument(what + ": " + where + ": " + msg);
  }
  Status unsupported(const std::string& where, const std::string& type) const {
    return unimplemented(what + ": " + where + " type '" + type +
                         "' is not supported by Strata's tokenizer");
  }
};

// An integer that fits in int32. JSON floats and larger numbers are errors: nlohmann's
// get<int32_t>() would convert them unchecked (undefined behaviour for floats out of range).
Result<int32_t> int32_of(const Ctx& ctx, const Json& v, const std::string& where) {
  bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= INT32_MAX
                                     : v.is_number_integer() && v.get<int64_t>() >= INT32_MIN &&
                                           v.get<int64_t>() <= INT32_MAX;
  if (!fits) return ctx.error(where, "expected a 32-bit integer, got " + v.dump());
  return static_cast<int32_t>(v.get<int64_t>());
}

// An optional int32 field of `j` (`fallback` when absent).
Result<int32_t> int32_field(const Ctx& ctx, const Json& j, const char* key, int32_t fallback,
                            const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return fallback;
  return int32_of(ctx, *it, where + " " + key);
}

std::string type_of(const Json& j) {
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// {"String": "..."} or {"Regex": "..."}: a literal or regex pattern.
Result<std::shared_ptr<const Regex>> pattern_regex(const Ctx& ctx, const std::string& where,
                                                   const Json& pattern, std::string* literal) {
  if (!pattern.is_object())
    return ctx.error(where, "pattern must be {\"String\": ...} or {\"Regex\": ...}");
  if (pattern.contains("Regex")) {
    auto re = Regex::compile(pattern["Regex"].get<std::string>());
    if (!re.ok()) return ctx.error(where, re.status().message());
    return re;
  }
  if (pattern.contains("String")) {
    if (literal != nullptr) {
      *literal = pattern["String"].get<std::string>();
      return std::shared_ptr<const Regex>();
    }
    return Regex::literal(pattern["String"].get<std::string>());
  }
  return ctx.error(where, "pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

Status parse_normalizer(const Ctx& ctx, const Json& j, Normalizer* out) {
  if (j.is_null()) return ok_status();
  std::string type = type_of(j);
  using K = NormalizerStep::Kind;
  NormalizerStep step;
  if (type == "Sequence") {
    for (const auto& n : j.at("normalizers")) STRATA_RETURN_IF_ERROR(parse_normalizer(ctx, n, out));
    return ok_status();
  } else if (type == "NFC") {
    step.kind = K::kNfc;
  } else if (type == "NFD") {
    step.kind = K::kNfd;
  } else if (type == "NFKC") {
    step.kind = K::kNfkc;
  } else if (type == "NFKD") {
    step.kind = K::kNfkd;
  } else if (type == "Lowercase") {
    step.kind = K::kLowercase;
  } else if (type == "StripAccents") {
    step.kind = K::kStripAccents;
  } else if (type == "Strip") {
    step.kind = K::kStrip;
    step.left = j.value("strip_left", true);
    step.right = j.value("strip_right", true);
  } else if (type == "Prepend") {
    step.kind = K::kPrepend;
    step.pattern = j.at("prepend").get<std::string>();
  } else if (type == "Replace") {
    step.kind = K::kReplace;
    STRATA_ASSIGN_OR_RETURN(
        step.regex, pattern_regex(ctx, "normalizer Replace", j.at("pattern"), &step.pattern));
    step.content = j.at("content").get<std::string>();
  } else if (type == "Precompiled" &&
             (!j.contains("precompiled_charsmap") || j["precompiled_charsmap"].is_null() ||
              j["precompiled_charsmap"] == "")) {
    return ok_status();  // an empty character map changes nothing
  } else {
    return ctx.unsupported("normalizer", type.empty() ? "(missing)" : type);
  }
  out->add(std::move(step));
  return ok_status();
}

Result<SplitBehavior> parse_behavior(const Ctx& ctx, const std::string& s) {
  if (s == "Removed") return SplitBehavior::kRemoved;
  if (s == "Isolated") return SplitBehavior::kIsolated;
  if (s == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (s == "Contiguous") return SplitBehavior::kContiguous;
  return ctx.error("pre_tokenizer Split", "unknown behavior '" + s + "'");
}

PreTokenizerStep::Prepend parse_prepend_scheme(const Json& j) {
  if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
    std::string s = j["prepend_scheme"].get<std::string>();
    if (s == "first") return PreTokenizerStep::Prepend::kFirst;
    if (s == "never") return PreTokenizerStep::Prepend::kNever;
    return PreTokenizerStep::Prepend::kAlways;
  }
  // Older files: add_prefix_space (default true).
  return j.value("add_prefix_space", true) ? PreTokenizerStep::Prepend::kAlways
                                           : PreTokenizerStep::Prepend::kNever;
}

Status parse_pre_tokenizer(const Ctx& ctx, const Json& j, PreTokenizer* out) {
  if (j.is_null()) return ok_status();
  std::string type = type_of(j);
  using K = PreTokenizerStep::Kind;
  PreTokenizerStep step;
  if (type == "Sequence") {
    for (const auto& p : j.at("pretokenizers"))
      STRATA_RETURN_IF_ERROR(parse_pre_tokenizer(ctx, p, out));
    return ok_status();
  } else if (type == "ByteLevel") {
    step.kind = K::kByteLevel;
    step.add_prefix_space = j.value("add_prefix_space", true);
    if (j.value("use_regex", true)) {
      STRATA_ASSIGN_OR_RETURN(step.regex, Regex::compile(kGpt2Pattern));
    }
  } else if (type == "Split") {
    step.kind = K::kSplit;
    STRATA_ASSIGN_OR_RETURN(step.regex,
                            pattern_regex(ctx, "pre_tokenizer Split", j.at("pattern"), nullptr));
    STRATA_ASSIGN_OR_RETURN(step.behavior,
                            parse_behavior(ctx, j.at("behavior").get<std::string>()));
    step.invert = j.value("invert", false);
  } else if (type == "Metaspace") {
    step.kind = K::kMetaspace;
    step.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    step.prepend = parse_prepend_scheme(j);
    step.split = j.value("split", true);
  } else if (type == "Digits") {
    step.kind = K::kDigits;
    step.individual_digits = j.value("individual_digits", false);
  } else if (type == "Whitespace") {
    step.kind = K::kWhitespace;
    STRATA_ASSIGN_OR_RETURN(step.regex, Regex::compile("\\w+|[^\\w\\s]+"));
  } else if (type == "WhitespaceSplit") {
    step.kind = K::kWhitespaceSplit;
  } else if (type == "Punctuation") {
    step.kind = K::kPunctuation;
    STRATA_ASSIGN_OR_RETURN(step.behavior,
                            parse_behavior(ctx, j.value("behavior", std::string("Isolated"))));
  } else if (type == "CharDelimiterSplit") {
    step.kind = K::kSplit;
    STRATA_ASSIGN_OR_RETURN(step.regex, Regex::literal(j.at("delimiter").get<std::string>()));
    step.behavior = SplitBehavior::kRemoved;
  } else {
    return ctx.unsupported("pre_tokenizer", type.empty() ? "(missing)" : type);
  }
  out->add(std::move(step));
  return ok_status();
}

Status parse_decoder(const Ctx& ctx, const Json& j, Decoder* out) {
  if (j.is_null()) return ok_status();
  std::string type = type_of(j);
  using K = DecoderStep::Kind;
  DecoderStep step;
  if (type == "Sequence") {
    for (const auto& d : j.at("decoders")) STRATA_RETURN_IF_ERROR(parse_decoder(ctx, d, out));
    return ok_status();
  } else if (type == "ByteLevel") {
    step.kind = K::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = K::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = K::kFuse;
  } else if (type == "Strip") {
    step.kind = K::kStrip;
    step.content = j.at("content").get<std::string>();
    STRATA_ASSIGN_OR_RETURN(step.start, int32_field(ctx, j, "start", 0, "decoder Strip"));
    STRATA_ASSIGN_OR_RETURN(step.stop, int32_field(ctx, j, "stop", 0, "decoder Strip"));
  } else if (type == "Replace") {
    step.kind = K::kReplace;
    STRATA_ASSIGN_OR_RETURN(step.regex,
                            pattern_regex(ctx, "decoder Replace", j.at("pattern"), &step.pattern));
    step.content = j.at("content").get<std::string>();
  } else if (type == "Metaspace") {
    step.kind = K::kMetaspace;
    step.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    step.strip_first = parse_prepend_scheme(j) != PreTokenizerStep::Prepend::kNever;
  } else {
    return ctx.unsupported("decoder", type.empty() ? "(missing)" : type);
  }
  out->add(std::move(step));
  return ok_status();
}

// Resolves a special token name used by a post-processor to its ids.
Result<std::vector<int32_t>> special_ids(const Ctx& ctx, const Json& specials,
                                         const std::string& name) {
  auto it = specials.find(name);
  if (it == specials.end()) {
    return ctx.error("post_processor", "special token '" + name + "' is not in special_tokens");
  }
  const Json& ids_json = it->at("ids");
  if (!ids_json.is_array())
    return ctx.error("post_processor", "special token '" + name + "' ids must be a list");
  std::vector<int32_t> ids;
  for (const Json& id : ids_json) {
    STRATA_ASSIGN_OR_RETURN(int32_t v, int32_of(ctx, id, "post_processor special token ids"));
    ids.push_back(v);
  }
  return ids;
}

Status parse_post_processor(const Ctx& ctx, const Json& j, TokenizerParts* parts) {
  if (j.is_null()) return ok_status();
  std::string type = type_of(j);
  if (type == "Sequence") {
    for (const auto& p : j.at("processors"))
      STRATA_RETURN_IF_ERROR(parse_post_processor(ctx, p, parts));
    return ok_status();
  }
  if (type == "ByteLevel") return ok_status();  // only adjusts offsets
  if (type == "TemplateProcessing") {
    std::vector<int32_t> prefix, suffix;
    bool seen_sequence = false;
    for (const auto& item : j.at("single")) {
      if (item.contains("Sequence")) {
        seen_sequence = true;
      } else if (item.contains("SpecialToken")) {
        STRATA_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                                special_ids(ctx, j.at("special_tokens"),
                                            item["SpecialToken"].at("id").get<std::string>()));
        auto& dst = seen_sequence ? suffix : prefix;
        dst.insert(dst.end(), ids.begin(), ids.end());
      } else {
        return ctx.error("post_processor TemplateProcessing",
                         "unknown template item " + item.dump());
      }
    }
    parts->prefix_ids = std::move(prefix);
    parts->suffix_ids = std::move(suffix);
    return ok_status();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    STRATA_ASSIGN_OR_RETURN(int32_t cls, int32_of(ctx, j.at("cls").at(1), "post_processor cls"));
    STRATA_ASSIGN_OR_RETURN(int32_t sep, int32_of(ctx, j.at("sep").at(1), "post_processor sep"));
    parts->prefix_ids = {cls};
    parts->suffix_ids = {sep};
    return ok_status();
  }
  return ctx.unsupported("post_processor", type.empty() ? "(missing)" : type);
}

bool has_byte_level(const PreTokenizer& pre) {
  for (const auto& s : pre.steps()) {
    if (s.kind == PreTokenizerStep::Kind::kByteLevel) return true;
  }
  return false;
}

Status parse_bpe(const Ctx& ctx, const Json& m, bool byte_level, TokenizerParts* parts) {
  if (m.contains("continuing_subword_prefix") && !m["continuing_subword_prefix"].is_null() &&
      m["continuing_subword_prefix"] != "") {
    return unimplemented(ctx.what + ": BPE continuing_subword_prefix is not supported");
  }
  if (m.contains("end_of_word_suffix") && !m["end_of_word_suffix"].is_null() &&
      m["end_of_word_suffix"] != "") {
    return unimplemented(ctx.what + ": BPE end_of_word_suffix is not supported");
  }
  const Json& vocab_json = m.at("vocab");
  if (!vocab_json.is_object()) return ctx.error("model", "BPE vocab must be an object");
  int64_t max_id = -1;
  for (const auto& [piece, id] : vocab_json.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return ctx.error("model", "vocab entry '" + piece + "' has an invalid id");
    }
    max_id = std::max(max_id, id.get<int64_t>());
  }
  if (!plausible_max_id(max_id, vocab_json.size()))
    return ctx.error("model", "vocab has " + std::to_string(vocab_json.size()) +
                                  " entries but an id of " + std::to_string(max_id));
  Vocab vocab;
  vocab.reserve(vocab_json.size());
  for (const auto& [piece, id] : vocab_json.items()) vocab.set(id.get<int32_t>(), piece);
  std::vector<std::pair<std::string, std::string>> merges;
  const Json& merges_json = m.at("merges");
  if (!merges_json.is_array()) return ctx.error("model", "BPE merges must be a list");
  merges.reserve(merges_json.size());
  for (const auto& e : merges_json) {
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos)
        return ctx.error("model", "merge '" + s + "' is not 'left right'");
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (e.is_array() && e.size() == 2) {
      merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      return ctx.error("model", "merge " + e.dump() + " is not a pair");
    }
  }
  BpeConfig config;
  config.byte_level = byte_level;
  config.byte_fallback = m.value("byte_fallback", false);
  config.ignore_merges = m.value("ignore_merges", false);
  config.fuse_unk = m.value("fuse_unk", false);
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    config.unk_token = m["unk_token"].get<std::string>();
  }
  auto model = BpeModel::create(std::move(vocab), merges, config);
  if (!model.ok()) return model.status().with_context(ctx.what);
  parts->model = std::move(model).value();
  return ok_status();
}

Status parse_unigram(const Ctx& ctx, const Json& m, TokenizerParts* parts) {
  std::vector<SpPiece> pieces;
  for (const auto& e : m.at("vocab")) {
    if (!e.is_array() || e.size() != 2)
      return ctx.error("model", "Unigram vocab entries are [piece, score]");
    pieces.push_back({e[0].get<std::string>(), e[1].get<float>(), SpPiece::Type::kNormal});
  }
  std::optional<int32_t> unk;
  if (m.contains("unk_id") && m["unk_id"].is_number_integer()) unk = m["unk_id"].get<int32_t>();
  auto model = UnigramModel::create(std::move(pieces), unk, m.value("byte_fallback", false));
  if (!model.ok()) return model.status().with_context(ctx.what);
  parts->model = std::move(model).value();
  return ok_status();
}

Result<TokenizerParts> parse_impl(const Ctx& ctx, const Json& j) {
  if (!j.is_object()) return ctx.error("top level", "expected a JSON object");
  TokenizerParts parts;
  parts.info.format = "tokenizer.json";
  STRATA_RETURN_IF_ERROR(parse_normalizer(ctx, j.value("normalizer", Json()), &parts.normalizer));
  STRATA_RETURN_IF_ERROR(
      parse_pre_tokenizer(ctx, j.value("pre_tokenizer", Json()), &parts.pre_tokenizer));
  STRATA_RETURN_IF_ERROR(parse_decoder(ctx, j.value("decoder", Json()), &parts.decoder));
  if (!j.contains("model") || !j["model"].is_object()) return ctx.error("model", "missing");
  const Json& m = j["model"];
  std::string type = type_of(m);
  if (type.empty()) type = m.contains("merges") ? "BPE" : "";
  if (type == "BPE") {
    STRATA_RETURN_IF_ERROR(parse_bpe(ctx, m, has_byte_level(parts.pre_tokenizer), &parts));
  } else if (type == "Unigram") {
    STRATA_RETURN_IF_ERROR(parse_unigram(ctx, m, &parts));
  } else {
    return ctx.unsupported("model", type.empty() ? "(missing)" : type);
  }
  parts.info.model = parts.model->describe();
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const auto& a : j["added_tokens"]) {
      AddedToken t;
      const Json& id = a.at("id");
      if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN || id.get<int64_t>() > INT32_MAX)
        return ctx.error("added_tokens", "token id " + id.dump() + " is not a valid id");
      t.id = id.get<int32_t>();
      t.content = a.at("content").get<std::string>();
      t.special = a.value("special", false);
      t.lstrip = a.value("lstrip", false);
      t.rstrip = a.value("rstrip", false);
      t.single_word = a.value("single_word", false);
      t.normalized = a.value("normalized", !t.special);
      if (t.id < 0) return ctx.error("added_tokens", "token '" + t.content + "' has a negative id");
      parts.added_tokens.push_back(std::move(t));
    }
  }
  STRATA_RETURN_IF_ERROR(parse_post_processor(ctx, j.value("post_processor", Json()), &parts));
  return parts;
}

}  // namespace

Result<TokenizerParts> parse_tokenizer_json(const std::string& text, const std::string& what) {
  STRATA_ASSIGN_OR_RETURN(Json j, parse_json(text, what));
  Ctx ctx{what};
  try {
    return parse_impl(ctx, j);
  } catch (const Json::exception& e) {
    return invalid_argument(what + ": unexpected structure: " + e.what());
  }
}

}  // namespace strata::tok
