// Strata's tokenizer: text <-> token ids, exact to the reference implementations (Hugging Face
// `tokenizers`/`transformers`, SentencePiece, llama.cpp's GGUF vocabularies).
//
// Load from a model or tokenizer directory (tokenizer.json; else vocab.json + merges.txt; else
// tokenizer.model; tokenizer_config.json is read when present) or from a .gguf file. A loaded
// Tokenizer is immutable: encode/decode may be called from many threads at once on one shared
// `const Tokenizer`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace strata {

namespace tok {
struct TokenizerParts;
struct TokenizerImpl;
}  // namespace tok

// Where a tokenizer came from and the configuration fields other modules need (chat templates
// use bos/eos strings and the template sources; generation uses the ids).
struct TokenizerInfo {
  std::string source;  // the path given to load()
  std::string format;  // "tokenizer.json", "vocab.json+merges.txt", "tokenizer.model", "gguf"
  std::string model;   // "BPE (byte-level)", "SentencePiece BPE", ...
  std::string tokenizer_class;  // tokenizer_config.json "tokenizer_class" ("" when absent)
  std::string bos_token, eos_token, unk_token, pad_token;  // "" when the model has none
  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id;
  bool add_bos = false;  // encode(add_special_tokens=true) starts with BOS
  bool add_eos = false;  // ... and ends with EOS
  // transformers' clean_up_tokenization_spaces (" ." -> "." ...); decode() applies it only when
  // asked to (see Tokenizer::decode).
  bool clean_up_tokenization_spaces = false;
  // Chat templates (Jinja source) by name, the default one first under the name "default".
  // Empty when the model ships none.
  std::vector<std::pair<std::string, std::string>> chat_templates;
  std::string config_json;  // the raw tokenizer_config.json text ("" when absent)
};

class Tokenizer {
 public:
  // See the header comment for what `path` may be. Errors name the file and what is wrong.
  static Result<std::shared_ptr<const Tokenizer>> load(const std::string& path);
  // Builds a tokenizer from parts assembled by a loader (tokenizer/tokenizer_parts.h).
  static Result<std::shared_ptr<const Tokenizer>> from_parts(tok::TokenizerParts parts);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Text -> ids. Added/special tokens written in the text (e.g. "<|im_start|>") are always
  // recognised. add_special_tokens: add BOS/EOS as the post-processor / config says. Invalid UTF-8
  // is an InvalidArgument error naming the byte offset.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens = true) const;

  // Ids -> text. skip_special_tokens drops special added tokens (BOS, EOS, <|im_end|>, ...).
  // Ids outside [0, vocab_size()) are ignored. Bytes that do not form UTF-8 become U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = true) const;
  // As above, then transformers' clean_up_tokenization when `clean_up_tokenization_spaces`.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens,
                     bool clean_up_tokenization_spaces) const;

  // The raw bytes `id` adds to the decoded text when it follows other text (no U+FFFD
  // replacement: a byte-fallback or byte-level token may hold part of a UTF-8 character). For
  // constrained decoding. Special tokens give their content; unknown ids "".
  std::string token_bytes(int32_t id) const;

  int32_t vocab_size() const;  // one past the largest id, added tokens included
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> token_to_id(std::string_view piece) const;
  std::string id_to_piece(int32_t id) const;  // the raw vocabulary string ("" when unknown)
  bool is_special(int32_t id) const;          // a special added token
  const TokenizerInfo& info() const;
  // The default chat template ("" when there is none), or the one called `name`.
  std::string chat_template(std::string_view name = "") const;

 private:
  explicit Tokenizer(std::unique_ptr<tok::TokenizerImpl> impl);
  std::unique_ptr<tok::TokenizerImpl> impl_;
};

// transformers' clean_up_tokenization: " ." -> ".", " ?" -> "?", " !" -> "!", " ," -> ",",
// " ' " -> "'", " n't" -> "n't", " 'm" -> "'m", " 's" -> "'s", " 've" -> "'ve", " 're" -> "'re".
std::string clean_up_tokenization(std::string text);

}  // namespace strata
