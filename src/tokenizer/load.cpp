// Tokenizer::load and the directory-based loaders.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/file_util.h"
#include "core/json.h"
#include "core/strings.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/hf_config.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/loaders.h"
#include "tokenizer/presets.h"
#include "tokenizer/sp_proto.h"

namespace strata {

namespace tok {

namespace {

std::string dir_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

// Adds config tokens whose id the parts do not define yet.
void merge_added_tokens(const std::vector<AddedToken>& extra, TokenizerParts* parts) {
  for (const auto& t : extra) {
    bool known = std::any_of(parts->added_tokens.begin(), parts->added_tokens.end(),
                             [&](const AddedToken& a) { return a.id == t.id; });
    if (!known) parts->added_tokens.push_back(t);
  }
}

// Registers a special token string from the config as a special added token, as transformers
// does for bos/eos/unk/pad, when the vocabulary has it and it is not registered yet.
void add_special_string(const std::optional<std::string>& s, TokenizerParts* parts) {
  if (!s || s->empty()) return;
  for (auto& t : parts->added_tokens) {
    if (t.content == *s) {
      t.special = true;
      return;
    }
  }
  auto id = parts->model->piece_to_id(*s);
  if (!id) return;
  AddedToken t;
  t.id = *id;
  t.content = *s;
  t.special = true;
  parts->added_tokens.push_back(std::move(t));
}

}  // namespace

Result<TokenizerParts> load_tokenizer_json(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, read_file(path));
  STRATA_ASSIGN_OR_RETURN(TokenizerParts parts, parse_tokenizer_json(text, "'" + path + "'"));
  STRATA_ASSIGN_OR_RETURN(HfTokenizerConfig config, read_hf_tokenizer_config(dir_of(path)));
  merge_added_tokens(config.added_tokens_decoder, &parts);
  STRATA_RETURN_IF_ERROR(apply_hf_tokenizer_config(config, &parts));
  return parts;
}

Result<TokenizerParts> byte_level_bpe_parts(
    Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    const BpeFilesOptions& options, const std::string& what) {
  STRATA_ASSIGN_OR_RETURN(BpePreset preset, bpe_preset(options.preset));
  BpeConfig config;
  config.byte_level = true;
  config.ignore_merges = preset.ignore_merges;
  auto model = BpeModel::create(std::move(vocab), merges, config);
  if (!model.ok()) return model.status().with_context(what);

  TokenizerParts parts;
  parts.model = std::move(model).value();
  parts.normalizer = std::move(preset.normalizer);
  parts.pre_tokenizer = std::move(preset.pre_tokenizer);
  if (options.add_prefix_space) {
    PreTokenizer with_prefix;
    for (auto step : parts.pre_tokenizer.steps()) {
      if (step.kind == PreTokenizerStep::Kind::kByteLevel) step.add_prefix_space = true;
      with_prefix.add(std::move(step));
    }
    parts.pre_tokenizer = std::move(with_prefix);
  }
  parts.decoder.add(DecoderStep{.kind = DecoderStep::Kind::kByteLevel});
  parts.added_tokens = options.added_tokens;
  parts.prefix_ids = options.prefix_ids;
  parts.suffix_ids = options.suffix_ids;
  parts.info.format = "vocab.json+merges.txt";
  parts.info.model = parts.model->describe();
  return parts;
}

Result<TokenizerParts> load_bpe_files(const std::string& vocab_path, const std::string& merges_path,
                                      const BpeFilesOptions& options) {
  STRATA_ASSIGN_OR_RETURN(Json vocab_json, read_json_file(vocab_path));
  if (!vocab_json.is_object()) {
    return invalid_argument("'" + vocab_path + "' must map token strings to ids");
  }
  int64_t max_id = -1;
  for (const auto& [piece, id] : vocab_json.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return invalid_argument("'" + vocab_path + "': token '" + piece + "' has an invalid id");
    }
    max_id = std::max(max_id, id.get<int64_t>());
  }
  if (!plausible_max_id(max_id, vocab_json.size())) {
    return invalid_argument("'" + vocab_path + "' has " + std::to_string(vocab_json.size()) +
                            " tokens but an id of " + std::to_string(max_id) +
                            "; the file is corrupt");
  }
  Vocab vocab;
  vocab.reserve(vocab_json.size());
  for (const auto& [piece, id] : vocab_json.items()) vocab.set(id.get<int32_t>(), piece);
  STRATA_ASSIGN_OR_RETURN(std::string merges_text, read_file(merges_path));
  std::vector<std::pair<std::string, std::string>> merges;
  for (const auto& [line_no, line] : text_lines(merges_text)) {
    // Only a "#version" header is a comment: real merges may start with '#'.
    if (line_no == 1 && starts_with(line, "#version")) continue;
    size_t sp = line.find(' ', 1);
    if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos) {
      return invalid_argument("'" + merges_path + "' line " + std::to_string(line_no) +
                              ": expected 'left right', got '" + std::string(line) + "'");
    }
    merges.emplace_back(std::string(line.substr(0, sp)), std::string(line.substr(sp + 1)));
  }
  return byte_level_bpe_parts(std::move(vocab), merges, options, "'" + merges_path + "'");
}

