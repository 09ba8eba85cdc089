#include "kv/cache_config.h"

#include <gtest/gtest.h>

namespace strata::kv {
namespace {

Result<CacheConfig> parse(std::vector<std::string> argv) {
  OptionSet o;
  add_cache_options(o);
  auto args = o.parse(argv);
  if (!args.ok()) return args.status();
  return cache_config_from_args(*args);
}

TEST(CacheConfigTest, DefaultsMatchVllm) {
  auto c = parse({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->block_size, 16);
  EXPECT_TRUE(c->enable_prefix_caching);
  EXPECT_FALSE(c->kv_cache_dtype.has_value());
  EXPECT_DOUBLE_EQ(c->gpu_memory_utilization, 0.9);
  EXPECT_EQ(c->kv_cache_memory_bytes, 0);
}

TEST(CacheConfigTest, ParsesEveryOption) {
  auto c = parse({"--block-size", "128", "--no-enable-prefix-caching", "--kv-cache-dtype", "fp8",
                  "--gpu-memory-utilization=0.5", "--kv-cache-memory", "2GiB"});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->block_size, 128);
  EXPECT_FALSE(c->enable_prefix_caching);
  EXPECT_EQ(c->kv_cache_dtype, std::optional<DType>(DType::kF8E4M3));
  EXPECT_DOUBLE_EQ(c->gpu_memory_utilization, 0.5);
  EXPECT_EQ(c->kv_cache_memory_bytes, int64_t{2} << 30);
  EXPECT_EQ(kv_cache_dtype_name(c->kv_cache_dtype), "f8_e4m3");
  for (const char* name : {"bf16", "bfloat16", "f16", "half", "f32", "auto", "fp8_e4m3"}) {
    EXPECT_TRUE(parse({"--kv-cache-dtype", name}).ok()) << name;
  }
}

// fp8_ds_mla: fp8 in DeepSeek's MLA layout; plain fp8 means it too for V3.2 (an MLA model with the
// lightning indexer), as in vLLM, and stays plain for other models; asked of a model without an
// MLA cache, it is refused naming the flag.
TEST(CacheConfigTest, Fp8DsMla) {
  auto c = parse({"--kv-cache-dtype", "fp8_ds_mla"});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->kv_cache_dtype, std::optional<DType>(DType::kF8E4M3));
  EXPECT_TRUE(c->kv_fp8_ds_mla);
  auto f = parse({"--kv-cache-dtype", "fp8"});
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->kv_fp8_ds_mla);
  const std::string v32 = "DeepseekV32ForCausalLM", v3 = "DeepseekV3ForCausalLM";
  EXPECT_TRUE(*use_fp8_ds_mla(*c, DType::kF8E4M3, true, true, v32));
  EXPECT_TRUE(*use_fp8_ds_mla(*c, DType::kF8E4M3, true, false, v3));
  EXPECT_TRUE(*use_fp8_ds_mla(*f, DType::kF8E4M3, true, true, v32));   // the alias
  EXPECT_FALSE(*use_fp8_ds_mla(*f, DType::kF8E4M3, true, false, v3));  // V3: plain fp8
  EXPECT_FALSE(*use_fp8_ds_mla(*f, DType::kF8E4M3, false, false, "LlamaForCausalLM"));
  EXPECT_FALSE(*use_fp8_ds_mla(CacheConfig{}, DType::kBF16, true, true, v32));
  auto no = use_fp8_ds_mla(*c, DType::kF8E4M3, false, false, "LlamaForCausalLM");
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no.status().message().find("--kv-cache-dtype fp8_ds_mla"), std::string::npos);
  EXPECT_NE(no.status().message().find("LlamaForCausalLM"), std::string::npos);
}

