#include "kv/cache_config.h"

#include "core/logging.h"
#include "core/strings.h"

namespace strata::kv {

namespace {
constexpr const char* kGroup = "KV cache";
}

Status CacheConfig::validate() const {
  if (block_size < 1 || block_size > 1024 || (block_size & (block_size - 1)) != 0) {
    return invalid_argument(
        "--block-size must be a power of two between 1 and 1024 (e.g. 16), got " +
        std::to_string(block_size));
  }
  if (kv_cache_dtype) {
    DType t = *kv_cache_dtype;
    if (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16 && t != DType::kF8E4M3) {
      return invalid_argument(std::string("--kv-cache-dtype ") + dtype_name(t) +
                              " is not supported; use auto, fp8, f32, f16 or bf16");
    }
  }
  if (!(gpu_memory_utilization > 0.0 && gpu_memory_utilization <= 1.0)) {
    return invalid_argument("--gpu-memory-utilization must be in (0, 1], got " +
                            std::to_string(gpu_memory_utilization));
  }
  if (kv_offloading_bytes < 0 || kv_disk_bytes < 0)
    return invalid_argument("--kv-offloading-size and --kv-disk-size must not be negative");
  if (!kv_disk_path.empty() && kv_disk_bytes <= 0)
    return invalid_argument("--kv-disk-path needs a positive --kv-disk-size (e.g. 64 for 64 GiB)");
  if (has_kv_tiers() && !enable_prefix_caching)
    return invalid_argument(
        "the KV tiers (--kv-offloading-size, --swap-space, --kv-disk-path) keep prefix-cached "
        "blocks: they need prefix caching (drop --no-enable-prefix-caching)");
  if (kv_cache_memory_bytes < 0) {
    return invalid_argument("--kv-cache-memory must be a positive size such as 4GiB, got " +
                            std::to_string(kv_cache_memory_bytes));
  }
  return ok_status();
}

Result<std::optional<DType>> parse_kv_cache_dtype(const std::string& text) {
  std::string t = to_lower(trim(text));
  if (t == "auto") return std::optional<DType>();
  if (t == "fp8" || t == "fp8_e4m3" || t == "f8e4m3" || t == "fp8e4m3") {
    return std::optional<DType>(DType::kF8E4M3);
  }
  DType d;
  if (parse_dtype(t, &d) && (d == DType::kF32 || d == DType::kF16 || d == DType::kBF16)) {
    return std::optional<DType>(d);
  }
  return invalid_argument(
      "--kv-cache-dtype '" + text +
      "' is not supported; use auto, fp8 (e4m3 with a scale), fp8_ds_mla (DeepSeek MLA), f32, "
      "f16 or bf16");
}

std::string kv_cache_dtype_name(const std::optional<DType>& dtype) {
  return dtype ? dtype_name(*dtype) : "auto";
}

Result<bool> use_fp8_ds_mla(const CacheConfig& cache, DType kv_dtype, bool is_mla, bool has_indexer,
                            const std::string& architecture) {
  if (cache.kv_fp8_ds_mla && !is_mla)
    return invalid_argument("--kv-cache-dtype fp8_ds_mla is DeepSeek's MLA cache layout; " +
                            architecture +
                            " has no MLA latent cache: use --kv-cache-dtype fp8 (or auto)");
  return cache.kv_fp8_ds_mla || (kv_dtype == DType::kF8E4M3 && is_mla && has_indexer);
}

void add_cache_options(OptionSet& options) {
  options.add_int("block-size", 16,
                  "tokens per KV-cache block (a power of two: 8, 16, 32, 64, 128, 256, ...)",
                  kGroup);
  options.add_bool("enable-prefix-caching", true,
                   "reuse the KV of identical prompt prefixes across requests", kGroup);
  options.add({.name = "kv-cache-dtype",
               .kind = OptionKind::kString,
               .default_value = "auto",
               .help = "KV-cache element type: auto (the model dtype), fp8 (e4m3 with a scale; "
                       "for DeepSeek-V3.2 fp8_ds_mla), fp8_ds_mla (DeepSeek MLA: fp8 latent with "
                       "a scale per 128 values, bf16 rotary key), f32, f16 or bf16",
               .group = kGroup,
               .metavar = "DTYPE"});
  options.add_float("gpu-memory-utilization", 0.9,
                    "fraction of the memory budget (on CPU: physical RAM) for weights, activations "
                    "and KV cache",
                    kGroup);
  options.add({.name = "kv-cache-memory",
               .kind = OptionKind::kString,
               .default_value = "",
               .help = "KV-cache size in bytes (e.g. 4GiB); overrides --gpu-memory-utilization "
                       "for the KV cache",
               .group = kGroup,
               .metavar = "BYTES"});
  options.add({.name = "kv-offloading-size",
               .kind = OptionKind::kString,
               .default_value = "",
               .help = "host-RAM tier under the KV pool, in GiB (or a size such as 512MiB): "
                       "prefix blocks evicted from the pool are kept there and loaded back",
               .group = kGroup,
               .metavar = "GIB"});
  options.add({.name = "kv-offloading-backend",
               .kind = OptionKind::kString,
               .default_value = "native",
               .help = "KV offloading implementation: native (Strata's tiers)",
               .group = kGroup,
               .metavar = "NAME"});
  options.add({.name = "swap-space",
               .kind = OptionKind::kString,
               .default_value = "",
               .help = "the host-RAM KV tier's size in GiB when --kv-offloading-size is not given",
               .group = kGroup,
               .metavar = "GIB"});
  options.add({.name = "kv-disk-path",
               .kind = OptionKind::kString,
               .default_value = "",
               .help = "directory of the disk KV tier: prefix blocks kept across restarts",
               .group = kGroup,
               .metavar = "DIR"});
  options.add({.name = "kv-disk-size",
               .kind = OptionKind::kString,
               .default_value = "",
               .help = "disk KV tier size in GiB (or a size such as 20GB); default 16 GiB",
               .group = kGroup,
               .metavar = "GIB"});
}

namespace {

// vLLM's sizes in GiB ("100", "0.5"), or a size with a unit ("512MiB").
Result<int64_t> parse_gib(const std::string& text, const std::string& what) {
  const std::string t(trim(text));
  if (!t.empty() && t.find_first_not_of("0123456789.") == std::string::npos) {
    STRATA_ASSIGN_OR_RETURN(double gib, parse_float(t, what));
    if (!(gib >= 0)) return invalid_argument(what + " must not be negative, got " + t);
    if (gib > 1024.0 * 1024.0)  // 1 PiB: surely bytes meant as GiB
      return invalid_argument(what + " " + t +
                              " GiB is too large (sizes are in GiB: give one such as 4, or "
                              "512MiB)");
    return static_cast<int64_t>(gib * 1024.0 * 1024.0 * 1024.0);
  }
  return parse_byte_size(t, what);
}

}  // namespace

Result<CacheConfig> cache_config_from_args(const Args& args) {
  CacheConfig c;
  c.block_size = args.get_int("block-size");
  c.block_size_given = args.is_set("block-size");
  c.enable_prefix_caching = args.get_bool("enable-prefix-caching");
  if (to_lower(std::string(trim(args.get("kv-cache-dtype")))) == "fp8_ds_mla") {
    c.kv_cache_dtype = DType::kF8E4M3;
    c.kv_fp8_ds_mla = true;
  } else {
    STRATA_ASSIGN_OR_RETURN(c.kv_cache_dtype, parse_kv_cache_dtype(args.get("kv-cache-dtype")));
  }
  c.gpu_memory_utilization = args.get_float("gpu-memory-utilization");
  if (std::string mem = args.get("kv-cache-memory"); !mem.empty()) {
    STRATA_ASSIGN_OR_RETURN(c.kv_cache_memory_bytes, parse_byte_size(mem, "--kv-cache-memory"));
    if (c.kv_cache_memory_bytes <= 0) {
      return invalid_argument("--kv-cache-memory must be a positive size such as 4GiB, got '" +
                              mem + "'");
    }
  }
  const std::string backend = to_lower(std::string(trim(args.get("kv-offloading-backend"))));
  if (backend != "native")
    return unimplemented("--kv-offloading-backend " + backend +
                         " is not supported: Strata's KV tiers are built in; use native");
  if (std::string v = args.get("kv-offloading-size"); !v.empty()) {
    STRATA_ASSIGN_OR_RETURN(c.kv_offloading_bytes, parse_gib(v, "--kv-offloading-size"));
  } else if (std::string v = args.get("swap-space"); !v.empty()) {
    STRATA_ASSIGN_OR_RETURN(c.kv_offloading_bytes, parse_gib(v, "--swap-space"));
    // vLLM's old flag, often passed out of habit: without prefix caching there is nothing for a
    // RAM tier to keep, so it is dropped with a line instead of refusing to start.
    if (!c.enable_prefix_caching && c.kv_offloading_bytes > 0) {
      STRATA_LOG(WARNING) << "--swap-space " << v
                          << " is ignored: the KV RAM tier it sizes keeps prefix-cached blocks, "
                             "and prefix caching is off";
      c.kv_offloading_bytes = 0;
    }
  }
  c.kv_disk_path = args.get("kv-disk-path");
  if (std::string v = args.get("kv-disk-size"); !v.empty()) {
    STRATA_ASSIGN_OR_RETURN(c.kv_disk_bytes, parse_gib(v, "--kv-disk-size"));
  } else if (!c.kv_disk_path.empty()) {
    c.kv_disk_bytes = int64_t{16} << 30;
  }
  STRATA_RETURN_IF_ERROR(c.validate());
  return c;
}

}  // namespace strata::kv
