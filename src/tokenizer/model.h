// The tokenization model: turns one pre-token into token ids (BPE merges, SentencePiece BPE
// scores, Unigram). Implementations are immutable after construction and safe to call from
// several threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tok {

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of `word` to *ids. For byte-level models `word` is raw bytes (the
  // byte-to-character mapping is implied); otherwise it is valid UTF-8 text.
  virtual void encode(std::string_view word, std::vector<int32_t>* ids) const = 0;
  // One past the largest id the model defines.
  virtual int32_t vocab_size() const = 0;
  // The vocabulary string of `id` ("" for ids the model does not define).
  virtual const std::string& id_to_piece(int32_t id) const = 0;
  virtual std::optional<int32_t> piece_to_id(std::string_view piece) const = 0;
  // "BPE", "BPE (byte-level)", "SentencePiece BPE", "Unigram".
  virtual std::string describe() const = 0;
};

}  // namespace strata::tok
