// A per-thread, direct-mapped cache of word -> token ids shared by the BPE models. Entries are
// keyed by a model instance id that is never reused, so a cache can never serve a stale result
// from another (or a destroyed) model. No locks: each thread has its own slots.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::tok {

inline constexpr size_t kMaxCachedWordBytes = 64;

// A fresh instance id for a model that uses the cache.
uint64_t new_cache_owner();

struct WordCacheSlot {
  uint64_t owner = 0;
  uint64_t hash = 0;
  std::string word;
  std::vector<int32_t> ids;
};

// The slot `word` maps to for `owner` on this thread, and the hash to store in it.
WordCacheSlot& word_cache_slot(uint64_t owner, std::string_view word, uint64_t* hash);

// Appends the ids of `word`, from the cache when present, else from compute(word, ids).
template <typename Compute>
void encode_cached(uint64_t owner, std::string_view word, std::vector<int32_t>* ids,
                   Compute&& compute) {
  if (word.size() > kMaxCachedWordBytes) {
    compute(word, ids);
    return;
  }
  uint64_t h = 0;
  WordCacheSlot& slot = word_cache_slot(owner, word, &h);
  if (slot.owner == owner && slot.hash == h && slot.word == word) {
    ids->insert(ids->end(), slot.ids.begin(), slot.ids.end());
    return;
  }
  size_t before = ids->size();
  compute(word, ids);
  slot.owner = owner;
  slot.hash = h;
  slot.word.assign(word);
  slot.ids.assign(ids->begin() + static_cast<std::ptrdiff_t>(before), ids->end());
}

}  // namespace strata::tok
