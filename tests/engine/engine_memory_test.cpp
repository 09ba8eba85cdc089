// The KV cache is committed at start: a pool bigger than the memory free now is a clear start-up
// error (checked before anything is allocated), and --no-kv-cache-commit turns the commit off.
#include <gtest/gtest.h>

#include "engine/engine_config.h"
#include "engine_test_util.h"

namespace strata {
namespace {

TEST(EngineMemory, AKvCacheBiggerThanFreeMemoryIsAStartUpError) {
  const int64_t free = engine::free_memory_bytes();
  ASSERT_GT(free, 0) << "no /proc/meminfo?";
  auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy",
                                  free + (int64_t{64} << 30));
  c.scheduler.max_model_len = 512;
  auto e = engine::Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kResourceExhausted);
  const std::string& m = e.status().message();
  EXPECT_NE(m.find("of memory is free now"), std::string::npos) << m;
  EXPECT_NE(m.find("--kv-cache-memory"), std::string::npos) << m;
}

TEST(EngineMemory, KvCacheCommitOption) {
  OptionSet o;
  engine::add_engine_options(o);
  auto on = o.parse({"m"});
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(engine::engine_config_from_args(*on)->commit_kv_cache);
  auto off = o.parse({"m", "--no-kv-cache-commit"});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(engine::engine_config_from_args(*off)->commit_kv_cache);
}

}  // namespace
}  // namespace strata
