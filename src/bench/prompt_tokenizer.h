// The tokenizer the benchmark builds prompts and counts tokens with. Two implementations: the
// serving endpoint's own POST /tokenize and /detokenize (ServerTokenizer, below), and the local
// tokenizer module (`--tokenizer PATH`). Batched calls let the server one run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata {
class Tokenizer;
}  // namespace strata

namespace strata::bench {

using TokenIds = std::vector<int32_t>;

class PromptTokenizer {
 public:
  virtual ~PromptTokenizer() = default;
  // Token ids of each text, without special tokens (no BOS).
  virtual Result<std::vector<TokenIds>> encode(const std::vector<std::string>& texts) = 0;
  virtual Result<std::vector<std::string>> decode(const std::vector<TokenIds>& ids) = 0;
  // Vocabulary size when known (local tokenizers); 0 when unknown (then prompts are built from
  // words instead of random token ids).
  virtual int64_t vocab_size() const = 0;
  // Ids never used in generated prompts (special tokens).
  virtual std::vector<int32_t> special_ids() const { return {}; }
  // Special tokens the server adds to a prompt (1 for a BOS-prefixed model).
  virtual int num_special_tokens_to_add() = 0;
  // "server http://127.0.0.1:8000/tokenize", "local PATH", for messages.
  virtual std::string description() const = 0;
};

// Uses the OpenAI-compatible server's /tokenize ({"model", "prompt", "add_special_tokens"} ->
// {"tokens": [...]}) and /detokenize ({"model", "tokens"} -> {"prompt": "..."}) endpoints.
struct ServerTokenizerOptions {
  std::string base_url;  // "http://127.0.0.1:8000"
  std::string model;
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. Authorization
  size_t max_parallel = 32;
  double timeout_s = 60;
};
std::unique_ptr<PromptTokenizer> make_server_tokenizer(ServerTokenizerOptions options);

// Uses the local tokenizer module (tokenizer/tokenizer.h) loaded from `path`: a model or
// tokenizer directory, or a .gguf file.
Result<std::unique_ptr<PromptTokenizer>> make_local_tokenizer(const std::string& path);
// The same over a tokenizer already loaded from `path` (the caller words its own load errors).
std::unique_ptr<PromptTokenizer> make_local_tokenizer(std::shared_ptr<const Tokenizer> tok,
                                                      std::string path);

}  // namespace strata::bench
