#include "core/byte_io.h"

#include <gtest/gtest.h>

#include <limits>

namespace strata {
namespace {

TEST(ByteIoTest, ValuesRoundTripInOrder) {
  ByteWriter w;
  w.u8(200);
  w.u32(0xdeadbeef);
  w.i64(std::numeric_limits<int64_t>::min());
  w.f32(-1.5f);
  w.boolean(true);
  w.str(std::string("a\0b", 3));
  w.vec(std::vector<int32_t>{1, -2, 3});
  w.strings({"x", "", "yz"});
  ByteReader r(w.data());
  EXPECT_EQ(r.u8(), 200);
  EXPECT_EQ(r.u32(), 0xdeadbeefu);
  EXPECT_EQ(r.i64(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(r.f32(), -1.5f);
  EXPECT_TRUE(r.boolean());
  EXPECT_EQ(r.str(), std::string("a\0b", 3));
  EXPECT_EQ(r.vec<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(r.strings(), (std::vector<std::string>{"x", "", "yz"}));
  EXPECT_TRUE(r.finish().ok());
}

TEST(ByteIoTest, ShortInputAndHugeCountsAreErrorsNotReads) {
  ByteWriter w;
  w.u64(uint64_t{1} << 60);  // a count far larger than the message
  ByteReader r(w.data(), "test message");
  EXPECT_TRUE(r.vec<int32_t>().empty());
  Status s = r.finish();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("test message"), std::string::npos) << s.message();
  ByteReader short_read(std::string_view("\x01\x02", 2));
  EXPECT_EQ(short_read.u32(), 0u);
  EXPECT_EQ(short_read.u8(), 0u);  // reads after an error return zero
  EXPECT_FALSE(short_read.finish().ok());
  ByteReader bad_bool(std::string_view("\x07", 1));
  bad_bool.boolean();
  EXPECT_FALSE(bad_bool.finish().ok());
  ByteReader leftover(std::string_view("\x01\x02", 2));
  leftover.u8();
  EXPECT_NE(leftover.finish().message().find("left over"), std::string::npos);
}

}  // namespace
}  // namespace strata
