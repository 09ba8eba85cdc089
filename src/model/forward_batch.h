// The flattened batch one forward pass runs: every scheduled token of every sequence, sequence by
// sequence (vLLM's layout). Built by the model runner from the scheduler's step plan.
#pragma once

#include <cstdint>
#include <span>

namespace strata {

struct ForwardBatch {
  std::span<const int32_t> token_ids;     // [num_tokens]
  std::span<const int32_t> positions;     // [num_tokens]; a sequence's tokens are consecutive
  std::span<const int64_t> slot_mapping;  // [num_tokens] block * block_size + offset, or -1
  std::span<const int32_t> query_start;   // [num_seqs + 1] row ranges of each sequence
  std::span<const int32_t> seq_lens;      // [num_seqs] context length after this step
  std::span<const int32_t> block_tables;  // [num_seqs, max_blocks_per_seq], row-major
  int64_t max_blocks_per_seq = 0;
  std::span<const int32_t> logits_rows;  // token rows whose logits are returned, in order
  // [num_tokens, hidden]: the hidden state each token's row combines with its embedding, for a
  // multi-token-prediction module (Model::takes_input_hidden()); empty for every other model.
  std::span<const float> input_hidden;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(seq_lens.size()); }
};

}  // namespace strata
