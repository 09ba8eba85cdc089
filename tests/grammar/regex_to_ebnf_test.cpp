// regex_to_ebnf: the grammar of a regex accepts exactly the strings the regex matches in full
// (checked against std::regex on every short string over a small alphabet), the Python syntax
// std::regex lacks (named groups, \Z-free anchors, lazy quantifiers), and errors with positions.
#include <gtest/gtest.h>

#include <regex>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace strata::grammar {
namespace {

std::shared_ptr<const Grammar> compile(const std::string& regex) {
  auto ebnf = regex_to_ebnf(regex);
  EXPECT_TRUE(ebnf.ok()) << ebnf.status().message() << " for " << regex;
  if (!ebnf.ok()) return nullptr;
  auto g = Grammar::parse_ebnf(*ebnf);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << *ebnf;
  return g.ok() ? *g : nullptr;
}

std::string error_of(const std::string& regex) {
  auto r = regex_to_ebnf(regex);
  return r.ok() ? "(converted)" : r.status().message();
}

// All strings over `alphabet` of length <= max_len.
std::vector<std::string> all_strings(const std::string& alphabet, int max_len) {
  std::vector<std::string> out = {""};
  size_t begin = 0;
  for (int len = 1; len <= max_len; ++len) {
    size_t end = out.size();
    for (size_t i = begin; i < end; ++i)
      for (char c : alphabet) out.push_back(out[i] + c);
    begin = end;
  }
  return out;
}

TEST(RegexToEbnf, SameLanguageAsStdRegexOnShortStrings) {
  const std::vector<std::string> patterns = {
      "abc",          "a|b|",       "(ab|a)(c|bcd)", "a*b+c?",          "a{2}",      "a{1,3}b{2,}",
      "[a-c]+",       "[^ab]*",     "(?:ab)*c",      "\\d+\\.\\d{1,2}", "\\w\\s\\W", "[\\d.]+",
      "a.c",          "(a|b){0,3}", "[-a]+",         "[a-]b",           "\\-?1",     "()a",
      "a*?b+?c??",    "\\S\\D",     "(a(b(c)?)?)+",  "[.][*]",          "a{,2}",     "a{2,2}b{0}",
      "\\x61\\u0062", "[\\]\\\\]",  "1{x",
  };
  const auto inputs = all_strings("abc1. -x\\]*{", 4);
  for (const auto& p : patterns) {
    auto g = compile(p);
    ASSERT_NE(g, nullptr) << p;
    // Python reads "{,2}" as "{0,2}" and a '{' that starts no quantifier as a literal.
    std::string ecma = p == "a{,2}" ? "a{0,2}" : p == "1{x" ? "1\\{x" : p;
    std::regex re(ecma, std::regex::ECMAScript);
    int accepted = 0;
    for (const auto& s : inputs) {
      bool want = std::regex_match(s, re);
      accepted += want;
      ASSERT_EQ(g->accepts(s), want) << "pattern " << p << " on '" << s << "'\n"
                                     << *regex_to_ebnf(p);
    }
    if (p != "a{2,2}b{0}" && p != "1{x") {
      EXPECT_GT(accepted, 0) << p;
    }
  }
}

TEST(RegexToEbnf, PythonSyntax) {
  auto named = compile("(?P<year>\\d{4})-(?<m>\\d\\d)");
  ASSERT_NE(named, nullptr);
  EXPECT_TRUE(named->accepts("2024-05"));
  EXPECT_FALSE(named->accepts("2024-5"));
  auto anchored = compile("^(yes|no)$");
  ASSERT_NE(anchored, nullptr);
  EXPECT_TRUE(anchored->accepts("yes"));
  EXPECT_FALSE(anchored->accepts("yesno"));
  auto alt_anchors = compile("^a$|^b$");
  ASSERT_NE(alt_anchors, nullptr);
  EXPECT_TRUE(alt_anchors->accepts("b"));
  auto unicode = compile("\xC3\xA9+[\\u4e00-\\u9fff]");
  ASSERT_NE(unicode, nullptr);
  EXPECT_TRUE(unicode->accepts("\xC3\xA9\xC3\xA9\xE4\xB8\xAD"));
  EXPECT_FALSE(
      unicode->accepts("\xC3\xA9"
                       "a"));
  // A ']' first in a class is a literal (ECMAScript differs).
  auto bracket = compile("[]a]+[^]a]");
  ASSERT_NE(bracket, nullptr);
  EXPECT_TRUE(bracket->accepts("]a]b"));
  EXPECT_FALSE(bracket->accepts("]a]"));
  auto dot = compile("a.b");
  ASSERT_NE(dot, nullptr);
  EXPECT_TRUE(
      dot->accepts("a\xE2\x82\xAC"
                   "b"));
  EXPECT_FALSE(dot->accepts("a\nb"));
}

TEST(RegexToEbnf, ErrorsNamePosition) {
  EXPECT_EQ(error_of("ab\\bc"), "regex: word boundaries (\\b) are not supported at position 2");
  EXPECT_EQ(error_of("(a"), "regex: missing ')' at position 0");
  EXPECT_EQ(error_of("a)"), "regex: unbalanced ')' at position 1");
  EXPECT_EQ(error_of("[a"), "regex: unterminated character class at position 0");
  EXPECT_EQ(error_of("a**"), "regex: multiple repeat at position 2");
  EXPECT_EQ(error_of("*a"), "regex: nothing to repeat at position 0");
  EXPECT_EQ(error_of("(a)\\1"), "regex: backreferences are not supported at position 3");
  EXPECT_EQ(error_of("a(?=b)"), "regex: unsupported group syntax '(?=' at position 1");
  EXPECT_EQ(error_of("(?i)a"), "regex: unsupported group syntax '(?i' at position 0");
  EXPECT_EQ(error_of("a^b"),
            "regex: '^' is supported only at the start of the pattern at position 1");
  EXPECT_EQ(error_of("a$b"),
            "regex: '$' is supported only at the end of the pattern at position 1");
  EXPECT_EQ(error_of("[z-a]"), "regex: bad character range (reversed) at position 1");
  EXPECT_EQ(error_of("a{3,1}"), "regex: min repeat greater than max repeat at position 1");
  EXPECT_EQ(error_of("a++"), "regex: possessive quantifiers are not supported at position 2");
  EXPECT_EQ(error_of("\\p{L}"), "regex: unsupported escape '\\p' at position 0");
  EXPECT_EQ(error_of("a{1,20000}"), "regex: repetition count above 10000 at position 1");
  EXPECT_EQ(error_of("abc\\"), "regex: trailing backslash at position 3");
}

}  // namespace
}  // namespace strata::grammar