TEST(CacheConfigTest, ErrorsNameTheOption) {
  auto expect_error = [](std::vector<std::string> argv, const std::string& what) {
    auto c = parse(argv);
    ASSERT_FALSE(c.ok()) << argv[0];
    EXPECT_NE(c.status().message().find(what), std::string::npos) << c.status().message();
  };
  expect_error({"--block-size", "12"}, "--block-size must be a power of two");
  expect_error({"--block-size", "0"}, "--block-size");
  expect_error({"--block-size", "2048"}, "--block-size");
  expect_error({"--kv-cache-dtype", "int4"}, "--kv-cache-dtype 'int4' is not supported");
  expect_error({"--kv-cache-dtype", "q8_0"}, "--kv-cache-dtype");
  expect_error({"--gpu-memory-utilization", "1.5"}, "--gpu-memory-utilization must be in (0, 1]");
  expect_error({"--gpu-memory-utilization", "0"}, "--gpu-memory-utilization");
  expect_error({"--kv-cache-memory", "lots"}, "--kv-cache-memory");
  expect_error({"--kv-cache-memory", "0"}, "--kv-cache-memory must be a positive size");
}

TEST(CacheConfigTest, BuiltConfigsAreValidated) {
  EXPECT_TRUE((CacheConfig{.block_size = 8}).validate().ok());
  EXPECT_FALSE((CacheConfig{.block_size = 24}).validate().ok());
  EXPECT_FALSE((CacheConfig{.kv_cache_dtype = DType::kQ8_0}).validate().ok());
  EXPECT_FALSE((CacheConfig{.kv_cache_memory_bytes = -1}).validate().ok());
}

TEST(CacheConfigTest, NoKvTiersByDefault) {
  auto c = parse({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->kv_offloading_bytes, 0);
  EXPECT_TRUE(c->kv_disk_path.empty());
  EXPECT_EQ(c->kv_disk_bytes, 0);
  EXPECT_FALSE(c->has_kv_tiers());
}

TEST(CacheConfigTest, TierSizesAreGibOrSizesWithAUnit) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  auto ram = [](std::vector<std::string> argv) -> int64_t {
    auto c = parse(argv);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? c->kv_offloading_bytes : -1;
  };
  EXPECT_EQ(ram({"--kv-offloading-size", "2"}), 2 * kGiB);
  EXPECT_EQ(ram({"--kv-offloading-size", "0.5"}), kGiB / 2);
  EXPECT_EQ(ram({"--kv-offloading-size", "512MiB"}), 512 << 20);
  EXPECT_EQ(ram({"--kv-offloading-size", "3GB"}), 3'000'000'000);
  EXPECT_EQ(ram({"--kv-offloading-size", " 1 "}), kGiB);
  EXPECT_EQ(ram({"--kv-offloading-size", "0"}), 0);
  EXPECT_TRUE(parse({"--kv-offloading-size", "2"})->has_kv_tiers());
  EXPECT_FALSE(parse({"--kv-offloading-size", "0"})->has_kv_tiers());

  // --swap-space is the RAM tier's size only when --kv-offloading-size is absent.
  EXPECT_EQ(ram({"--swap-space", "4"}), 4 * kGiB);
  EXPECT_EQ(ram({"--swap-space", "1.5"}), 3 * kGiB / 2);
  EXPECT_EQ(ram({"--swap-space", "4", "--kv-offloading-size", "1"}), kGiB);
  EXPECT_EQ(ram({"--kv-offloading-size", "256MiB", "--swap-space", "8"}), 256 << 20);
  // vLLM's old flag, passed out of habit with prefix caching off: dropped, not an error.
  EXPECT_EQ(ram({"--swap-space", "4", "--no-enable-prefix-caching"}), 0);

  auto c = parse({"--kv-disk-path", "/tmp/kv", "--kv-disk-size", "0.25"});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->kv_disk_path, "/tmp/kv");
  EXPECT_EQ(c->kv_disk_bytes, kGiB / 4);
  EXPECT_EQ(c->kv_offloading_bytes, 0);
  EXPECT_TRUE(c->has_kv_tiers());
  c = parse({"--kv-disk-path", "/tmp/kv", "--kv-disk-size", "20GB"});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->kv_disk_bytes, 20'000'000'000);
  // A path alone gets 16 GiB.
  c = parse({"--kv-disk-path", "/tmp/kv"});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->kv_disk_bytes, 16 * kGiB);
  // Both tiers at once.
  c = parse({"--kv-offloading-size", "1", "--kv-disk-path", "/tmp/kv", "--kv-disk-size", "64"});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->kv_offloading_bytes, kGiB);
  EXPECT_EQ(c->kv_disk_bytes, 64 * kGiB);
}

