// TokenVocabulary from a loaded tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/grammar.h"

namespace strata {
class Tokenizer;
}

namespace strata::grammar {

// The bytes of every token of `tokenizer` (Tokenizer::token_bytes; special tokens excluded),
// for a model whose logits rows have `vocab_size` entries and that stops on `eos_token_ids`.
std::shared_ptr<const TokenVocabulary> make_token_vocabulary(const Tokenizer& tokenizer,
                                                             int64_t vocab_size,
                                                             std::vector<int32_t> eos_token_ids);

}  // namespace strata::grammar
