#include "kv/fingerprint.h"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "core/check.h"

namespace strata::kv {

namespace {

XXH3_state_t* state(void* p) {
  return static_cast<XXH3_state_t*>(p);
}

}  // namespace

Fingerprint::Fingerprint() : state_(XXH3_createState()) {
  STRATA_CHECK(state_ != nullptr);
  XXH3_128bits_reset(state(state_));
  add("format", "strata-kv-1");
}

Fingerprint::~Fingerprint() {
  XXH3_freeState(state(state_));
}

void Fingerprint::add(std::string_view label, std::string_view value) {
  for (std::string_view part : {label, value}) {
    const uint64_t n = part.size();
    XXH3_128bits_update(state(state_), &n, sizeof(n));
    XXH3_128bits_update(state(state_), part.data(), part.size());
  }
}

void Fingerprint::add(std::string_view label, int64_t value) {
  add(label, std::to_string(value));
}

void Fingerprint::add_file(std::string_view label, const std::string& path) {
  add(label, path.substr(path.find_last_of('/') + 1));
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return;
  const int64_t size = static_cast<int64_t>(in.tellg());
  add("size", size);
  constexpr int64_t kSample = int64_t{1} << 20;
  std::vector<char> buf(static_cast<size_t>(std::min(size, kSample)));
  for (int64_t offset : {int64_t{0}, std::max<int64_t>(0, size - kSample)}) {
    in.seekg(offset);
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    add("bytes", std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
    if (size <= kSample) break;
  }
}

std::string Fingerprint::hex() const {
  const XXH128_hash_t h = XXH3_128bits_digest(state(state_));
  char out[33];
  std::snprintf(out, sizeof(out), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return out;
}

}  // namespace strata::kv
