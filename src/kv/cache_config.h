// KV cache configuration: the `--block-size`, `--enable-prefix-caching`, `--kv-cache-dtype`,
// `--gpu-memory-utilization` and `--kv-cache-memory` options (vLLM's names and defaults),
// declared once here and shared by every command that builds an engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/options.h"
#include "core/status.h"

namespace strata::kv {

struct CacheConfig {
  int64_t block_size = 16;  // tokens per KV block: a power of two in [1, 1024]
  // Whether --block-size was given: when not, models whose KV layout needs another block size
  // get theirs (engine/memory_plan.h resolve_block_size(): 256 for hybrid DeepSeek-V4 caches,
  // 64 for DeepSeek-V3.2's fp8_ds_mla).
  bool block_size_given = false;
  bool enable_prefix_caching = true;
  // KV element type; nullopt = "auto" (the model's activation dtype). Supported: f32, f16, bf16,
  // fp8 (e4m3 with a scale).
  std::optional<DType> kv_cache_dtype;
  // --kv-cache-dtype fp8_ds_mla: kv_cache_dtype fp8 in vLLM's packed MLA layout
  // (core/fp8_ds_mla.h). fp8 means the same for DeepSeek-V3.2 (use_fp8_ds_mla()).
  bool kv_fp8_ds_mla = false;
  // Fraction of the memory budget (on CPU: physical RAM) for weights + activations + KV.
  double gpu_memory_utilization = 0.9;
  // Explicit KV size in bytes; when set (> 0) it overrides gpu_memory_utilization for KV.
  int64_t kv_cache_memory_bytes = 0;
  // KV tiers under the pool (kv/kv_tiers.h): host RAM (--kv-offloading-size, or --swap-space)
  // and disk (--kv-disk-path, --kv-disk-size). 0 / empty: none.
  int64_t kv_offloading_bytes = 0;
  std::string kv_disk_path;
  int64_t kv_disk_bytes = 0;
  bool has_kv_tiers() const { return kv_offloading_bytes > 0 || !kv_disk_path.empty(); }

  // Ok, or an invalid-argument status naming the bad option and the accepted values.
  Status validate() const;
};

// "auto" -> nullopt; "fp8" / "fp8_e4m3" -> f8e4m3; f32/float32/f16/float16/half/bf16/bfloat16.
Result<std::optional<DType>> parse_kv_cache_dtype(const std::string& text);
// "auto" or the dtype's name.
std::string kv_cache_dtype_name(const std::optional<DType>& dtype);

// Whether the KV cache of a model takes the fp8_ds_mla layout, given the cache dtype in effect:
// when asked for (an invalid-argument status naming the flag unless the model is MLA, is_mla), or
// when the dtype is fp8 and the model is DeepSeek-V3.2 (has_indexer; vLLM's alias).
Result<bool> use_fp8_ds_mla(const CacheConfig& cache, DType kv_dtype, bool is_mla, bool has_indexer,
                            const std::string& architecture);

// Declares the cache options (group "KV cache").
void add_cache_options(OptionSet& options);
// Reads them back and validates the result.
Result<CacheConfig> cache_config_from_args(const Args& args);

}  // namespace strata::kv
