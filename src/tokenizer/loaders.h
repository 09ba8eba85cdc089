// Loaders that assemble TokenizerParts from each on-disk format. Tokenizer::load() picks one;
// tests and tools may call them directly (e.g. for vocab/merges files with other names).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer_parts.h"
#include "tokenizer/vocab.h"

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
// Byte-level BPE parts from a vocabulary (byte-level pieces) and merges already read; `what`
// names the source in errors. load_bpe_files and load_tiktoken build on it.
Result<TokenizerParts> byte_level_bpe_parts(
    Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    const BpeFilesOptions& options, const std::string& what);

// tiktoken's BPE file ("<base64 token bytes> <rank>" per line), as Meta ships Llama 3's
// tokenizer.model (and OpenAI its *.tiktoken encodings). Merges are recovered from the ranks
// (every split of a token into two tokens, with the token's rank as its priority); the split
// pattern is cl100k's (Llama 3's). A 128000-token file is Llama 3's: its 256 special tokens follow
// (<|begin_of_text|> = 128000 ...) and <|begin_of_text|> starts every encoding.
Result<TokenizerParts> load_tiktoken(const std::string& path);
// Whether `path` starts like a tiktoken file (not a SentencePiece protobuf).
bool looks_like_tiktoken(const std::string& path);
// In a directory without the usual files: a *.tiktoken file, or OpenAI's *encoder.json +
// *vocab.bpe pair; nullopt when neither is there.
std::optional<Result<TokenizerParts>> find_other_bpe_files(const std::string& dir);
// Llama 3.1+'s special tokens, ids first_id .. first_id + 255.
std::vector<AddedToken> llama3_special_tokens(int32_t first_id);
// Gives a 128000-token byte-level BPE Llama 3's 256 special tokens (ids 128000..128255), BOS
// <|begin_of_text|> added to every encoding and EOS <|end_of_text|>.
void set_llama3_specials(TokenizerParts* parts);

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
