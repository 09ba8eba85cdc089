// Shared by the tokenizer fuzz targets: drives a freshly loaded tokenizer through encode, decode,
// the piece lookups and the incremental detokenizer, checking that encode only returns ids below
// vocab_size().
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_targets.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace strata::fuzz {

inline void exercise_tokenizer(const std::shared_ptr<const Tokenizer>& tok) {
  static const char* const kTexts[] = {
      "Hello world",
      "  leading spaces\tand\ttabs\n\n\nnewlines  ",
      "numbers 1234567 and 3.14159, don't we'll",
      "\xC3\xBCn\xC3\xAF\x63\xC3\xB6\x64\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82",
      "<s></s><unk><|bos|><|eos|><|im_start|>user<|im_end|>",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "",
  };
  const int32_t vocab = tok->vocab_size();
  STRATA_FUZZ_CHECK(vocab >= 0);
  for (const char* text : kTexts) {
    for (bool add_special : {true, false}) {
      auto ids = tok->encode(text, add_special);
      if (!ids.ok()) continue;
      for (int32_t id : *ids)
        STRATA_FUZZ_CHECK(id >= 0 && id < vocab) << "encode gave id " << id << " of " << vocab;
      (void)tok->decode(*ids, true);
      (void)tok->decode(*ids, false, true);
      IncrementalDetokenizer detok(tok, std::span<const int32_t>(ids->data(), ids->size() / 2),
                                   add_special);
      for (size_t i = ids->size() / 2; i < ids->size(); ++i) (void)detok.add((*ids)[i]);
      (void)detok.flush();
    }
  }
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab && id < 300; ++id) ids.push_back(id);
  for (int32_t id : {-1, vocab - 1, vocab, std::numeric_limits<int32_t>::max(),
                     std::numeric_limits<int32_t>::min()}) {
    ids.push_back(id);
  }
  (void)tok->decode(ids, false);
  (void)tok->decode(ids, true, true);
  for (int32_t id : ids) {
    std::string piece = tok->id_to_piece(id);
    (void)tok->is_special(id);
    if (!piece.empty()) (void)tok->token_to_id(piece);
  }
  (void)tok->bos_token_id();
  (void)tok->eos_token_id();
  (void)tok->chat_template();
}

}  // namespace strata::fuzz
