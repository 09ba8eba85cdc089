// Tokenizers embedded in GGUF files (tokenizer.ggml.*), with llama.cpp's conventions:
//  - "llama": SentencePiece BPE over tokens/scores/token_type, "▁" dummy prefix per text segment
//    (tokenizer.ggml.add_space_prefix), byte fallback through <0xXX> tokens;
//  - "gpt2": byte-level BPE over tokens/merges with the pre-tokenizer named by tokenizer.ggml.pre;
//  - "bert": WordPiece with BERT's uncased normalisation and pre-tokenizer. llama.cpp's converter
//    stores word-initial pieces with a "▁" prefix and continuation pieces without BERT's "##";
//    the original pieces are restored. GGUF does not record whether the model was cased;
//    like llama.cpp, the text is lower-cased (and, as BERT does for uncased models, its accents
//    stripped).
// Control, unknown and user-defined tokens are matched in the text as added tokens.
#include <algorithm>
#include <cstdio>
#include <string>

#include "core/logging.h"
#include "io/gguf.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/hf_config.h"
#include "tokenizer/loaders.h"
#include "tokenizer/presets.h"
#include "tokenizer/sp_models.h"
#include "tokenizer/unicode.h"
#include "tokenizer/wordpiece.h"

namespace strata::tok {

namespace {

// llama.cpp token types (same numbering as SentencePiece's piece types).
constexpr int64_t kTypeNormal = 1, kTypeUnknown = 2, kTypeControl = 3, kTypeUserDefined = 4,
                  kTypeUnused = 5, kTypeByte = 6;

template <typename T>
Result<T> value_or_error(Result<T> r, const std::string& what) {
  if (!r.ok()) return r.status().with_context(what);
  return r;
}

Status read_special_ids(const io::GgufFile& f, TokenizerParts* parts, int32_t n) {
  auto id_of = [&](const char* key, std::optional<int32_t>* out, std::string* text) -> Status {
    STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> v, f.get_int(key));
    // Absent, or -1 (often stored as the u32 0xFFFFFFFF) for "none".
    if (!v || *v < 0 || *v == 0xFFFFFFFFll) return ok_status();
    if (*v >= n) {
      return invalid_argument("'" + f.path() + "': " + key + " = " + std::to_string(*v) +
                              " is outside the vocabulary of " + std::to_string(n) + " tokens");
    }
    *out = static_cast<int32_t>(*v);
    *text = parts->model->id_to_piece(**out);
    return ok_status();
  };
  TokenizerInfo& info = parts->info;
  STRATA_RETURN_IF_ERROR(id_of("tokenizer.ggml.bos_token_id", &info.bos_id, &info.bos_token));
  STRATA_RETURN_IF_ERROR(id_of("tokenizer.ggml.eos_token_id", &info.eos_id, &info.eos_token));
  STRATA_RETURN_IF_ERROR(id_of("tokenizer.ggml.unknown_token_id", &info.unk_id, &info.unk_token));
  STRATA_RETURN_IF_ERROR(id_of("tokenizer.ggml.padding_token_id", &info.pad_id, &info.pad_token));
  return ok_status();
}

Status read_chat_templates(const io::GgufFile& f, TokenizerInfo* info) {
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> main, f.get_string("tokenizer.chat_template"));
  if (main) info->chat_templates.emplace_back("default", *main);
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string_view> names,
                          f.get_string_array("tokenizer.chat_templates"));
  for (auto name : names) {
    STRATA_ASSIGN_OR_RETURN(std::optional<std::string> t,
                            f.get_string("tokenizer.chat_template." + std::string(name)));
    if (t) info->chat_templates.emplace_back(std::string(name), *t);
  }
  return ok_status();
}

