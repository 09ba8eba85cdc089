// Chained prefix hashes for full KV blocks (prefix caching).
//
// The hash of block i covers everything that determines its KV contents:
//   hash_i = xxh3_128(hash_{i-1} || num_tokens || token ids of block i || extra keys of block i)
// with a fixed root value standing in for hash_{-1}. Because each hash folds in its parent, equal
// hashes mean equal whole prefixes, not just equal blocks. Extra keys are bytes that change the
// KV for the same tokens; the per-request cache salt goes into block 0 (the chain carries it to
// every later block), so requests with different salts never share blocks.
//
// xxh3-128 is not cryptographic, but a 128-bit hash makes an accidental collision between honest
// prompts vanishingly unlikely (about n^2 / 2^129 for n cached blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::kv {

struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

// The parent value used for block 0.
BlockHash root_block_hash();

// Hash of one full block given its parent's hash. `extra` may be empty.
BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> token_ids,
                     std::string_view extra);

// Appends to `hashes` the hash of every full block of `token_ids` (blocks of `block_size`
// tokens) that `hashes` does not cover yet; a partial last block gets no hash. `hashes` must hold
// the hashes of the first hashes->size() blocks of the same token sequence and salt. Call it again
// as tokens are appended: it only hashes the new full blocks.
void append_block_hashes(std::span<const int32_t> token_ids, int64_t block_size,
                         std::string_view cache_salt, std::vector<BlockHash>* hashes);

// "0123...ef" (hi then lo, 32 hex digits) for logs and tests.
std::string to_string(const BlockHash& h);

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const {
    return static_cast<size_t>(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ull));
  }
};

}  // namespace strata::kv
