#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <set>

#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace strata::tok {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Test, LossyReplacesMaximalInvalidSubparts) {
  EXPECT_EQ(utf8_lossy("héllo 世界 🙂"), "héllo 世界 🙂");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), kFffd);                  // truncated emoji: one U+FFFD
  EXPECT_EQ(utf8_lossy("a\xC3(b"), "a" + kFffd + "(b");          // bad continuation
  EXPECT_EQ(utf8_lossy("\xE0\x80\x80"), kFffd + kFffd + kFffd);  // overlong: each byte
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(utf8_lossy("\xFF\xFE"), kFffd + kFffd);
  EXPECT_EQ(utf8_lossy("\xE4\xB8x"), kFffd + "x");  // two valid bytes of three, then 'x'
}

TEST(Utf8Test, InvalidOffsetAndCompletePrefix) {
  EXPECT_EQ(utf8_invalid_offset("abc"), std::string_view::npos);
  EXPECT_EQ(utf8_invalid_offset("ab\xC0\xAF"), 2u);
  EXPECT_EQ(utf8_invalid_offset("日本\xE8"), 6u);
  EXPECT_EQ(utf8_invalid_offset("\xF4\x90\x80\x80"), 0u);
  EXPECT_EQ(utf8_complete_prefix("ab"), 2u);
  EXPECT_EQ(utf8_complete_prefix("a\xF0\x9F\x98"), 1u);  // waiting for the 4th byte
  EXPECT_EQ(utf8_complete_prefix("a\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(utf8_complete_prefix("a\xE4"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);  // can never complete: release it
}

TEST(UnicodeTest, NormalFormsAndCase) {
  std::string out;
  ASSERT_TRUE(normalize_utf8(NormalForm::kNFC, "cafe\xCC\x81", &out).ok());
  EXPECT_EQ(out, "caf\xC3\xA9");
  ASSERT_TRUE(normalize_utf8(NormalForm::kNFD, "caf\xC3\xA9", &out).ok());
  EXPECT_EQ(out, "cafe\xCC\x81");
  ASSERT_TRUE(normalize_utf8(NormalForm::kNFKC, "\xEF\xAC\x81 \xE2\x91\xA0", &out).ok());  // ﬁ ①
  EXPECT_EQ(out, "fi 1");
  ASSERT_TRUE(normalize_utf8(NormalForm::kNFC, "\xEF\xAC\x81", &out).ok());  // NFC keeps ﬁ
  EXPECT_EQ(out, "\xEF\xAC\x81");
  ASSERT_TRUE(lowercase_utf8("ÀB Σ", &out).ok());
  EXPECT_EQ(out, "àb σ");
  EXPECT_TRUE(is_whitespace(0x3000));
  EXPECT_TRUE(is_whitespace(0x85));
  EXPECT_FALSE(is_whitespace(0x200B));  // zero-width space is not White_Space
  EXPECT_TRUE(is_alphanumeric(U'中'));
  EXPECT_TRUE(is_alphanumeric(U'½'));
  EXPECT_FALSE(is_alphanumeric(U'!'));
}

TEST(ByteLevelTest, TableIsABijectionOntoPrintableChars) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    char32_t c = byte_to_char(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(c).second);
    EXPECT_EQ(char_to_byte(c), b);
  }
  EXPECT_EQ(byte_to_char(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_to_char('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_to_char('A'), static_cast<char32_t>('A'));
  EXPECT_EQ(bytes_to_byte_level("a b\n"), "aĠbĊ");
  std::string raw;
  ASSERT_TRUE(byte_level_to_bytes("ĠâĢĶ", &raw));  // " —"
  EXPECT_EQ(raw, " \xE2\x80\x94");
  EXPECT_FALSE(byte_level_to_bytes("日", &raw));
}

TEST(RegexTest, UnicodePropertiesAndErrors) {
  auto re = Regex::compile("\\p{L}+");
  ASSERT_TRUE(re.ok()) << re.status().to_string();
  size_t b = 0, e = 0;
  std::string s = "12 héllo";
  ASSERT_EQ((*re)->find(s, 0, &b, &e), 1);
  EXPECT_EQ(s.substr(b, e - b), "héllo");
  EXPECT_EQ((*re)->find("123", 0, &b, &e), 0);
  auto bad = Regex::compile("(unclosed");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("(unclosed"), std::string::npos);
  auto lit = Regex::literal("a.b");
  ASSERT_TRUE(lit.ok());
  EXPECT_EQ((*lit)->find("axb a.b", 0, &b, &e), 1);
  EXPECT_EQ(b, 4u);
}

}  // namespace
}  // namespace strata::tok
