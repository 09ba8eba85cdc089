#include "kv/kv_storage.h"

#include <cstring>
#include <string>

#include "core/check.h"

namespace strata {

Result<KvStorage> KvStorage::allocate(const KvStorageSpec& spec, DeviceAllocator& allocator) {
  if (spec.dtype != DType::kF32 && spec.dtype != DType::kF16 && spec.dtype != DType::kBF16 &&
      spec.dtype != DType::kF8E4M3)
    return invalid_argument(std::string("KV cache dtype ") + dtype_name(spec.dtype) +
                            " is not supported (f32, f16, bf16, fp8)");
  if (spec.hybrid()) {
    if (spec.num_layers <= 0 || spec.num_blocks <= 0 || spec.block_size <= 0 ||
        static_cast<int64_t>(spec.layer_block_bytes.size()) != spec.num_layers)
      return invalid_argument(
          "hybrid KV cache spec: needs layers, blocks and one block size in "
          "bytes per layer");
    for (int64_t b : spec.layer_block_bytes)
      if (b < 0) return invalid_argument("hybrid KV cache spec: a layer has negative block bytes");
    if (spec.block_bytes_all_layers() <= 0)
      return invalid_argument("hybrid KV cache spec: no layer keeps anything in paged blocks");
    KvStorage s;
    s.spec_ = spec;
    int64_t offset = 0;
    for (int64_t b : spec.layer_block_bytes) {
      s.layer_offsets_.push_back(offset);
      offset += spec.num_blocks * b;
    }
    STRATA_ASSIGN_OR_RETURN(s.memory_, allocator.allocate(static_cast<size_t>(spec.total_bytes()),
                                                          MemoryUse::kKvCache));
    return s;
  }
  if (spec.num_layers <= 0 || spec.num_blocks <= 0 || spec.block_size <= 0 ||
      spec.num_kv_heads <= 0 || spec.head_dim <= 0 || spec.aux_dim < 0 || spec.ds_mla_latent < 0)
    return invalid_argument("KV cache spec has a non-positive size");
  if (spec.ds_mla_latent > 0 && (spec.dtype != DType::kF8E4M3 || spec.has_v ||
                                 spec.num_kv_heads != 1 || spec.ds_mla_latent >= spec.head_dim))
    return invalid_argument(
        "the fp8_ds_mla KV layout needs an fp8 MLA cache (one latent row per token, no V, the "
        "latent shorter than the row)");
  KvStorage s;
  s.spec_ = spec;
  s.layer_bytes_ = spec.num_blocks * spec.block_bytes_per_layer();
  s.values_bytes_ = spec.num_blocks * spec.num_kv_heads * spec.block_size * spec.row_value_bytes();
  s.aux_values_bytes_ =
      spec.num_blocks * spec.block_size * spec.aux_dim * dtype_block_bytes(spec.dtype);
  STRATA_ASSIGN_OR_RETURN(
      s.memory_, allocator.allocate(static_cast<size_t>(spec.total_bytes()), MemoryUse::kKvCache));
  return s;
}

namespace {

// Calls fn(pool address, length) for each contiguous piece of `block`, in the packed order.
template <typename Fn>
void for_each_block_piece(const KvStorageSpec& spec, std::byte* base, int64_t layer_bytes,
                          int64_t values_bytes, int64_t aux_values_bytes, int64_t block, Fn&& fn) {
  STRATA_CHECK(block >= 0 && block < spec.num_blocks) << "KV block " << block << " out of range";
  const int64_t rows = spec.num_kv_heads * spec.block_size;  // rows of one block
  const int64_t row_bytes = spec.row_value_bytes();
  const int64_t parts = spec.has_v ? 2 : 1;
  for (int64_t l = 0; l < spec.num_layers; ++l) {
    std::byte* layer = base + l * layer_bytes;
    for (int64_t p = 0; p < parts; ++p)
      fn(layer + p * values_bytes + block * rows * row_bytes, rows * row_bytes);
    const int64_t aux_block_bytes = spec.block_size * spec.aux_dim * dtype_block_bytes(spec.dtype);
    if (spec.aux_dim > 0)
      fn(layer + parts * values_bytes + block * aux_block_bytes, aux_block_bytes);
    std::byte* scales = layer + parts * values_bytes + aux_values_bytes;
    const int64_t scale_bytes = spec.has_row_scales() ? spec.num_blocks * rows * 4 : 0;  // of K
    if (spec.has_row_scales())
      for (int64_t p = 0; p < parts; ++p) fn(scales + p * scale_bytes + block * rows * 4, rows * 4);
    if (spec.has_aux_scales())
      fn(scales + parts * scale_bytes + block * spec.block_size * 4, spec.block_size * 4);
  }
}

}  // namespace

void KvStorage::copy_block_out(int64_t block, std::byte* dst) const {
  if (spec_.hybrid()) {
    STRATA_CHECK(block >= 0 && block < spec_.num_blocks) << "KV block " << block << " out of range";
    for (int64_t l = 0; l < spec_.num_layers; ++l) {
      const int64_t n = spec_.layer_block_bytes[static_cast<size_t>(l)];
      std::memcpy(dst, memory_.data() + layer_offsets_[static_cast<size_t>(l)] + block * n,
                  static_cast<size_t>(n));
      dst += n;
    }
    return;
  }
  for_each_block_piece(spec_, memory_.data(), layer_bytes_, values_bytes_, aux_values_bytes_, block,
                       [&](std::byte* p, int64_t n) {
                         std::memcpy(dst, p, static_cast<size_t>(n));
                         dst += n;
                       });
}

void KvStorage::copy_block_in(int64_t block, const std::byte* src) {
  if (spec_.hybrid()) {
    STRATA_CHECK(block >= 0 && block < spec_.num_blocks) << "KV block " << block << " out of range";
    for (int64_t l = 0; l < spec_.num_layers; ++l) {
      const int64_t n = spec_.layer_block_bytes[static_cast<size_t>(l)];
      std::memcpy(memory_.data() + layer_offsets_[static_cast<size_t>(l)] + block * n, src,
                  static_cast<size_t>(n));
      src += n;
    }
    return;
  }
  for_each_block_piece(spec_, memory_.data(), layer_bytes_, values_bytes_, aux_values_bytes_, block,
                       [&](std::byte* p, int64_t n) {
                         std::memcpy(p, src, static_cast<size_t>(n));
                         src += n;
                       });
}

}  // namespace strata
