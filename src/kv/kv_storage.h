// The KV cache tensors: per layer, K and V as [num_blocks][num_kv_heads][block_size][head_dim]
// in the cache dtype (K only when the spec has no V, as for MLA's latent cache), and when aux_dim
// > 0 one aux row per token, [num_blocks][block_size][aux_dim] (DeepSeek-V3.2's indexer keys).
// Layout variant fp8_ds_mla (ds_mla_latent > 0, MLA only): K is one packed row per token,
// [num_blocks][block_size][ds_mla_row_bytes(head_dim, ds_mla_latent)] (core/fp8_ds_mla.h: fp8
// latent, its per-128 scales, bf16 rotary key), with no separate K row scales. The only file of
// kv/ that holds tensor data; the bookkeeping (which block belongs to whom) never touches it.
// Hybrid variant (layer_block_bytes non-empty, KvSpec::hybrid(): DeepSeek-V4): each layer is
// [num_blocks][layer_block_bytes[layer]] raw bytes laid out by the model (PagedKvLayer::raw);
// the row fields do not apply and v()/scales/aux() are null.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/device_memory.h"
#include "core/dtype.h"
#include "core/fp8_ds_mla.h"
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
  int64_t aux_dim = 0;        // values of the aux row per token (KvSpec::aux_dim); 0: none
  // > 0: the fp8_ds_mla layout with this many quantised latent values per K row (dtype F8E4M3,
  // one K head, no V); 0: plain rows of `dtype`.
  int64_t ds_mla_latent = 0;
  // Hybrid layouts: bytes of one block in each layer ([num_layers]; 0: nothing paged in that
  // layer). Empty: the row layout above.
  std::vector<int64_t> layer_block_bytes;
  bool hybrid() const { return !layer_block_bytes.empty(); }

  // fp8 caches keep one f32 scale per cached K/V row (token x head) next to the values, except in
  // the fp8_ds_mla layout (its scales are inside the row); the aux rows of an fp8 cache always
  // have one.
  bool has_row_scales() const { return dtype == DType::kF8E4M3 && ds_mla_latent == 0; }
  bool has_aux_scales() const { return dtype == DType::kF8E4M3 && aux_dim > 0; }
  // Bytes of one K (or V) row's values, without a separate row scale.
  int64_t row_value_bytes() const {
    return ds_mla_latent > 0 ? ds_mla_row_bytes(head_dim, ds_mla_latent)
                             : head_dim * dtype_block_bytes(dtype);
  }
  // K + V + aux of one block in one layer (+ row scales); hybrid: of `layer` (row layouts: every
  // layer alike).
  int64_t block_bytes_per_layer(int64_t layer = 0) const {
    if (hybrid()) return layer_block_bytes[static_cast<size_t>(layer)];
    return (has_v ? 2 : 1) * num_kv_heads * block_size *
               (row_value_bytes() + (has_row_scales() ? 4 : 0)) +
           (aux_dim > 0
                ? block_size * (aux_dim * dtype_block_bytes(dtype) + (has_aux_scales() ? 4 : 0))
                : 0);
  }
  // One block over every layer.
  int64_t block_bytes_all_layers() const {
    if (!hybrid()) return num_layers * block_bytes_per_layer();
    int64_t n = 0;
    for (int64_t b : layer_block_bytes) n += b;
    return n;
  }
  int64_t total_bytes() const { return num_blocks * block_bytes_all_layers(); }
};

class KvStorage {
 public:
  // The pool's memory comes from `allocator` (the backend's: where the attention kernels run),
  // zero-filled.
  static Result<KvStorage> allocate(const KvStorageSpec& spec,
                                    DeviceAllocator& allocator = host_allocator());
  const KvStorageSpec& spec() const { return spec_; }
  // Per layer: K values, V values, aux values, then (fp8 only) K, V (not with fp8_ds_mla) and aux
  // row scales.
  // Hybrid: the layer's raw blocks (nullptr when the layer pages nothing).
  std::byte* k(int64_t layer) {
    if (spec_.hybrid())
      return spec_.layer_block_bytes[static_cast<size_t>(layer)] > 0
                 ? memory_.data() + layer_offsets_[static_cast<size_t>(layer)]
                 : nullptr;
    return memory_.data() + layer * layer_bytes_;
  }
  std::byte* raw(int64_t layer) { return spec_.hybrid() ? k(layer) : nullptr; }
  // nullptr when the spec has no V (or is hybrid).
  std::byte* v(int64_t layer) {
    return spec_.has_v && !spec_.hybrid() ? k(layer) + values_bytes_ : nullptr;
  }
  // [num_blocks][num_kv_heads][block_size] f32 scales of fp8 rows; nullptr for other dtypes (and
  // v_scales without V).
  float* k_scales(int64_t layer) {
    return spec_.has_row_scales() && !spec_.hybrid()
               ? reinterpret_cast<float*>(k(layer) + (spec_.has_v ? 2 : 1) * values_bytes_ +
                                          aux_values_bytes_)
               : nullptr;
  }
  float* v_scales(int64_t layer) {
    return spec_.has_row_scales() && spec_.has_v && !spec_.hybrid()
               ? k_scales(layer) + values_bytes_ / dtype_block_bytes(spec_.dtype) / spec_.head_dim
               : nullptr;
  }
  // The aux rows ([num_blocks][block_size][aux_dim]) and their fp8 scales
  // ([num_blocks][block_size]); nullptr without aux rows (scales: or when not fp8).
  std::byte* aux(int64_t layer) {
    return spec_.aux_dim > 0 && !spec_.hybrid() ? k(layer) + (spec_.has_v ? 2 : 1) * values_bytes_
                                                : nullptr;
  }
  float* aux_scales(int64_t layer) {
    if (!spec_.has_aux_scales() || spec_.hybrid()) return nullptr;
    const int64_t k_rows = spec_.num_blocks * spec_.num_kv_heads * spec_.block_size;
    return reinterpret_cast<float*>(k(layer) + (spec_.has_v ? 2 : 1) * values_bytes_ +
                                    aux_values_bytes_) +
           (spec_.has_row_scales() ? (spec_.has_v ? 2 : 1) * k_rows : 0);
  }
  int64_t bytes() const { return spec_.total_bytes(); }

  // One block's KV over every layer, packed (per layer: K values, V values, aux values, then the
  // fp8 row scales of K, V and aux; fp8_ds_mla rows whole; hybrid: each paging layer's raw block):
  // what the KV tiers move.
  // copy_block_out() fills `dst` with block_bytes() bytes; copy_block_in() writes them back into
  // the block. The caller makes sure no step computes on the block meanwhile; different blocks may
  // be copied from other threads while a step runs.
  int64_t block_bytes() const { return spec_.block_bytes_all_layers(); }
  void copy_block_out(int64_t block, std::byte* dst) const;
  void copy_block_in(int64_t block, const std::byte* src);

  KvStorage() = default;

 private:
  KvStorageSpec spec_;
  int64_t layer_bytes_ = 0;
  int64_t values_bytes_ = 0;            // K (or V) values of one layer
  int64_t aux_values_bytes_ = 0;        // aux values of one layer
  std::vector<int64_t> layer_offsets_;  // hybrid: each layer's start in memory_
  DeviceBuffer memory_;                 // every layer, one allocation
};

}  // namespace strata
