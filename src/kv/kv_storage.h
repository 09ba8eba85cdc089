// The KV cache tensors: per layer, K and V as [num_blocks][num_kv_heads][block_size][head_dim]
// in the cache dtype (K only when the spec has no V, as for MLA's latent cache). The only file of
// kv/ that holds tensor data; the bookkeeping (which block belongs to whom) never touches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace strata {

struct KvStorageSpec {
  int64_t num_layers = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 16;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  DType dtype = DType::kF32;  // F32, F16, BF16 or F8E4M3
  bool has_v = true;          // false: K entries only (MLA)

  int64_t block_bytes_per_layer() const {  // K + V of one block in one layer
    return (has_v ? 2 : 1) * num_kv_heads * block_size * head_dim * dtype_block_bytes(dtype);
  }
  int64_t total_bytes() const { return num_layers * num_blocks * block_bytes_per_layer(); }
};

class KvStorage {
 public:
  static Result<KvStorage> allocate(const KvStorageSpec& spec);
  const KvStorageSpec& spec() const { return spec_; }
  std::byte* k(int64_t layer) { return base_ + layer * layer_bytes_; }
  // nullptr when the spec has no V.
  std::byte* v(int64_t layer) {
    return spec_.has_v ? base_ + layer * layer_bytes_ + layer_bytes_ / 2 : nullptr;
  }
  int64_t bytes() const { return spec_.total_bytes(); }

  KvStorage() = default;
  KvStorage(KvStorage&& o) noexcept;
  KvStorage& operator=(KvStorage&& o) noexcept;
  ~KvStorage();

 private:
  KvStorageSpec spec_;
  int64_t layer_bytes_ = 0;
  // One anonymous mapping: pages are committed (zeroed) by the OS on first touch, so a large pool
  // costs memory only as it fills.
  std::byte* base_ = nullptr;
  size_t mapped_ = 0;
};

}  // namespace strata
