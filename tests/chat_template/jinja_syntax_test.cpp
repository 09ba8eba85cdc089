// Lexing and parsing: whitespace control as transformers configures Jinja (trim_blocks,
// lstrip_blocks), tag modifiers, comments, raw blocks, literals and operator precedence.
// Expected outputs are what Jinja2 3.1 renders under the same settings.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace strata::jinja {
namespace {

using testing::render;

TEST(JinjaWhitespace, TrimBlocksEatsTheNewlineAfterABlockTag) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  EXPECT_EQ(render("{# note #}\nx"), "x");
  // Only one newline is removed, and print tags do not trim.
  EXPECT_EQ(render("{% if true %}\n\nx{% endif %}"), "\nx");
  EXPECT_EQ(render("{{ 'a' }}\nb"), "a\nb");
}

TEST(JinjaWhitespace, LstripBlocksRemovesIndentationBeforeBlockTags) {
  EXPECT_EQ(render("a\n  {% if true %}\n    x\n  {% endif %}\nb"), "a\n    x\nb");
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");      // start of the template counts
  EXPECT_EQ(render("a  {% if true %}x{% endif %}"), "a  x");  // not at line start
  EXPECT_EQ(render("  {{ 'v' }}"), "  v");                    // print tags are not stripped
  EXPECT_EQ(render("\t{# c #}\ny"), "y");
}

TEST(JinjaWhitespace, MinusAndPlusModifiers) {
  EXPECT_EQ(render("a  {%- if true -%}  x  {%- endif -%}  b"), "axb");
  EXPECT_EQ(render("a \n {{- 'x' -}} \n b"), "axb");
  EXPECT_EQ(render("a {%+ if true %}b{% endif %} c"), "a b c");
  EXPECT_EQ(render("{% if true +%}\nx{% endif %}"), "\nx");
  EXPECT_EQ(render("{#- comment -#}  z"), "z");
  EXPECT_EQ(render("{% for x in [1,2] -%}\n {{ x }}\n{%- endfor %}"), "12");
}

TEST(JinjaWhitespace, NewlinesAreNormalizedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(render("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(render("a\n\n"), "a\n");
  EXPECT_EQ(render("A\n{% if true %}\n  B\n{% endif %}\n  {% if true %}C{% endif %}\nD\n"),
            "A\n  B\nCD");
}

TEST(JinjaWhitespace, RawBlocksAreNotInterpreted) {
  EXPECT_EQ(render("{% raw %}{{ not processed }}{% endraw %}"), "{{ not processed }}");
  EXPECT_EQ(render("x\n  {% raw %}\n  {{ a }}\n  {% endraw %}\ny"), "x\n\n  {{ a }}\ny");
}

TEST(JinjaLiterals, NumbersStringsAndContainers) {
  EXPECT_EQ(render("{{ 1 }} {{ 1.0 }} {{ 1.5e3 }} {{ -0.5 }} {{ 1_000 }} {{ 0x1F }} {{ 0b101 }}"),
            "1 1.0 1500.0 -0.5 1000 31 5");
  EXPECT_EQ(render("{{ true }} {{ False }} {{ none }} {{ None }}"), "True False None None");
  EXPECT_EQ(render("{{ [1, 'a', none, true, 2.5] }} {{ {'a': 1, 'b': [1]} }} {{ (1,) }} {{ () }}"),
            "[1, 'a', None, True, 2.5] {'a': 1, 'b': [1]} (1,) ()");
  EXPECT_EQ(render("{{ 'a' 'b' }}|{{ \"it's\" }}|{{ 'x\\u00e9\\x41\\n' }}|{{ '\\q' }}"),
            "ab|it's|xéA\n|\\q");
  EXPECT_EQ(render("{{ '\\101\\x42\\u0043\\U0001F600' }}"), "ABC😀");
}

TEST(JinjaLiterals, ReprOfStringsInsideContainersFollowsPython) {
  EXPECT_EQ(render("{{ [\"it's\", 'a\"b', 'x\\ny', '\\x01', '\\u00e9', '\\u200b'] }}"),
            "[\"it's\", 'a\"b', 'x\\ny', '\\x01', 'é', '\\u200b']");
  EXPECT_EQ(render("{{ ['a\\'b\"c'] }}"), "['a\\'b\"c']");
}

TEST(JinjaLiterals, FloatsPrintLikePython) {
  EXPECT_EQ(render("{{ 0.1 + 0.2 }}|{{ 1e100 }}|{{ 1.5e-7 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|"
                   "{{ 0.00001 }}|{{ -0.0 }}|{{ 1/3 }}|{{ 5e-324 }}"),
            "0.30000000000000004|1e+100|1.5e-07|1e+16|1000000000000000.0|0.0001|1e-05|-0.0|"
            "0.3333333333333333|5e-324");
}

TEST(JinjaOperators, ArithmeticFollowsPython) {
  EXPECT_EQ(render("{{ 10 / 4 }} {{ 10 // 4 }} {{ -10 // 4 }} {{ 10 % 3 }} {{ -10 % 3 }} "
                   "{{ 2 ** 8 }} {{ 2 ** -2 }} {{ 7.0 // 2 }} {{ 7.5 % 2 }} {{ 6 / 2 }}"),
            "2.5 2 -3 1 2 256 0.25 3.0 1.5 3.0");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1] * 3 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none ~ true }}"),
            "ababab [1, 1, 1] [1, 2] a1NoneTrue");
  EXPECT_EQ(render("{{ true + 1 }} {{ true * 3 }} {{ -true }}"), "2 3 -1");
}