// Control/unknown (special) and user-defined (not special) tokens are matched in the text.
void add_typed_tokens(const std::vector<std::string_view>& tokens,
                      const std::vector<int64_t>& types, TokenizerParts* parts) {
  for (size_t id = 0; id < tokens.size() && id < types.size(); ++id) {
    int64_t t = types[id];
    if (t != kTypeControl && t != kTypeUnknown && t != kTypeUserDefined) continue;
    if (tokens[id].empty()) continue;
    AddedToken a;
    a.id = static_cast<int32_t>(id);
    a.content = std::string(tokens[id]);
    a.special = t != kTypeUserDefined;
    parts->added_tokens.push_back(std::move(a));
  }
}

Result<TokenizerParts> load_llama_vocab(const io::GgufFile& f,
                                        const std::vector<std::string_view>& tokens,
                                        const std::vector<int64_t>& types) {
  const std::string what = "'" + f.path() + "'";
  STRATA_ASSIGN_OR_RETURN(std::vector<float> scores, f.get_float_array("tokenizer.ggml.scores"));
  if (!scores.empty() && scores.size() != tokens.size()) {
    return invalid_argument(what + ": tokenizer.ggml.scores has " + std::to_string(scores.size()) +
                            " entries for " + std::to_string(tokens.size()) + " tokens");
  }
  std::vector<SpPiece> pieces(tokens.size());
  bool all_bytes = true;
  for (size_t id = 0; id < tokens.size(); ++id) {
    pieces[id].piece = std::string(tokens[id]);
    pieces[id].score = scores.empty() ? 0.0f : scores[id];
    int64_t t = id < types.size() ? types[id] : kTypeNormal;
    if (t < kTypeNormal || t > kTypeByte) t = kTypeNormal;
    pieces[id].type = static_cast<SpPiece::Type>(t);
  }
  for (int b = 0; b < 256 && all_bytes; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    all_bytes = std::any_of(pieces.begin(), pieces.end(),
                            [&](const SpPiece& p) { return p.piece == name; });
  }
  std::optional<int32_t> unk;
  STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> unk_id,
                          f.get_int("tokenizer.ggml.unknown_token_id"));
  if (unk_id && *unk_id >= 0 && *unk_id < static_cast<int64_t>(tokens.size())) {
    unk = static_cast<int32_t>(*unk_id);
  }
  auto model = SpmBpeModel::create(std::move(pieces), unk, all_bytes);
  if (!model.ok()) return model.status().with_context(what);
  TokenizerParts parts;
  parts.model = std::move(model).value();
  STRATA_ASSIGN_OR_RETURN(std::optional<bool> space_prefix,
                          f.get_bool("tokenizer.ggml.add_space_prefix"));
  STRATA_ASSIGN_OR_RETURN(std::optional<bool> remove_ws,
                          f.get_bool("tokenizer.ggml.remove_extra_whitespaces"));
  NormalizerStep ws;
  ws.kind = NormalizerStep::Kind::kSpmWhitespace;
  ws.add_dummy_prefix = space_prefix.value_or(true);
  ws.remove_extra_whitespaces = remove_ws.value_or(false);
  parts.normalizer.add(ws);
  parts.decoder.add(
      DecoderStep{.kind = DecoderStep::Kind::kReplace, .pattern = "\xE2\x96\x81", .content = " "});
  parts.decoder.add(DecoderStep{.kind = DecoderStep::Kind::kByteFallback});
  parts.decoder.add(DecoderStep{.kind = DecoderStep::Kind::kFuse});
  if (ws.add_dummy_prefix) {
    parts.decoder.add(DecoderStep{.kind = DecoderStep::Kind::kStrip, .content = " ", .start = 1});
  }
  add_typed_tokens(tokens, types, &parts);
  return parts;
}