Result<TokenizerParts> load_vocab_merges_dir(const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(HfTokenizerConfig config, read_hf_tokenizer_config(dir));
  BpeFilesOptions options;
  const std::string& cls = config.tokenizer_class;
  options.preset = (cls == "Qwen2Tokenizer" || cls == "Qwen2TokenizerFast") ? "qwen2" : "gpt2";
  options.add_prefix_space = config.add_prefix_space.value_or(false) && options.preset == "gpt2";
  options.added_tokens = config.added_tokens_decoder;
  STRATA_ASSIGN_OR_RETURN(
      TokenizerParts parts,
      load_bpe_files(path_join(dir, "vocab.json"), path_join(dir, "merges.txt"), options));
  for (const auto* s :
       {&config.bos_token, &config.eos_token, &config.unk_token, &config.pad_token}) {
    add_special_string(*s, &parts);
  }
  // GPT2Tokenizer's add_bos_token (off by default); Qwen2Tokenizer adds nothing.
  if (options.preset == "gpt2" && config.add_bos_token.value_or(false) && config.bos_token) {
    if (auto id = find_token(parts, *config.bos_token)) parts.prefix_ids = {*id};
  }
  STRATA_RETURN_IF_ERROR(apply_hf_tokenizer_config(config, &parts));
  return parts;
}

Result<TokenizerParts> load_sentencepiece(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string data, read_file(path));
  std::string what = "'" + path + "'";
  STRATA_ASSIGN_OR_RETURN(SpModelProto proto, parse_sentencepiece_model(data, what));
  if (!proto.precompiled_charsmap.empty() && proto.normalizer_name != "identity") {
    return unimplemented(what + ": SentencePiece normalizer '" + proto.normalizer_name +
                         "' (a precompiled character map) is not supported; use the model's "
                         "tokenizer.json instead");
  }
  if (proto.treat_whitespace_as_suffix) {
    return unimplemented(what + ": treat_whitespace_as_suffix is not supported");
  }
  STRATA_ASSIGN_OR_RETURN(HfTokenizerConfig config, read_hf_tokenizer_config(dir_of(path)));
  TokenizerParts parts;
  std::optional<int32_t> unk;
  if (proto.unk_id >= 0) unk = proto.unk_id;
  std::vector<SpPiece> pieces = proto.pieces;
  if (proto.model_type == 2) {
    auto m = SpmBpeModel::create(std::move(pieces), unk, proto.byte_fallback);
    if (!m.ok()) return m.status().with_context(what);
    parts.model = std::move(m).value();
  } else if (proto.model_type == 1) {
    auto m = UnigramModel::create(std::move(pieces), unk, proto.byte_fallback);
    if (!m.ok()) return m.status().with_context(what);
    parts.model = std::move(m).value();
  } else {
    return unimplemented(what + ": SentencePiece model type " + std::to_string(proto.model_type) +
                         " (WORD/CHAR) is not supported");
  }
  // transformers' legacy behaviour (the default) prefixes every text segment with "▁"; with
  // legacy=false only the start of the input gets it.
  bool legacy = config.legacy.value_or(true);
  NormalizerStep ws;
  ws.kind = NormalizerStep::Kind::kSpmWhitespace;
  ws.remove_extra_whitespaces = proto.remove_extra_whitespaces;
  ws.escape_whitespaces = proto.escape_whitespaces;
  ws.add_dummy_prefix = proto.add_dummy_prefix && legacy;
  parts.normalizer.add(ws);
  if (proto.add_dummy_prefix && !legacy) {
    PreTokenizerStep meta;
    meta.kind = PreTokenizerStep::Kind::kMetaspace;
    meta.prepend = PreTokenizerStep::Prepend::kFirst;
    meta.split = false;
    parts.pre_tokenizer.add(std::move(meta));
  }
  parts.decoder.add(
      DecoderStep{.kind = DecoderStep::Kind::kReplace, .pattern = "\xE2\x96\x81", .content = " "});
  if (proto.byte_fallback) parts.decoder.add(DecoderStep{.kind = DecoderStep::Kind::kByteFallback});
  parts.decoder.add(DecoderStep{.kind = DecoderStep::Kind::kFuse});
  if (proto.add_dummy_prefix) {
    parts.decoder.add(DecoderStep{.kind = DecoderStep::Kind::kStrip, .content = " ", .start = 1});
  }
  for (int32_t id = 0; id < static_cast<int32_t>(proto.pieces.size()); ++id) {
    const SpPiece& p = proto.pieces[id];
    if (p.type == SpPiece::Type::kControl || p.type == SpPiece::Type::kUnknown ||
        p.type == SpPiece::Type::kUserDefined) {
      AddedToken t;
      t.id = id;
      t.content = p.piece;
      t.special = p.type != SpPiece::Type::kUserDefined;
      parts.added_tokens.push_back(std::move(t));
    }
  }
  merge_added_tokens(config.added_tokens_decoder, &parts);
  // LlamaTokenizer's defaults: BOS, no EOS.
  if (proto.model_type == 2 && proto.bos_id >= 0) parts.prefix_ids = {proto.bos_id};
  auto piece_of = [&](int32_t id) {
    return id >= 0 && id < static_cast<int32_t>(proto.pieces.size()) ? proto.pieces[id].piece
                                                                     : std::string();
  };
  if (proto.bos_id >= 0) {
    parts.info.bos_id = proto.bos_id;
    parts.info.bos_token = piece_of(proto.bos_id);
  }
  if (proto.eos_id >= 0) {
    parts.info.eos_id = proto.eos_id;
    parts.info.eos_token = piece_of(proto.eos_id);
  }
  if (proto.unk_id >= 0) {
    parts.info.unk_id = proto.unk_id;
    parts.info.unk_token = piece_of(proto.unk_id);
  }
  if (proto.pad_id >= 0) {
    parts.info.pad_id = proto.pad_id;
    parts.info.pad_token = piece_of(proto.pad_id);
  }
  parts.info.format = "tokenizer.model";
  parts.info.model = parts.model->describe();
  STRATA_RETURN_IF_ERROR(apply_hf_tokenizer_config(config, &parts));
  return parts;
}

