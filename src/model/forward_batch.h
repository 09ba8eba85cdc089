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

  // Models with per-sequence state (KvSpec::has_state(), DeepSeek-V4), else empty:
  // state_slots [num_seqs]: the state slot of each sequence. A sequence whose first token this
  // step is at position 0 starts from an empty state (the model clears its slot).
  std::span<const int32_t> state_slots;
  // Copies made before the pass: slot src (a prefix-cache snapshot) -> slot dst (the sequence
  // that resumes after the cached prefix, at position = the snapshot's boundary).
  struct StateCopy {
    int32_t src_slot = 0, dst_slot = 0;
  };
  std::span<const StateCopy> state_restores;
  // Snapshots taken during the pass: the state of sequence `seq` (index in this batch) as it is
  // after its first `boundary` tokens (a block boundary inside this step's tokens of the
  // sequence: positions[first] < boundary <= positions[last] + 1) is written to dst_slot, so a
  // later request whose cached prefix ends at `boundary` can resume from it.
  struct StateSnapshot {
    int32_t seq = 0;
    int64_t boundary = 0;
    int32_t dst_slot = 0;
  };
  std::span<const StateSnapshot> state_snapshots;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int num_seqs() const { return static_cast<int>(seq_lens.size()); }
};

}  // namespace strata
