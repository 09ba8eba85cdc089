// WordPiece (Hugging Face "WordPiece" model, BERT's tokenizer): a word becomes the longest
// vocabulary piece that starts it, then repeatedly the longest piece, written with the
// continuing-subword prefix ("##"), that starts the rest. A word with a part no piece covers, or
// longer than max_input_chars_per_word characters, is one unk token. Immutable and thread-safe
// after create().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/model.h"
#include "tokenizer/vocab.h"

namespace strata::tok {

struct WordPieceConfig {
  std::string unk_token = "[UNK]";  // must be in the vocabulary
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;
};

class WordPieceModel final : public Model {
 public:
  // InvalidArgument when the unk token is not in `vocab`.
  static Result<std::unique_ptr<WordPieceModel>> create(Vocab vocab, WordPieceConfig config);

  void encode(std::string_view word, std::vector<int32_t>* ids) const override;
  int32_t vocab_size() const override { return vocab_.size(); }
  const std::string& id_to_piece(int32_t id) const override { return vocab_.piece(id); }
  std::optional<int32_t> piece_to_id(std::string_view piece) const override {
    return vocab_.find(piece);
  }
  std::string describe() const override { return "WordPiece"; }
  const WordPieceConfig& config() const { return config_; }

 private:
  WordPieceModel() = default;
  Vocab vocab_;
  WordPieceConfig config_;
  int32_t unk_id_ = -1;
};

}  // namespace strata::tok
