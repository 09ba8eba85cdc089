// The CPU allocator's KV cache: committed (every page backed by RAM when allocated) or lazy
// (backed on first use), seen through mincore().
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "kernels/backend.h"

namespace strata {
namespace {

// Pages of [p, p + bytes) resident in RAM, and how many pages there are.
std::pair<size_t, size_t> resident_pages(const std::byte* p, size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  EXPECT_EQ(::mincore(const_cast<std::byte*>(p), bytes, v.data()), 0);
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return {n, v.size()};
}

TEST(CpuAllocator, ACommittedKvCacheIsInRamWhenAllocated) {
  auto alloc = make_cpu_allocator(/*commit_kv_cache=*/true);
  const size_t bytes = 24u << 20;
  auto buf = alloc->allocate(bytes, MemoryUse::kKvCache);
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  auto [resident, pages] = resident_pages(buf->data(), bytes);
  EXPECT_EQ(resident, pages);
  for (size_t off = 0; off < bytes; off += 4096) ASSERT_EQ(buf->data()[off], std::byte{0});
}

TEST(CpuAllocator, ALazyKvCacheIsBackedOnFirstUse) {
  auto alloc = make_cpu_allocator(/*commit_kv_cache=*/false);
  const size_t bytes = 24u << 20;
  auto buf = alloc->allocate(bytes, MemoryUse::kKvCache);
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  EXPECT_EQ(resident_pages(buf->data(), bytes).first, 0u);
  buf->data()[0] = std::byte{1};
  auto [resident, pages] = resident_pages(buf->data(), bytes);
  EXPECT_GE(resident, 1u);
  EXPECT_LT(resident, pages);
}

}  // namespace
}  // namespace strata
