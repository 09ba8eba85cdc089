// EBNF parsing and whole-string acceptance (the pushdown machine over the compiled automata).
#include <gtest/gtest.h>

#include "grammar/automaton.h"
#include "grammar/grammar.h"

namespace strata::grammar {
namespace {

std::shared_ptr<const Grammar> parse(const std::string& text) {
  auto g = Grammar::parse_ebnf(text);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << text;
  return g.ok() ? *g : nullptr;
}

std::string parse_error(const std::string& text, const std::string& root = "root") {
  auto g = Grammar::parse_ebnf(text, root);
  return g.ok() ? std::string("(parsed)") : g.status().message();
}

TEST(Ebnf, LiteralsAlternativesAndSequences) {
  auto g = parse(R"(root ::= "ab" | "cd" "e")");
  EXPECT_TRUE(g->accepts("ab"));
  EXPECT_TRUE(g->accepts("cde"));
  EXPECT_FALSE(g->accepts("cd"));
  EXPECT_FALSE(g->accepts("abe"));
  EXPECT_FALSE(g->accepts(""));
  EXPECT_TRUE(g->accepts_prefix("c"));
  EXPECT_TRUE(g->accepts_prefix(""));
  EXPECT_FALSE(g->accepts_prefix("x"));
}

TEST(Ebnf, SingleQuotesEscapesAndComments) {
  auto g = parse("# a comment\nroot ::= 'it''s' \"\\n\\t\\\"\\x41\\u00e9\" # trailing\n");
  EXPECT_TRUE(g->accepts("its\n\t\"A\xC3\xA9"));
  EXPECT_FALSE(g->accepts("its\n\t\"A"));
}

TEST(Ebnf, CharacterClassesOverCodePoints) {
  auto g = parse(R"(root ::= [a-c0-9] [^a-z] [é-ê])");
  EXPECT_TRUE(g->accepts("a\xC3\xA9\xC3\xA9"));  // 'a', 'é', 'é'
  EXPECT_TRUE(g->accepts("9Z\xC3\xAA"));
  EXPECT_TRUE(g->accepts("0\xE4\xB8\xAD\xC3\xAA"));  // '中' is outside a-z
  EXPECT_FALSE(g->accepts("dZ\xC3\xAA"));
  EXPECT_FALSE(g->accepts("aq\xC3\xAA"));
  EXPECT_FALSE(g->accepts("aZ\xC3\xAB"));    // 'ë' past the range
  EXPECT_TRUE(g->accepts_prefix("aZ\xC3"));  // a partial character is a live prefix
  EXPECT_FALSE(g->accepts("aZ\xC3"));
}

TEST(Ebnf, AnyCharacterIsOneCodePointOfAnyLength) {
  auto g = parse(R"(root ::= . . . .)");
  EXPECT_TRUE(g->accepts("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80"));  // 1, 2, 3 and 4 bytes
  EXPECT_FALSE(g->accepts("abc"));
  EXPECT_FALSE(g->accepts("abc\xED\xA0\x80"));  // an encoded surrogate is not a character
  EXPECT_FALSE(g->accepts("abc\xC0\x80"));      // overlong encoding
}

TEST(Ebnf, Repetition) {
  auto g = parse(R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,3} "f"{2,})");
  EXPECT_TRUE(g->accepts("bddeff"));
  EXPECT_TRUE(g->accepts("aaabbcddeeefff"));
  EXPECT_FALSE(g->accepts("ddeff"));      // b+ needs one
  EXPECT_FALSE(g->accepts("bdeff"));      // d{2}
  EXPECT_FALSE(g->accepts("bddeeeeff"));  // e{1,3}
  EXPECT_FALSE(g->accepts("bddef"));      // f{2,}
  EXPECT_FALSE(g->accepts("bccddeff"));   // c?
}

TEST(Ebnf, RecursiveRulesBalanceBrackets) {
  auto g = parse(R"(
    root  ::= value
    value ::= "[" ws (value ("," ws value)*)? "]" | [0-9]+
    ws    ::= " "?
  )");
  EXPECT_TRUE(g->accepts("[]"));
  EXPECT_TRUE(g->accepts("[1,[2,[ 3]],[]]"));
  EXPECT_TRUE(g->accepts("42"));
  EXPECT_FALSE(g->accepts("[1,[2]"));
  EXPECT_FALSE(g->accepts("[1,]"));
  EXPECT_TRUE(g->accepts_prefix("[[[[[[[[1"));
  EXPECT_FALSE(g->accepts_prefix("[1]]"));
}

TEST(Ebnf, RightRecursionAndNullableRules) {
  auto g = parse(R"(
    root ::= list
    list ::= item list | ""
    item ::= "x" | opt "y"
    opt  ::= "z"?
  )");
  EXPECT_TRUE(g->accepts(""));
  EXPECT_TRUE(g->accepts("xyzyx"));
  EXPECT_FALSE(g->accepts("xz"));
}

TEST(Ebnf, RulesSpanLinesAndNamesMayHaveDashes) {
  auto g = parse("root ::= a-b\n  | \"q\"\na-b ::= \"p\"\n");
  EXPECT_TRUE(g->accepts("p"));
  EXPECT_TRUE(g->accepts("q"));
}

TEST(Ebnf, OtherStartRule) {
  auto g = Grammar::parse_ebnf("start ::= \"s\" other\nother ::= \"o\"", "start");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE((*g)->accepts("so"));
}

TEST(Ebnf, ErrorsNameTheProblemAndPlace) {
  EXPECT_NE(parse_error("root ::= foo").find("rule 'foo' is used but not defined"),
            std::string::npos);
  EXPECT_NE(parse_error("main ::= \"a\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [a-").find("unterminated character class"), std::string::npos);
  EXPECT_NE(parse_error("root ::= (\"a\"").find("unclosed '('"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
  EXPECT_NE(parse_error("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(parse_error("root ::= [z-a]").find("reversed"), std::string::npos);
  std::string where = parse_error("root ::= \"a\"\n  x ::= @");
  EXPECT_NE(where.find("line 2, column 9"), std::string::npos) << where;
  EXPECT_NE(parse_error("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(
      parse_error("root ::= a\na ::= b \"x\" | c\nb ::= \"y\"?\nc ::= b a").find("left-recursive"),
      std::string::npos);
  EXPECT_NE(parse_error("root ::= a\na ::= \"(\" a \")\"").find("matches nothing"),
            std::string::npos);
  EXPECT_NE(parse_error("root ::= \"a\"{20000}").find("not supported"), std::string::npos);
}

TEST(Ebnf, HostileNestingIsAnErrorNotACrash) {
  std::string deep = "root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')');
  EXPECT_NE(parse_error(deep).find("nested too deeply"), std::string::npos);
}

TEST(Ebnf, ToEbnfRoundTrips) {
  auto g = parse(R"(root ::= ("a" | [x-z\]]){2,3} item* "\n"
                    item ::= "\"" [^"\\] "é")");
  auto again = Grammar::parse_ebnf(g->to_ebnf());
  ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << g->to_ebnf();
  for (std::string s : {"ax", "a]z\n", "aaa\"q\xC3\xA9\n", "a\n", "aaaa\n"}) {
    EXPECT_EQ(g->accepts(s), (*again)->accepts(s)) << s;
  }
}

TEST(Ebnf, NonRecursiveRulesAreInlinedIntoOneAutomaton) {
  auto g = parse(R"(root ::= a b a
                    a ::= "x" | "y"
                    b ::= [0-9]+)");
  EXPECT_EQ(g->automaton().rules.size(), 1u);
  auto r = parse(R"g(root ::= v
                    v ::= "(" v ")" | "")g");
  EXPECT_EQ(r->automaton().rules.size(), 2u);  // root, and the recursive v
}

}  // namespace
}  // namespace strata::grammar