Result<TokenizerParts> load_gpt2_vocab(const io::GgufFile& f,
                                       const std::vector<std::string_view>& tokens,
                                       const std::vector<int64_t>& types, bool* default_add_bos) {
  const std::string what = "'" + f.path() + "'";
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string_view> merge_lines,
                          f.get_string_array("tokenizer.ggml.merges"));
  if (merge_lines.empty()) {
    return invalid_argument(what +
                            ": tokenizer.ggml.merges is missing or empty; a byte-level BPE "
                            "vocabulary needs its merges (re-convert the model with them)");
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merge_lines.size());
  for (size_t i = 0; i < merge_lines.size(); ++i) {
    std::string_view line = merge_lines[i];
    size_t sp = line.find(' ', 1);
    if (sp == std::string_view::npos) {
      return invalid_argument(what + ": tokenizer.ggml.merges[" + std::to_string(i) + "] '" +
                              std::string(line) + "' is not 'left right'");
    }
    merges.emplace_back(std::string(line.substr(0, sp)), std::string(line.substr(sp + 1)));
  }
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> pre, f.get_string("tokenizer.ggml.pre"));
  if (!pre || *pre == "default") {
    STRATA_LOG(WARNING) << f.path()
                        << ": no tokenizer.ggml.pre pre-tokenizer type; assuming GPT-2's";
    pre = "gpt2";
  }
  STRATA_ASSIGN_OR_RETURN(BpePreset preset, value_or_error(bpe_preset(*pre), what));
  *default_add_bos = preset.add_bos;
  Vocab vocab;
  vocab.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    vocab.set(static_cast<int32_t>(id), std::string(tokens[id]));
  }
  BpeFilesOptions options;
  options.preset = preset.name;
  STRATA_ASSIGN_OR_RETURN(TokenizerParts parts,
                          byte_level_bpe_parts(std::move(vocab), merges, options, what));
  add_typed_tokens(tokens, types, &parts);
  return parts;
}

// The "▁word" / "piece" form llama.cpp stores back to BERT's "word" / "##piece"; control tokens
// are stored as they are.
std::string bert_piece(std::string_view stored, int64_t type) {
  if (type == kTypeControl) return std::string(stored);
  if (stored.starts_with(kSpmSpace)) return std::string(stored.substr(kSpmSpace.size()));
  return "##" + std::string(stored);
}

Result<TokenizerParts> load_bert_vocab(const io::GgufFile& f,
                                       const std::vector<std::string_view>& tokens,
                                       const std::vector<int64_t>& types) {
  const std::string what = "'" + f.path() + "'";
  std::vector<std::string> pieces;
  pieces.reserve(tokens.size());
  Vocab vocab;
  vocab.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    pieces.push_back(bert_piece(tokens[id], id < types.size() ? types[id] : kTypeNormal));
    vocab.set(static_cast<int32_t>(id), pieces.back());
  }
  WordPieceConfig config;
  STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> unk_id,
                          f.get_int("tokenizer.ggml.unknown_token_id"));
  int64_t unk = unk_id.value_or(100);  // llama.cpp's default for BERT vocabularies
  if (unk < 0 || unk >= static_cast<int64_t>(tokens.size())) {
    return invalid_argument(what + ": tokenizer.ggml.unknown_token_id = " + std::to_string(unk) +
                            " is outside the vocabulary of " + std::to_string(tokens.size()) +
                            " tokens (a WordPiece vocabulary needs an unknown token)");
  }
  config.unk_token = pieces[unk];
  auto model = WordPieceModel::create(std::move(vocab), config);
  if (!model.ok()) return model.status().with_context(what);
  TokenizerParts parts;
  parts.model = std::move(model).value();
  parts.normalizer.add(NormalizerStep{.kind = NormalizerStep::Kind::kBertClean});
  parts.normalizer.add(NormalizerStep{.kind = NormalizerStep::Kind::kNfd});
  parts.normalizer.add(NormalizerStep{.kind = NormalizerStep::Kind::kStripAccents});
  parts.normalizer.add(NormalizerStep{.kind = NormalizerStep::Kind::kLowercase});
  parts.pre_tokenizer.add(PreTokenizerStep{.kind = PreTokenizerStep::Kind::kWhitespaceSplit});
  parts.pre_tokenizer.add(PreTokenizerStep{.kind = PreTokenizerStep::Kind::kPunctuation,
                                           .behavior = SplitBehavior::kIsolated});
  parts.decoder.add(DecoderStep{.kind = DecoderStep::Kind::kWordPiece});
  std::vector<std::string_view> views(pieces.begin(), pieces.end());
  add_typed_tokens(views, types, &parts);
  // [CLS] text [SEP] (llama.cpp: add_bos with the CLS id, add_sep).
  STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> cls, f.get_int("tokenizer.ggml.cls_token_id"));
  STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> sep,
                          f.get_int("tokenizer.ggml.seperator_token_id"));
  STRATA_ASSIGN_OR_RETURN(std::optional<bool> add_cls, f.get_bool("tokenizer.ggml.add_bos_token"));
  STRATA_ASSIGN_OR_RETURN(std::optional<bool> add_sep, f.get_bool("tokenizer.ggml.add_sep_token"));
  auto in_vocab = [&](std::optional<int64_t> id) {
    return id && *id >= 0 && *id < static_cast<int64_t>(tokens.size());
  };
  if (add_cls.value_or(true) && in_vocab(cls)) parts.prefix_ids = {static_cast<int32_t>(*cls)};
  if (add_sep.value_or(true) && in_vocab(sep)) parts.suffix_ids = {static_cast<int32_t>(*sep)};
  parts.info.clean_up_tokenization_spaces = true;
  return parts;
}

}  // namespace

