// The components a loader assembles into a Tokenizer (internal to the tokenizer module and its
// tests). Pipeline of encode(): split out added tokens -> normalizer -> added tokens matched on
// normalised text -> pre-tokenizer -> model per pre-token -> prefix/suffix ids.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tokenizer/added_vocab.h"
#include "tokenizer/decoder.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace strata::tok {

struct TokenizerParts {
  std::unique_ptr<Model> model;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Decoder decoder;
  std::vector<AddedToken> added_tokens;
  // Ids encode(add_special_tokens=true) puts before / after the text (the post-processor).
  std::vector<int32_t> prefix_ids, suffix_ids;
  TokenizerInfo info;
};

}  // namespace strata::tok
