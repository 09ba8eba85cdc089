// vLLM's `fp8_ds_mla` KV-cache row layout for DeepSeek-V3.2 (MLA): per token and layer one packed
// row of
//   latent e4m3 bytes | ceil(latent / 128) f32 scales (one per group of 128 values) |
//   (row_dim - latent) bf16 values (the rotary key, not quantised)
// = 512 + 16 + 128 = 656 bytes for V3.2's 512 latent + 64 rotary values. Value e of group g of the
// latent reads e4m3(byte e) * scale[g], scale = amax(group) / 448 (1 for an all-zero group). The
// scales are stored unaligned when latent is not a multiple of 4 (read them with memcpy).
// The row helpers are in kernels/mla.h; the storage in kv/kv_storage.h.
#pragma once

#include <cstdint>

namespace strata {

inline constexpr int64_t kDsMlaGroup = 128;  // latent values per f32 scale

inline constexpr int64_t ds_mla_scale_count(int64_t latent) {
  return (latent + kDsMlaGroup - 1) / kDsMlaGroup;
}
// Bytes of one packed row of row_dim values whose first `latent` are quantised.
inline constexpr int64_t ds_mla_row_bytes(int64_t row_dim, int64_t latent) {
  return latent + 4 * ds_mla_scale_count(latent) + 2 * (row_dim - latent);
}

}  // namespace strata
