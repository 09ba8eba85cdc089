// An open-addressing hash table from a pair of token ids to (rank, merged id): the merge lookup
// on BPE's hot path. Immutable after building; lookups are lock-free.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::tok {

class PairTable {
 public:
  static constexpr uint32_t kNone = ~0u;

  // Sizes the table for `n` pairs (call before inserting).
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n + n / 2 + 16) cap <<= 1;
    entries_.assign(cap, Entry{kEmptyKey, 0, 0});
    mask_ = cap - 1;
  }
  // Inserts or replaces the value of (left, right).
  void insert(int32_t left, int32_t right, uint32_t rank, int32_t merged) {
    uint64_t k = key(left, right);
    uint64_t i = slot(k);
    while (entries_[i].key != kEmptyKey && entries_[i].key != k) i = (i + 1) & mask_;
    entries_[i] = Entry{k, rank, merged};
  }
  // The rank of (left, right) and its merged id, or kNone.
  uint32_t find(int32_t left, int32_t right, int32_t* merged) const {
    uint64_t k = key(left, right);
    for (uint64_t i = slot(k);; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.key == k) {
        *merged = e.id;
        return e.rank;
      }
      if (e.key == kEmptyKey) return kNone;
    }
  }

 private:
  struct Entry {
    uint64_t key;
    uint32_t rank;
    int32_t id;
  };
  static constexpr uint64_t kEmptyKey = ~0ull;
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  uint64_t slot(uint64_t k) const { return ((k * 0x9E3779B97F4A7C15ull) >> 24) & mask_; }

  std::vector<Entry> entries_;
  uint64_t mask_ = 0;
};

}  // namespace strata::tok