std::optional<Result<TokenizerParts>> find_other_bpe_files(const std::string& dir) {
  std::string tiktoken, encoder, bpe;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (ends_with(name, ".tiktoken")) tiktoken = e.path().string();
    if (ends_with(name, "encoder.json")) encoder = e.path().string();
    if (ends_with(name, "vocab.bpe")) bpe = e.path().string();
  }
  if (!tiktoken.empty()) return load_tiktoken(tiktoken);
  if (encoder.empty() || bpe.empty()) return std::nullopt;
  // OpenAI's GPT-2 release format; a 128000-token vocabulary is Llama 3's (its split pattern and
  // special tokens; <|begin_of_text|> first), anything else GPT-2's.
  BpeFilesOptions options;
  auto vocab = read_json_file(encoder);
  const bool llama3 = vocab.ok() && vocab->is_object() && vocab->size() == 128000;
  if (llama3) options.preset = "llama3";
  auto parts = load_bpe_files(encoder, bpe, options);
  if (parts.ok() && llama3) set_llama3_specials(&*parts);
  return parts;
}

}  // namespace tok

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load(const std::string& path) {
  Result<tok::TokenizerParts> parts = internal_error("no loader ran");
  if (is_directory(path)) {
    if (file_exists(path_join(path, "tokenizer.json"))) {
      parts = tok::load_tokenizer_json(path_join(path, "tokenizer.json"));
    } else if (file_exists(path_join(path, "vocab.json")) &&
               file_exists(path_join(path, "merges.txt"))) {
      parts = tok::load_vocab_merges_dir(path);
    } else if (file_exists(path_join(path, "tokenizer.model"))) {
      // SentencePiece protobuf (Llama 2, Mistral) or tiktoken text (Meta's Llama 3).
      const std::string model = path_join(path, "tokenizer.model");
      parts = tok::looks_like_tiktoken(model) ? tok::load_tiktoken(model)
                                              : tok::load_sentencepiece(model);
    } else if (auto found = tok::find_other_bpe_files(path)) {
      parts = std::move(*found);
    } else {
      return not_found("no tokenizer in '" + path +
                       "': expected tokenizer.json, vocab.json + merges.txt, tokenizer.model, "
                       "a *.tiktoken file, or *encoder.json + *vocab.bpe");
    }
  } else if (file_exists(path)) {
    if (ends_with(path, ".gguf")) {
      parts = tok::load_gguf_vocab(path);
    } else if (ends_with(path, ".json")) {
      parts = tok::load_tokenizer_json(path);
    } else if (ends_with(path, ".tiktoken") ||
               (ends_with(path, ".model") && tok::looks_like_tiktoken(path))) {
      parts = tok::load_tiktoken(path);
    } else if (ends_with(path, ".model")) {
      parts = tok::load_sentencepiece(path);
    } else {
      return invalid_argument("'" + path +
                              "' is not a tokenizer: give a model directory, a tokenizer.json, a "
                              "SentencePiece .model or a .gguf file");
    }
  } else {
    return not_found("tokenizer path '" + path + "' does not exist");
  }
  if (!parts.ok()) return parts.status();
  parts->info.source = path;
  return from_parts(std::move(parts).value());
}

}  // namespace strata
