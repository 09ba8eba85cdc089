#include "core/aligned_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace strata {
namespace {

TEST(AlignedBuffer, ResizeZeroFillsAndAligns) {
  AlignedBuffer b(1000);
  ASSERT_EQ(b.size(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer::kAlignment, 0u);
  for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b.data()[i], std::byte{0}) << i;
}

TEST(AlignedBuffer, UninitializedHonoursTheAlignmentAndAcceptsHugePageAdvice) {
  const size_t bytes = 3 * AlignedBuffer::kHugePage + 12345;
  AlignedBuffer b = AlignedBuffer::uninitialized(bytes, AlignedBuffer::kHugePage);
  ASSERT_EQ(b.size(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % AlignedBuffer::kHugePage, 0u);
  // Advice never changes what the buffer holds or whether it can be used (the OS may ignore it).
  b.advise_huge_pages();
  for (size_t i = 0; i < bytes; ++i) b.data()[i] = static_cast<std::byte>(i * 7);
  uint64_t sum = 0, want = 0;
  for (size_t i = 0; i < bytes; ++i) {
    sum += static_cast<uint8_t>(b.data()[i]);
    want += static_cast<uint8_t>(i * 7);
  }
  EXPECT_EQ(sum, want);
  // A buffer smaller than one huge page, and an empty one, take the advice without effect.
  AlignedBuffer small = AlignedBuffer::uninitialized(100);
  small.advise_huge_pages();
  AlignedBuffer empty;
  empty.advise_huge_pages();
  EXPECT_EQ(empty.data(), nullptr);
}

}  // namespace
}  // namespace strata