TEST(CacheConfigTest, OffloadingBackendIsNativeOnly) {
  EXPECT_TRUE(parse({"--kv-offloading-backend", "native", "--kv-offloading-size", "1"}).ok());
  EXPECT_TRUE(parse({"--kv-offloading-backend", "Native"}).ok());
  auto c = parse({"--kv-offloading-backend", "lmcache", "--kv-offloading-size", "1"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  const std::string msg = c.status().message();
  EXPECT_NE(msg.find("--kv-offloading-backend lmcache"), std::string::npos) << msg;
  EXPECT_NE(msg.find("native"), std::string::npos) << "names what works: " << msg;
}

TEST(CacheConfigTest, TierErrorsNameTheOption) {
  auto expect_error = [](std::vector<std::string> argv, StatusCode code, const std::string& what) {
    auto c = parse(argv);
    ASSERT_FALSE(c.ok()) << argv[0] << " " << argv[1];
    EXPECT_EQ(c.status().code(), code) << c.status().to_string();
    EXPECT_NE(c.status().message().find(what), std::string::npos) << c.status().message();
  };
  for (const char* flag : {"--kv-offloading-size", "--kv-disk-path"}) {
    const std::vector<std::string> argv = {flag, std::string(flag) == "--kv-disk-path" ? "/x" : "1",
                                           "--no-enable-prefix-caching"};
    expect_error(argv, StatusCode::kInvalidArgument, "need prefix caching");
  }
  expect_error({"--kv-offloading-size", "lots"}, StatusCode::kInvalidArgument,
               "--kv-offloading-size");
  expect_error({"--kv-offloading-size", "-1"}, StatusCode::kInvalidArgument,
               "--kv-offloading-size");
  expect_error({"--kv-offloading-size", "1.2.3"}, StatusCode::kInvalidArgument,
               "--kv-offloading-size");
  expect_error({"--swap-space", "4 apples"}, StatusCode::kInvalidArgument, "--swap-space");
  expect_error({"--kv-disk-path", "/x", "--kv-disk-size", "0"}, StatusCode::kInvalidArgument,
               "--kv-disk-path needs a positive --kv-disk-size");
  expect_error({"--kv-disk-path", "/x", "--kv-disk-size", "big"}, StatusCode::kInvalidArgument,
               "--kv-disk-size");
  // Beyond what a byte count holds: refused as too large, not wrapped into a negative size.
  expect_error({"--kv-offloading-size", "100000000000"}, StatusCode::kInvalidArgument, "too large");
  expect_error({"--kv-disk-path", "/x", "--kv-disk-size", "9000000000"},
               StatusCode::kInvalidArgument, "too large");
}

TEST(CacheConfigTest, BuiltTierConfigsAreValidated) {
  EXPECT_TRUE((CacheConfig{.kv_offloading_bytes = 1}).validate().ok());
  EXPECT_FALSE((CacheConfig{.kv_offloading_bytes = -1}).validate().ok());
  EXPECT_FALSE((CacheConfig{.kv_disk_path = "/x"}).validate().ok()) << "no size";
  EXPECT_TRUE((CacheConfig{.kv_disk_path = "/x", .kv_disk_bytes = 1}).validate().ok());
  EXPECT_FALSE(
      (CacheConfig{.enable_prefix_caching = false, .kv_offloading_bytes = 1}).validate().ok());
}

}  // namespace
}  // namespace strata::kv
