// Loaders that assemble TokenizerParts from each on-disk format. Tokenizer::load() picks one;
// tests and tools may call them directly (e.g. for vocab/merges files with other names).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer_parts.h"

namespace strata::tok {

// tokenizer.json, plus tokenizer_config.json etc. from the same directory when present.
Result<TokenizerParts> load_tokenizer_json(const std::string& path);

// A GPT-2 style pair: vocab.json (piece -> id) and merges.txt ("left right" per line, optional
// "#version" first line). `preset` names the pre-tokenizer family (see presets.h).
struct BpeFilesOptions {
  std::string preset = "gpt2";
  bool add_prefix_space = false;         // GPT-2's option: a space before the first word
  std::vector<AddedToken> added_tokens;  // special/added tokens matched in the text
  std::vector<int32_t> prefix_ids, suffix_ids;
};
Result<TokenizerParts> load_bpe_files(const std::string& vocab_path, const std::string& merges_path,
                                      const BpeFilesOptions& options);
// vocab.json + merges.txt in `dir`, configured by tokenizer_config.json (tokenizer_class picks
// GPT-2 or Qwen2 pre-tokenization; added_tokens_decoder and special tokens are honoured).
Result<TokenizerParts> load_vocab_merges_dir(const std::string& dir);

// SentencePiece tokenizer.model, with transformers' LlamaTokenizer conventions (BOS added,
// special pieces matched in text, leading space stripped on decode); tokenizer_config.json from
// the same directory applies when present.
Result<TokenizerParts> load_sentencepiece(const std::string& path);

// The vocabulary embedded in a GGUF file (tokenizer.ggml.*).
Result<TokenizerParts> load_gguf_vocab(const std::string& path);

}  // namespace strata::tok
