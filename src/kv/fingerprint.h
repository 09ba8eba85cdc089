// The fingerprint of a KV configuration: a digest of everything besides the tokens that decides
// the bytes of a KV block (weights, dtypes, layout, block size, kernels), naming the disk tier's
// directory for it (kv/disk_tier.h) so that blocks are never shared across configurations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace strata::kv {

class Fingerprint {
 public:
  Fingerprint();
  ~Fingerprint();
  Fingerprint(const Fingerprint&) = delete;
  Fingerprint& operator=(const Fingerprint&) = delete;

  // A labelled field ("kv_dtype", "bf16"); labels and values are length-prefixed.
  void add(std::string_view label, std::string_view value);
  void add(std::string_view label, int64_t value);
  // A file by name, size and the digest of its first and last MiB (a cheap stand-in for a digest
  // of the whole file: weights files differ there, in their headers and tails). A missing file
  // adds its name only.
  void add_file(std::string_view label, const std::string& path);
  // 32 lowercase hex digits.
  std::string hex() const;

 private:
  void* state_;  // XXH3_state_t
};

}  // namespace strata::kv
