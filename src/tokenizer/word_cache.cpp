#include "tokenizer/word_cache.h"

#include <atomic>
#include <memory>

namespace strata::tok {

namespace {

constexpr size_t kSlots = 1 << 14;
std::atomic<uint64_t> g_next_owner{1};

}  // namespace

uint64_t new_cache_owner() {
  return g_next_owner.fetch_add(1, std::memory_order_relaxed);
}

WordCacheSlot& word_cache_slot(uint64_t owner, std::string_view word, uint64_t* hash) {
  thread_local std::unique_ptr<WordCacheSlot[]> slots(new WordCacheSlot[kSlots]);
  uint64_t h = 0xcbf29ce484222325ull ^ (owner * 0x9E3779B97F4A7C15ull);
  for (char c : word) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 29;
  *hash = h;
  return slots[h & (kSlots - 1)];
}

}  // namespace strata::tok
