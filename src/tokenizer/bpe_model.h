// Byte-pair encoding with ranked merges (Hugging Face "BPE" model): a word starts as single
// characters (or single bytes for byte-level vocabularies) and the adjacent pair with the lowest
// merge rank is merged until no ranked pair is left. Supports byte_fallback ("<0xXX>" tokens for
// characters outside the vocabulary), unk with fuse_unk, and ignore_merges (a word that is itself
// a token is emitted whole). Results for short words are cached per thread.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/model.h"
#include "tokenizer/pair_table.h"
#include "tokenizer/vocab.h"

namespace strata::tok {

struct BpeConfig {
  bool byte_level = false;     // words arrive as raw bytes (GPT-2 style vocabulary)
  bool byte_fallback = false;  // unknown characters become <0xXX> byte tokens
  bool ignore_merges = false;  // a word found in the vocabulary is one token
  bool fuse_unk = false;       // consecutive unknown characters become one unk token
  std::string unk_token;       // "" = none: unknown characters are dropped
};

class BpeModel final : public Model {
 public:
  // `merges` are (left, right) piece pairs in rank order (rank 0 merges first). Every merge's
  // parts and result must be in `vocab`; otherwise an InvalidArgument error names the merge.
  static Result<std::unique_ptr<BpeModel>> create(
      Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      BpeConfig config);

  void encode(std::string_view word, std::vector<int32_t>* ids) const override;
  int32_t vocab_size() const override { return vocab_.size(); }
  const std::string& id_to_piece(int32_t id) const override { return vocab_.piece(id); }
  std::optional<int32_t> piece_to_id(std::string_view piece) const override {
    return vocab_.find(piece);
  }
  std::string describe() const override;
  const BpeConfig& config() const { return config_; }
  size_t num_merges() const { return num_merges_; }

 private:
  static constexpr uint32_t kNoRank = PairTable::kNone;

  BpeModel() = default;
  // Rank and result of merging (left, right); rank kNoRank when they do not merge.
  uint32_t lookup(int32_t left, int32_t right, int32_t* merged) const {
    return pairs_.find(left, right, merged);
  }
  // Initial symbols of `word` (characters, bytes, fallback bytes, unk).
  void initial_symbols(std::string_view word, std::vector<int32_t>* syms) const;
  void merge_small(std::vector<int32_t>* syms) const;
  void merge_large(std::vector<int32_t>* syms) const;
  void encode_uncached(std::string_view word, std::vector<int32_t>* ids) const;

  Vocab vocab_;
  BpeConfig config_;
  int32_t unk_id_ = -1;
  int32_t byte_to_id_[256];        // byte-level: id of each single-byte symbol (-1 if absent)
  int32_t byte_fallback_id_[256];  // id of "<0xXX>" (-1 if absent)
  bool all_byte_fallback_ = false;
  Vocab raw_vocab_;  // byte-level: tokens keyed by their raw bytes (for ignore_merges)
  PairTable pairs_;
  size_t num_merges_ = 0;
  uint64_t instance_id_ = 0;         // keys the per-thread word cache
  bool split_at_metaspace_ = false;  // see pieces_split_at_metaspace
};

// True when `s[p]` starts right after a "▁".
bool follows_metaspace(std::string_view s, size_t p);
// True when "▁" is a piece and no piece has "▁" right after another character: then BPE over
// SentencePiece-style text can run on each "▁"-initial run separately (and be cached) with the
// same result as over the whole text, since no merge can cross into a run.
bool pieces_split_at_metaspace(const Vocab& vocab);

}  // namespace strata::tok
