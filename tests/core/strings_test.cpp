#include "core/strings.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(StringsTest, SplitTrimJoin) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(trim("  x y \n"), "x y");
  EXPECT_EQ(join({"a", "b"}, ", "), "a, b");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
}

TEST(StringsTest, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("héllo 世界 🙂"));
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xe4\xb8"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // > U+10FFFF
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(StringsTest, TextLinesSkipEmptyLinesAndCountThem) {
  const auto lines = text_lines("a b\r\n\n#c\nlast");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], (std::pair<size_t, std::string_view>{1, "a b"}));
  EXPECT_EQ(lines[1], (std::pair<size_t, std::string_view>{3, "#c"}));
  EXPECT_EQ(lines[2], (std::pair<size_t, std::string_view>{4, "last"}));
  EXPECT_TRUE(text_lines("").empty());
  EXPECT_TRUE(text_lines("\n\r\n").empty());
}

}  // namespace
}  // namespace strata
