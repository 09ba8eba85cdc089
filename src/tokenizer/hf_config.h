// tokenizer_config.json (with special_tokens_map.json and chat_template.jinja/.json as fallbacks):
// the transformers-level settings around a tokenizer (special token strings, add_bos/add_eos,
// tokenizer_class, added_tokens_decoder, chat templates). Internal to the tokenizer module.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_vocab.h"
#include "tokenizer/tokenizer_parts.h"

namespace strata::tok {

struct HfTokenizerConfig {
  bool present = false;  // tokenizer_config.json exists
  std::string raw;       // its text
  std::string tokenizer_class;
  std::optional<std::string> bos_token, eos_token, unk_token, pad_token;
  std::optional<bool> add_bos_token, add_eos_token, add_prefix_space, legacy;
  std::optional<bool> clean_up_tokenization_spaces;
  std::vector<std::pair<std::string, std::string>> chat_templates;
  std::vector<AddedToken> added_tokens_decoder;
};

// Reads the configuration files in `dir`; missing files are not an error, malformed ones are.
Result<HfTokenizerConfig> read_hf_tokenizer_config(const std::string& dir);

// Fills parts->info from `config` (special token strings and ids, chat templates, flags) and, for
// tokenizer classes whose transformers implementation rebuilds the post-processor from
// add_bos_token/add_eos_token (Llama, Gemma, ...), applies those flags to prefix/suffix ids.
// Call after the model and added tokens are in place.
Status apply_hf_tokenizer_config(const HfTokenizerConfig& config, TokenizerParts* parts);

// Sets info.add_bos/add_eos from the prefix/suffix ids and, when no BOS/EOS is configured, takes
// them from a single-token prefix/suffix.
void finish_special_token_info(TokenizerParts* parts);

// Looks a piece up among the added tokens, then the model.
std::optional<int32_t> find_token(const TokenizerParts& parts, std::string_view piece);

}  // namespace strata::tok