TEST(JinjaOperators, PrecedenceMatchesJinja) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }}"),
            "3 9 4 64");
  // Filters bind tighter than operators; `~` sits between + and *.
  EXPECT_EQ(render("{{ 1 + 2 | string }}"),
            "<error: template error at line 1: unsupported operand "
            "type(s) for +: 'int' and 'str'>");
  EXPECT_EQ(render("{{ 'abc' | upper ~ 'd' }}|{{ (1 + 2) ~ 3 }}|{{ 2 * 3 ~ 4 }}"), "ABCd|33|64");
  EXPECT_EQ(render("{{ 1 + 2 ~ 3 }}"),
            "<error: template error at line 1: unsupported operand "
            "type(s) for +: 'int' and 'str'>");
  EXPECT_EQ(render("{{ not true == false }} {{ not 1 in [1] }} {{ 1 if 0 else 2 if 0 else 3 }}"),
            "True False 3");
}

TEST(JinjaOperators, ComparisonsAndMembership) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 'b' > 'a' }} "
                   "{{ [1,2] < [1,3] }} {{ (1,) == [1] }} {{ {'a':1} == {'a':1.0} }}"),
            "True False True True True False True");
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}"),
            "True True True True");
  EXPECT_EQ(render("{{ true and 'x' }} {{ 0 or 'y' }} {{ none or 0 }} {{ 'a' and 0 }}"), "x y 0 0");
}

TEST(JinjaOperators, ConditionalExpressionWithoutElseIsUndefined) {
  EXPECT_EQ(render("[{{ 'x' if false }}][{{ 'y' if true }}]"), "[][y]");
}

TEST(JinjaSyntax, LineNumbersAppearInErrors) {
  EXPECT_EQ(testing::error_of("a\nb\n{{ 1 + }}"),
            "template syntax error at line 3: unexpected 'end of print statement'");
  EXPECT_EQ(testing::error_of("line1\n{% for m in messages %}\n{{ m.x.y }}\n{% endfor %}",
                              R"({"messages": [{}]})"),
            "template error at line 3: 'dict object' has no attribute 'x'");
}

}  // namespace
}  // namespace strata::jinja