Result<TokenizerParts> load_gguf_vocab(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<io::GgufFile> f, io::GgufFile::open(path));
  const std::string what = "'" + path + "'";
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> model, f->get_string("tokenizer.ggml.model"));
  if (!model) {
    return not_found(what +
                     " has no tokenizer (tokenizer.ggml.model is missing); give the "
                     "model's tokenizer directory instead");
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string_view> tokens,
                          f->get_string_array("tokenizer.ggml.tokens"));
  if (tokens.empty()) return invalid_argument(what + ": tokenizer.ggml.tokens is missing or empty");
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> types,
                          f->get_int_array("tokenizer.ggml.token_type"));
  if (!types.empty() && types.size() != tokens.size()) {
    return invalid_argument(what + ": tokenizer.ggml.token_type has " +
                            std::to_string(types.size()) + " entries for " +
                            std::to_string(tokens.size()) + " tokens");
  }
  TokenizerParts parts;
  bool default_add_bos = false;
  if (*model == "llama") {
    STRATA_ASSIGN_OR_RETURN(parts, load_llama_vocab(*f, tokens, types));
    default_add_bos = true;
  } else if (*model == "gpt2") {
    STRATA_ASSIGN_OR_RETURN(parts, load_gpt2_vocab(*f, tokens, types, &default_add_bos));
  } else if (*model == "bert") {
    STRATA_ASSIGN_OR_RETURN(parts, load_bert_vocab(*f, tokens, types));
  } else {
    return unimplemented(what + ": tokenizer.ggml.model '" + *model +
                         "' is not supported (supported: llama, gpt2, bert)");
  }
  auto n = static_cast<int32_t>(tokens.size());
  STRATA_RETURN_IF_ERROR(read_special_ids(*f, &parts, n));
  if (*model != "bert") {  // BERT's [CLS] ... [SEP] is set by load_bert_vocab
    STRATA_ASSIGN_OR_RETURN(std::optional<bool> add_bos,
                            f->get_bool("tokenizer.ggml.add_bos_token"));
    STRATA_ASSIGN_OR_RETURN(std::optional<bool> add_eos,
                            f->get_bool("tokenizer.ggml.add_eos_token"));
    if (add_bos.value_or(default_add_bos) && parts.info.bos_id)
      parts.prefix_ids = {*parts.info.bos_id};
    if (add_eos.value_or(false) && parts.info.eos_id) parts.suffix_ids = {*parts.info.eos_id};
  }
  STRATA_RETURN_IF_ERROR(read_chat_templates(*f, &parts.info));
  finish_special_token_info(&parts);
  parts.info.format = "gguf";
  parts.info.model = parts.model->describe();
  return parts;
}

}  // namespace strata::tok
