#include "kv/kv_storage.h"

#include <string>

namespace strata {

Result<KvStorage> KvStorage::allocate(const KvStorageSpec& spec, DeviceAllocator& allocator) {
  if (spec.dtype != DType::kF32 && spec.dtype != DType::kF16 && spec.dtype != DType::kBF16 &&
      spec.dtype != DType::kF8E4M3)
    return invalid_argument(std::string("KV cache dtype ") + dtype_name(spec.dtype) +
                            " is not supported (f32, f16, bf16, fp8)");
  if (spec.num_layers <= 0 || spec.num_blocks <= 0 || spec.block_size <= 0 ||
      spec.num_kv_heads <= 0 || spec.head_dim <= 0)
    return invalid_argument("KV cache spec has a non-positive size");
  KvStorage s;
  s.spec_ = spec;
  s.layer_bytes_ = spec.num_blocks * spec.block_bytes_per_layer();
  s.values_bytes_ = spec.num_blocks * spec.num_kv_heads * spec.block_size * spec.head_dim *
                    dtype_block_bytes(spec.dtype);
  STRATA_ASSIGN_OR_RETURN(s.memory_, allocator.allocate(static_cast<size_t>(spec.total_bytes()),
                                                        MemoryUse::kKvCache));
  return s;
}

}  // namespace strata
