#include "grammar/vocabulary.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace strata::grammar {

std::shared_ptr<const TokenVocabulary> make_token_vocabulary(const Tokenizer& tokenizer,
                                                             int64_t vocab_size,
                                                             std::vector<int32_t> eos_token_ids) {
  auto v = std::make_shared<TokenVocabulary>();
  const int32_t n = static_cast<int32_t>(std::min<int64_t>(tokenizer.vocab_size(), vocab_size));
  v->token_bytes.resize(n);
  v->is_special.resize(n, 0);
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.is_special(id)) {
      v->is_special[id] = 1;
    } else {
      v->token_bytes[id] = tokenizer.token_bytes(id);
    }
  }
  v->eos_token_ids = std::move(eos_token_ids);
  v->vocab_size = vocab_size;
  return v;
}

}  // namespace strata::grammar
