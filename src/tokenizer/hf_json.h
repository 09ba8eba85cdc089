// Hugging Face tokenizer.json: model (BPE; Unigram), normalizer, pre_tokenizer, post_processor,
// decoder and added_tokens, parsed into TokenizerParts. Internal to the tokenizer module.
#pragma once

#include <string>

#include "core/status.h"
#include "tokenizer/tokenizer_parts.h"

namespace strata::tok {

// Parses tokenizer.json text; `what` names the file in error messages. Unsupported component
// types are Unimplemented errors that name the type.
Result<TokenizerParts> parse_tokenizer_json(const std::string& text, const std::string& what);

}  // namespace strata::tok
