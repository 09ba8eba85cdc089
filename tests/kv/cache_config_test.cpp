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

}  // namespace
}  // namespace strata::kv
