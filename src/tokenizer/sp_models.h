// SentencePiece-style models over scored pieces:
//  - SpmBpeModel: SentencePiece BPE (model_type BPE in tokenizer.model; llama.cpp's "llama"
//    vocabularies). Starting from characters, repeatedly merges the adjacent pair whose
//    concatenation is a piece with the highest score (ties: leftmost).
//  - UnigramModel: SentencePiece/HF Unigram. Viterbi over all segmentations into pieces,
//    maximising the sum of piece scores; characters no piece covers become unk (score
//    min_score - 10).
// Both fall back to <0xXX> byte pieces for unknown text when byte_fallback is on, else emit unk
// (consecutive unknown text fused into one unk). Immutable and thread-safe after create().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/model.h"
#include "tokenizer/pair_table.h"
#include "tokenizer/vocab.h"

namespace strata::tok {

struct SpPiece {
  // SentencePiece ModelProto.SentencePiece.Type values.
  enum class Type : uint8_t {
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6,
  };
  std::string piece;
  float score = 0;
  Type type = Type::kNormal;
};

// What both models share: the pieces, their ids and byte-fallback ids.
class SpPieceTable {
 public:
  Status init(std::vector<SpPiece> pieces, std::optional<int32_t> unk_id, bool byte_fallback);
  const SpPiece& at(int32_t id) const { return pieces_[id]; }
  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  // Pieces that may be produced by merging / segmentation (normal, user-defined, unused).
  std::optional<int32_t> find_mergeable(std::string_view piece) const {
    return mergeable_.find(piece);
  }
  const Vocab& vocab() const { return vocab_; }
  int32_t unk_id() const { return unk_id_; }
  // Appends the ids for text no piece covers: <0xXX> bytes when byte_fallback, else one unk
  // (fused with an unk just before it). Drops the text when there is no unk piece.
  void emit_unknown(std::string_view text, std::vector<int32_t>* ids, bool* prev_unk) const;

 private:
  std::vector<SpPiece> pieces_;
  Vocab vocab_;      // every piece
  Vocab mergeable_;  // normal, user-defined and unused pieces
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false;
  int32_t byte_ids_[256] = {};
};

class SpmBpeModel final : public Model {
 public:
  static Result<std::unique_ptr<SpmBpeModel>> create(std::vector<SpPiece> pieces,
                                                     std::optional<int32_t> unk_id,
                                                     bool byte_fallback);
  void encode(std::string_view word, std::vector<int32_t>* ids) const override;
  int32_t vocab_size() const override { return table_.size(); }
  const std::string& id_to_piece(int32_t id) const override { return table_.vocab().piece(id); }
  std::optional<int32_t> piece_to_id(std::string_view piece) const override {
    return table_.vocab().find(piece);
  }
  std::string describe() const override { return "SentencePiece BPE"; }

 private:
  void encode_chunk(std::string_view text, std::vector<int32_t>* ids) const;
  SpPieceTable table_;
  PairTable pairs_;         // (left id, right id) -> id of the concatenated piece
  int32_t ascii_ids_[128];  // mergeable piece of each ASCII character, or -1
  bool has_unused_ = false;
  bool split_at_metaspace_ = false;  // see pieces_split_at_metaspace (bpe_model.h)
  uint64_t cache_owner_ = 0;
};

class UnigramModel final : public Model {
 public:
  static Result<std::unique_ptr<UnigramModel>> create(std::vector<SpPiece> pieces,
                                                      std::optional<int32_t> unk_id,
                                                      bool byte_fallback);
  void encode(std::string_view word, std::vector<int32_t>* ids) const override;
  int32_t vocab_size() const override { return table_.size(); }
  const std::string& id_to_piece(int32_t id) const override { return table_.vocab().piece(id); }
  std::optional<int32_t> piece_to_id(std::string_view piece) const override {
    return table_.vocab().find(piece);
  }
  std::string describe() const override { return "Unigram"; }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
    int32_t id = -1;
  };
  SpPieceTable table_;
  std::vector<Node> trie_;
  float min_score_ = 0, max_score_ = 0;
};

}  // namespace strata::tok
