#include "kv/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <cstdio>
#include <cstring>

#include "core/check.h"

namespace strata::kv {

namespace {

// "strata-kv-block\0" as two little-endian words: an arbitrary fixed root.
constexpr BlockHash kRoot{0x6b2d617461727473ull, 0x006b636f6c622d76ull};

}  // namespace

BlockHash root_block_hash() {
  return kRoot;
}

BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> token_ids,
                     std::string_view extra) {
  // Fixed-width fields with explicit lengths, so that no two different inputs serialise alike:
  // parent (16 bytes), token count (8), token ids (4 each), extra length (8), extra bytes.
  const uint64_t head[3] = {parent.lo, parent.hi, static_cast<uint64_t>(token_ids.size())};
  const uint64_t extra_len = extra.size();
  const size_t total = sizeof(head) + token_ids.size_bytes() + sizeof(extra_len) + extra.size();
  XXH128_hash_t h;
  alignas(16) unsigned char small[4352];  // fits block_size 1024 and a short salt
  if (total <= sizeof(small)) {
    unsigned char* p = small;
    std::memcpy(p, head, sizeof(head));
    p += sizeof(head);
    if (!token_ids.empty()) std::memcpy(p, token_ids.data(), token_ids.size_bytes());
    p += token_ids.size_bytes();
    std::memcpy(p, &extra_len, sizeof(extra_len));
    p += sizeof(extra_len);
    if (!extra.empty()) std::memcpy(p, extra.data(), extra.size());
    h = XXH3_128bits(small, total);
  } else {
    XXH3_state_t state;
    XXH3_INITSTATE(&state);
    STRATA_CHECK(XXH3_128bits_reset(&state) == XXH_OK);
    XXH3_128bits_update(&state, head, sizeof(head));
    XXH3_128bits_update(&state, token_ids.data(), token_ids.size_bytes());
    XXH3_128bits_update(&state, &extra_len, sizeof(extra_len));
    if (!extra.empty()) XXH3_128bits_update(&state, extra.data(), extra.size());
    h = XXH3_128bits_digest(&state);
  }
  return BlockHash{h.low64, h.high64};
}

void append_block_hashes(std::span<const int32_t> token_ids, int64_t block_size,
                         std::string_view cache_salt, std::vector<BlockHash>* hashes) {
  STRATA_CHECK_GT(block_size, 0);
  const int64_t num_full = static_cast<int64_t>(token_ids.size()) / block_size;
  for (int64_t i = static_cast<int64_t>(hashes->size()); i < num_full; ++i) {
    const BlockHash& parent = i == 0 ? kRoot : (*hashes)[i - 1];
    hashes->push_back(hash_block(parent, token_ids.subspan(i * block_size, block_size),
                                 i == 0 ? cache_salt : std::string_view()));
  }
}

std::string to_string(const BlockHash& h) {
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(h.hi),
                static_cast<unsigned long long>(h.lo));
  return buf;
}

}  // namespace strata::kv
