// json_schema_to_ebnf, json_object_ebnf and choice_to_ebnf: the grammar of each keyword accepts
// valid JSON texts and rejects invalid ones (through Grammar::accepts), and unsupported schemas
// are errors naming the keyword and its JSON path.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace strata::grammar {
namespace {

using Json = nlohmann::ordered_json;

struct Compiled {
  std::string ebnf;
  std::shared_ptr<const Grammar> grammar;
};

Compiled compile(const std::string& schema, JsonSchemaOptions options = {}) {
  auto ebnf = json_schema_to_ebnf(Json::parse(schema), options);
  EXPECT_TRUE(ebnf.ok()) << ebnf.status().message() << "\n" << schema;
  if (!ebnf.ok()) return {};
  auto g = Grammar::parse_ebnf(*ebnf);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << *ebnf;
  return {*ebnf, g.ok() ? *g : nullptr};
}

JsonSchemaOptions compact() {
  return {.any_whitespace = false};
}

// Each of `yes` is accepted, each of `no` rejected; a `yes` must be valid JSON.
void check(const Compiled& c, const std::vector<std::string>& yes,
           const std::vector<std::string>& no) {
  ASSERT_NE(c.grammar, nullptr);
  for (const auto& s : yes) {
    EXPECT_TRUE(Json::accept(s)) << "test bug: not JSON: " << s;
    EXPECT_TRUE(c.grammar->accepts(s)) << "should accept: " << s << "\n" << c.ebnf;
  }
  for (const auto& s : no)
    EXPECT_FALSE(c.grammar->accepts(s)) << "should reject: " << s << "\n" << c.ebnf;
}

std::string error_of(const std::string& schema, JsonSchemaOptions options = {}) {
  auto r = json_schema_to_ebnf(Json::parse(schema), options);
  return r.ok() ? "(converted)" : r.status().message();
}

TEST(JsonSchema, PrimitiveTypes) {
  check(compile(R"({"type":"string"})", compact()),
        {R"("")", R"("a b")", R"("\"\\\n\u00e9\ud83d\ude00")", "\"h\xC3\xA9\""},
        {R"(a)", R"("a)", "\"\n\"", R"("\x")", R"("\ud800")", "1"});
  check(compile(R"({"type":"integer"})", compact()), {"0", "-1", "42", "123456789012345678"},
        {"-0", "01", "1.5", "1e3", "\"1\"", "+1", "1234567890123456789"});
  check(compile(R"({"type":"number"})", compact()),
        {"0", "-0", "1.5", "-0.25", "1e10", "2E-5", "1.5e+3"},
        {"01", ".5", "1.", "1e", "-", "NaN"});
  check(compile(R"({"type":"boolean"})", compact()), {"true", "false"}, {"null", "1", "True"});
  check(compile(R"({"type":"null"})", compact()), {"null"}, {"false", "\"null\""});
  check(compile(R"({"type":["string","null"]})", compact()), {"null", R"("x")"}, {"1"});
  check(compile(R"({"type":"string","nullable":true})", compact()), {"null", R"("x")"}, {"1"});
}

TEST(JsonSchema, EmptySchemaIsAnyValue) {
  for (const char* s : {"{}", "true", R"({"description":"anything"})"}) {
    check(compile(s, compact()),
          {"1", "null", R"("s")", R"({"a":[1,{"b":null}],"c":"d"})", "[]", "{}", "[[[]]]"},
          {"", "{", "[1,]", R"({"a"})", "nul"});
  }
}

TEST(JsonSchema, PropertiesInOrderWithOptionalOnesAndCommas) {
  auto c = compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
      "c":{"type":"boolean"}},"required":["b"],"additionalProperties":false})",
                   compact());
  check(c,
        {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})",
         R"({"a":1,"b":"x","c":false})"},
        {R"({})", R"({"a":1})", R"({"b":"x",})", R"({,"b":"x"})", R"({"a":1,,"b":"x"})",
         R"({"b":"x","a":1})", R"({"b":1})", R"({"b":"x","d":1})", R"({"a":1"b":"x"})"});
  // All optional: the empty object too.
  check(compile(R"({"properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
      "additionalProperties":false})",
                compact()),
        {"{}", R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"}, {R"({,})", R"({"a":1,})"});
}

TEST(JsonSchema, AdditionalProperties) {
  // Default: allowed, any value, never repeating a declared name.
  auto open = compile(R"({"properties":{"a":{"type":"integer"}}})", compact());
  check(open, {R"({"a":1,"b":"x"})", R"({"zz":[1]})", R"({"ab":1,"a2":{}})", "{}", R"({"a":1})"},
        {R"({"a":1,"a":"x"})", R"({"a":"x"})", R"({"b":1,"a":1})"});
  auto typed =
      compile(R"({"properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
              compact());
  check(typed, {R"({"a":1,"b":"x","c":"y"})"}, {R"({"a":1,"b":2})"});
  JsonSchemaOptions closed = compact();
  closed.disable_additional_properties = true;
  check(compile(R"({"properties":{"a":{"type":"integer"}}})", closed), {R"({"a":1})", "{}"},
        {R"({"a":1,"b":2})"});
  // Required names that are not declared take the additionalProperties schema.
  check(compile(R"({"type":"object","required":["id"],"additionalProperties":{"type":"integer"}})",
                compact()),
        {R"({"id":1})", R"({"id":1,"x":2})"}, {"{}", R"({"id":"s"})"});
  // Empty object schema with nothing allowed.
  check(compile(R"({"type":"object","additionalProperties":false})", compact()), {"{}"},
        {R"({"a":1})"});
}

TEST(JsonSchema, StrictModeRequiresEverythingAndClosesObjects) {
  JsonSchemaOptions strict = compact();
  strict.strict = true;
  auto c = compile(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}}})", strict);
  check(c, {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"a":1,"b":"x","c":1})"});
}

TEST(JsonSchema, PropertyNamesNeedingEscapes) {
  auto c = compile(
      R"({"properties":{"a\"b":{"type":"integer"},"é":{"type":"null"},"new\nline":{"const":1}},
      "additionalProperties":false})",
      compact());
  check(c, {R"({"a\"b":1})", "{\"\xC3\xA9\":null}", R"({"new\nline":1})"}, {R"({"a"b":1})"});
}

TEST(JsonSchema, EnumAndConst) {
  auto c = compile(
      R"({"enum":["a","q\"uote","back\\slash","new\nline",1,2.5,null,true,[1,"x"],{"k":"v"}]})",
      compact());
  check(c,
        {R"("a")", R"("q\"uote")", R"("back\\slash")", R"("new\nline")", "1", "2.5", "null", "true",
         R"([1,"x"])", R"({"k":"v"})"},
        {R"("b")", "2", "false", R"([1])", R"({"k":"w"})", R"("q"uote")"});
  check(compile(R"({"const":"fixed"})", compact()), {R"("fixed")"}, {R"("other")"});
  // enum filtered by type; nullable adds null.
  check(compile(R"({"type":"string","enum":["a",1],"nullable":true})", compact()),
        {R"("a")", "null"}, {"1"});
}

TEST(JsonSchema, Arrays) {
  check(compile(R"({"type":"array","items":{"type":"integer"}})", compact()),
        {"[]", "[1]", "[1,2,3]"}, {"[1,]", "[,1]", R"(["a"])", "[1 2]"});
  check(compile(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3})",
                compact()),
        {"[1,2]", "[1,2,3]"}, {"[]", "[1]", "[1,2,3,4]"});
  check(compile(R"({"type":"array","maxItems":0})", compact()), {"[]"}, {"[1]"});
  check(compile(R"({"type":"array","minItems":1})", compact()), {"[1]", R"([{},"a"])"}, {"[]"});
  auto tuple = compile(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],
      "items":false})",
                       compact());
  check(tuple, {"[]", R"(["a"])", R"(["a",1])"}, {"[1]", R"(["a",1,2])", R"(["a","b"])"});
  auto tuple_rest = compile(R"({"type":"array","prefixItems":[{"type":"string"}],
      "items":{"type":"boolean"},"minItems":2,"maxItems":3})",
                            compact());
  check(tuple_rest, {R"(["a",true])", R"(["a",true,false])"},
        {R"(["a"])", R"(["a",1])", R"(["a",true,true,true])"});
  // Draft-4 tuple form.
  check(compile(R"({"items":[{"type":"integer"}],"additionalItems":false})", compact()),
        {"[]", "[1]"}, {"[1,2]"});
  check(compile(R"({"type":"array","uniqueItems":false})", compact()), {"[1,1]"}, {});
}

TEST(JsonSchema, AnyOfOneOfAllOf) {
  check(compile(R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})", compact()),
        {"1", R"("a")"}, {R"("ab")", "null"});
  check(compile(R"({"oneOf":[{"type":"boolean"},{"type":"null"}]})", compact()), {"true", "null"},
        {"1"});
  // Sibling keywords are distributed into the branches.
  check(compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
      "additionalProperties":false,"anyOf":[{"required":["a"]},{"required":["b"]}]})",
                compact()),
        {R"({"a":1})", R"({"b":1})", R"({"a":1,"b":2})"}, {"{}"});
  JsonSchemaOptions closed = compact();
  closed.disable_additional_properties = true;
  auto all =
      compile(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
      {"properties":{"b":{"type":"string"}},"required":["b"]}]})",
              closed);
  check(all, {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"b":"x"})", R"({"a":1,"b":"x","c":1})"});
  check(compile(R"({"allOf":[{"type":"integer","minimum":0},{"maximum":5},{"minimum":2}]})",
                compact()),
        {"2", "5"}, {"1", "6"});
  // additionalProperties false in one branch forbids the other branch's properties (so does
  // one beside allOf: JSON Schema's well-known trap).
  EXPECT_NE(
      error_of(
          R"({"allOf":[{"properties":{"a":{}},"required":["a"]}],"additionalProperties":false})")
          .find("required property 'a'"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"allOf":[{"properties":{"a":{}},"additionalProperties":false},
      {"properties":{"b":{}},"required":["b"]}]})")
                .find("required property 'b'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"allOf":[{"type":"string"},{"type":"integer"}]})").find("no type"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"allOf":[{"pattern":"a"},{"pattern":"b"}]})").find("'pattern'"),
            std::string::npos);
}

TEST(JsonSchema, RefsAndRecursion) {
  auto tree = compile(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
      "properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},
      "required":["v"],"additionalProperties":false}}})",
                      compact());
  check(tree,
        {R"({"v":1})", R"({"v":1,"kids":[]})",
         R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]},{"v":4}]})"},
        {R"({"v":1,"kids":[{}]})", R"({"kids":[]})"});
  auto root_rec =
      compile(R"({"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},
      "additionalProperties":false})",
              compact());
  check(root_rec, {"{}", R"({"next":null})", R"({"next":{"next":{}}})"}, {R"({"next":1})"});
  check(compile(
            R"({"definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s"}},
      "required":["a"],"additionalProperties":false})",
            compact()),
        {R"({"a":"x"})"}, {R"({"a":1})"});
  // $ref with sibling keywords: both apply.
  check(compile(R"({"$defs":{"n":{"type":"integer"}},"$ref":"#/$defs/n","minimum":3})", compact()),
        {"3"}, {"2"});
  EXPECT_NE(error_of(R"({"$ref":"#/$defs/missing"})").find("does not resolve"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"https://example.com/s.json"})").find("local"), std::string::npos);
  EXPECT_NE(
      error_of(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})").find("refers back"),
      std::string::npos);
}

TEST(JsonSchema, StringLengthsCountCharacters) {
  auto c = compile(R"({"type":"string","minLength":2,"maxLength":3})", compact());
  check(c, {R"("ab")", R"("abc")", R"("\n\"")", "\"\xC3\xA9\xC3\xA9\"", R"("\ud83d\ude00a")"},
        {R"("a")", R"("abcd")", "\"\xC3\xA9\"", R"("\u0041")"});
}

TEST(JsonSchema, LargeLengthsAndCounts) {
  auto quoted = [](size_t n) {
    std::string s(n + 2, 'a');
    s.front() = s.back() = '"';
    return s;
  };
  check(compile(R"({"type":"string","minLength":9999,"maxLength":10000})", compact()),
        {quoted(9999), quoted(10000)}, {quoted(9998), quoted(10001)});
  auto ones = [](size_t n) {
    std::string s = "[";
    for (size_t i = 0; i < n; ++i) s += i ? ",1" : "1";
    return s + "]";
  };
  check(compile(R"({"type":"array","items":{"type":"integer"},"minItems":3000,"maxItems":3001})",
                compact()),
        {ones(3000), ones(3001)}, {ones(2999), ones(3002)});
  // Larger counts are refused naming the keyword (the engine expands counted repetitions).
  EXPECT_EQ(error_of(R"({"properties":{"s":{"type":"string","maxLength":65535}}})"),
            "'minLength'/'maxLength' above 10000 at $.properties.s is not supported");
  EXPECT_EQ(error_of(R"({"type":"array","minItems":20000})"),
            "'minItems'/'maxItems' above 10000 at $ is not supported");
}

TEST(JsonSchema, Patterns) {
  check(compile(R"({"type":"string","pattern":"^[a-z]{2}\\d+$"})", compact()),
        {R"("ab1")", R"("xy123")"}, {R"("a1")", R"("ab")", R"("AB1")"});
  // Characters that JSON escapes appear escaped.
  check(compile(R"({"type":"string","pattern":"a\"b\\\\c\\n?"})", compact()),
        {R"("a\"b\\c")", R"("a\"b\\c\n")"}, {R"("a"b\c")"});
  check(compile(R"({"pattern":"[^a]"})", compact()),
        {R"("b")", R"("\"")", R"("\\")", R"("\u0001")"}, {R"("a")", R"("bb")"});
  EXPECT_NE(error_of(R"({"type":"string","pattern":"\\bword"})").find("$"), std::string::npos);
}

TEST(JsonSchema, PatternsAndFormatsWithLengths) {
  check(compile(R"({"type":"string","pattern":"^[a-z]+$","maxLength":3})", compact()),
        {R"("a")", R"("abc")"}, {R"("")", R"("abcd")"});
  check(
      compile(R"({"type":"string","pattern":"^id-\\d*$","minLength":5,"maxLength":6})", compact()),
      {R"("id-12")", R"("id-123")"}, {R"("id-1")", R"("id-1234")"});
  check(compile(R"({"type":"string","pattern":"^(a|bb)$","maxLength":2})", compact()), {R"("bb")"},
        {});
  EXPECT_NE(error_of(R"({"type":"string","pattern":"^(a|bb)+$","maxLength":3})")
                .find("cannot be combined"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"^abc$","minLength":4})").find("no string"),
            std::string::npos);
  check(compile(R"({"type":"string","format":"email","minLength":1,"maxLength":254})", compact()),
        {R"("a@b.co")"}, {});
  check(compile(R"({"type":"string","format":"date","minLength":10})", compact()),
        {R"("2020-01-01")"}, {});
  EXPECT_NE(
      error_of(R"({"type":"string","format":"email","maxLength":100})").find("'format' 'email'"),
      std::string::npos);
}

TEST(JsonSchema, Formats) {
  auto date = compile(R"({"type":"string","format":"date"})", compact());
  check(date, {R"("2024-02-29")", R"("2000-02-29")", R"("2023-12-31")", R"("2023-04-30")"},
        {R"("2023-02-29")", R"("1900-02-29")", R"("2023-04-31")", R"("2023-13-01")",
         R"("2023-00-10")", R"("2023-1-1")"});
  check(compile(R"({"format":"time"})", compact()), {R"("23:59:59Z")", R"("00:00:00.123+05:30")"},
        {R"("24:00:00Z")", R"("12:60:00Z")", R"("12:00:00")"});
  check(compile(R"({"format":"date-time"})", compact()), {R"("2024-01-31T10:20:30Z")"},
        {R"("2024-01-31 10:20:30")"});
  check(compile(R"({"format":"email"})", compact()), {R"("a.b+c@example.com")"},
        {R"("a@b")", R"(".a@b.com")", R"("a..b@c.com")"});
  check(compile(R"({"format":"uuid"})", compact()), {R"("123e4567-e89b-12d3-a456-426614174000")"},
        {R"("123e4567e89b12d3a456426614174000")"});
  check(compile(R"({"format":"ipv4"})", compact()), {R"("192.168.0.1")", R"("255.255.255.255")"},
        {R"("256.1.1.1")", R"("1.2.3")", R"("01.2.3.4")"});
  check(compile(R"({"format":"ipv6"})", compact()), {R"("2001:db8:0:0:0:0:2:1")"},
        {R"("2001:db8::1")"});
  check(compile(R"({"format":"uri"})", compact()),
        {R"("https://example.com/a/b?x=1")", R"("ftp://h:21")"},
        {R"("example.com")", R"("https://")"});
  EXPECT_NE(error_of(R"({"properties":{"d":{"type":"string","format":"duration"}}})")
                .find("'duration' at $.properties.d"),
            std::string::npos);
}

// Every integer in a window around [lo, hi] is accepted exactly when it is in range.
void check_integer_range(const std::string& schema, int64_t lo, int64_t hi, int64_t from,
                         int64_t to) {
  auto c = compile(schema, compact());
  ASSERT_NE(c.grammar, nullptr);
  for (int64_t v = from; v <= to; ++v)
    EXPECT_EQ(c.grammar->accepts(std::to_string(v)), v >= lo && v <= hi)
        << v << " " << schema << "\n"
        << c.ebnf;
}

TEST(JsonSchema, IntegerRangesAreExact) {
  check_integer_range(R"({"type":"integer","minimum":0,"maximum":255})", 0, 255, -300, 1300);
  check_integer_range(R"({"type":"integer","minimum":-37,"maximum":1234})", -37, 1234, -1500, 1500);
  check_integer_range(R"({"type":"integer","exclusiveMinimum":-100,"exclusiveMaximum":-7})", -99,
                      -8, -300, 300);
  check_integer_range(R"({"type":"integer","minimum":1.5,"maximum":99.9})", 2, 99, -10, 200);
  check_integer_range(R"({"type":"integer","minimum":95})", 95, INT64_MAX, -10, 1200);
  check_integer_range(R"({"type":"integer","maximum":-3})", INT64_MIN, -3, -1200, 100);
  check_integer_range(R"({"type":"integer","minimum":5,"exclusiveMinimum":true})", 6, INT64_MAX, 0,
                      20);
  check_integer_range(R"({"type":"integer","format":"int32","minimum":2147483640})", 2147483640,
                      2147483647, 2147483600, 2147483700);
  auto c = compile(R"({"type":"integer","minimum":0})", compact());
  check(c, {"12345678901234"}, {"-0", "-1", "007"});
  EXPECT_NE(error_of(R"({"type":"integer","minimum":5,"maximum":4})").find("no integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"integer","multipleOf":3})").find("'multipleOf'"),
            std::string::npos);
}

TEST(JsonSchema, NumberRanges) {
  auto nonneg = compile(R"({"type":"number","minimum":0})", compact());
  check(nonneg, {"0", "0.5", "3", "12.125", "0.000"}, {"-1", "-0.5", "-0", "1e5"});
  auto open = compile(R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":10})", compact());
  check(open, {"0.000001", "0.5", "9.999999", "5"},
        {"0", "0.0", "10", "10.0", "-0.5", "0.0000001"});
  auto closed = compile(R"({"type":"number","minimum":-2,"maximum":3})", compact());
  check(closed, {"-2", "-2.0", "-1.5", "0", "3", "3.00", "2.75"}, {"-2.01", "3.01", "4", "-3"});
  auto neg = compile(R"({"type":"number","maximum":-1,"exclusiveMinimum":-5})", compact());
  check(neg, {"-1", "-4.9", "-1.0"}, {"-5", "-0.5", "0", "-5.5"});
  // Above 2^31 only integers (a fraction could round onto the bound).
  check(compile(R"({"type":"number","exclusiveMaximum":4294967296})", compact()),
        {"4294967295", "-7"}, {"4294967296", "1.5"});
  check(compile(R"({"type":"number","multipleOf":1,"minimum":0,"maximum":2})", compact()),
        {"0", "2"}, {"1.5"});
  EXPECT_NE(error_of(R"({"properties":{"p":{"type":"number","minimum":0.1234567}}})")
                .find("$.properties.p"),
            std::string::npos);
  // Decimal bounds, compared digit by digit (at most 6 fraction digits).
  check(compile(R"({"type":"number","minimum":0.5,"exclusiveMaximum":2.25})", compact()),
        {"0.5", "0.50", "0.500001", "1", "2", "2.249999", "2.2", "0.9"},
        {"0.499999", "0.4", "2.25", "2.250", "2.3", "3", "-1", "0", "0.05"});
  check(compile(R"({"type":"number","exclusiveMinimum":-1.75,"maximum":-0.125})", compact()),
        {"-1.749999", "-1", "-0.125", "-0.2", "-1.7"},
        {"-1.75", "-1.8", "-0.124", "-0.12", "0", "-2"});
  check(compile(R"({"type":"number","minimum":0.25,"maximum":0.75})", compact()),
        {"0.25", "0.5", "0.75", "0.750000", "0.3"}, {"0.2", "0.76", "0.7500001", "1", "0"});
  EXPECT_NE(
      error_of(R"({"type":"number","minimum":0.5,"maximum":3000000000})").find("integer bounds"),
      std::string::npos);
  EXPECT_NE(error_of(R"({"type":"number","multipleOf":0.5})").find("'multipleOf'"),
            std::string::npos);
}

// A decimal the grammar allows must not round (as a double) onto or across a bound.
TEST(JsonSchema, BoundedNumbersNeverRoundOntoABound) {
  struct Case {
    const char* schema;
    double lo, hi;  // exclusive
    const char* must_accept;
  };
  for (const Case& c :
       {Case{R"({"type":"number","exclusiveMaximum":2147483647})", -1e300, 2147483647.0,
             "2147483646.999999"},
        Case{R"({"type":"number","exclusiveMinimum":2147483647})", 2147483647.0, 1e300,
             "2147483647.000001"},
        Case{R"({"type":"number","exclusiveMinimum":-2147483647,"exclusiveMaximum":0})",
             -2147483647.0, 0.0, "-2147483646.999999"},
        Case{R"({"type":"number","exclusiveMinimum":4294967296})", 4294967296.0, 1e300,
             "4294967297"}}) {
    auto g = compile(c.schema, compact());
    ASSERT_NE(g.grammar, nullptr);
    EXPECT_TRUE(g.grammar->accepts(c.must_accept)) << c.schema;
    int accepted = 0;
    for (double base : {c.lo, c.hi}) {
      if (std::fabs(base) > 1e200) continue;
      for (long long n = static_cast<long long>(base) - 1; n <= static_cast<long long>(base) + 1;
           ++n) {
        for (const char* frac : {"", ".0", ".000001", ".5", ".999999", ".9999999", ".00000001"}) {
          for (bool neg : {false, true}) {
            long long m = neg ? -n : n;
            std::string text = m < 0 ? "-" : "";
            text += std::to_string(m < 0 ? -m : m);
            text += frac;
            if (!g.grammar->accepts(text)) continue;
            ++accepted;
            double v = std::strtod(text.c_str(), nullptr);
            EXPECT_TRUE(v > c.lo && v < c.hi) << text << " rounds to " << v << " for " << c.schema;
          }
        }
      }
    }
    EXPECT_GT(accepted, 0) << c.schema;
  }
}

TEST(JsonSchema, WhitespaceIsOptionalAndBounded) {
  auto c =
      compile(R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},
      "required":["a"],"additionalProperties":false})");
  check(c,
        {R"({"a":[1,2]})", "{ \"a\" : [ 1 , 2 ] }", "{\n  \"a\": [\n    1,\n    2\n  ]\n}",
         "{\"a\":[]}", "{\"a\":[ ]}"},
        {"{" + std::string(21, ' ') + "\"a\":[]}", " {\"a\":[]}", "{\"a\":[]} "});
  check(compile(R"({"type":"object","properties":{"a":{"type":"integer"}}})", compact()),
        {R"({"a":1})"}, {R"({ "a":1})", R"({"a": 1})"});
}

TEST(JsonSchema, UnsupportedKeywordsNameKeywordAndPath) {
  EXPECT_EQ(error_of(R"({"properties":{"a":{"if":{"type":"string"}}}})"),
            "unsupported JSON Schema keyword 'if' at $.properties.a");
  EXPECT_EQ(error_of(R"({"properties":{"a":{"type":"array","items":{"not":{}}}}})"),
            "unsupported JSON Schema keyword 'not' at $.properties.a.items");
  EXPECT_EQ(error_of(R"({"anyOf":[{"type":"string"},{"type":"object","dependentRequired":{}}]})"),
            "unsupported JSON Schema keyword 'dependentRequired' at $.anyOf[1]");
  EXPECT_EQ(error_of(R"({"properties":{"odd key":{"type":"array","uniqueItems":true}}})"),
            "unsupported JSON Schema keyword 'uniqueItems' at $.properties['odd key']");
  EXPECT_EQ(error_of(R"({"$defs":{"x":{"contains":{}}},"$ref":"#/$defs/x"})"),
            "unsupported JSON Schema keyword 'contains' at $.$defs.x");
  EXPECT_NE(error_of(R"({"type":"object","minProperties":2})").find("'minProperties' at $"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"objekt"})").find("unknown type \"objekt\" at $.type"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"patternProperties":{"^a":{}}})").find("'patternProperties' at $"),
            std::string::npos);
  EXPECT_NE(error_of("false").find("allows no value"), std::string::npos);
  // Annotations and unknown keywords are ignored.
  EXPECT_EQ(error_of(R"({"title":"t","description":"d","examples":[1],"default":2,"$schema":"x",
      "$comment":"c","deprecated":true,"readOnly":true,"x-extension":1,"type":"integer"})"),
            "(converted)");
}

TEST(JsonSchema, RulePrefixKeepsGrammarsApart) {
  JsonSchemaOptions o = compact();
  o.rule_prefix = "tool1-";
  auto ebnf = json_schema_to_ebnf(
      Json::parse(R"({"type":"object","properties":{"a":{"type":"string"}}})"), o);
  ASSERT_TRUE(ebnf.ok());
  auto g = Grammar::parse_ebnf(*ebnf + "root ::= \"<\" tool1-root \">\"\n");
  ASSERT_TRUE(g.ok()) << g.status().message() << "\n" << *ebnf;
  EXPECT_TRUE((*g)->accepts(R"(<{"a":"x"}>)"));
  EXPECT_FALSE((*g)->accepts(R"({"a":"x"})"));
}

TEST(JsonObjectAndChoice, Grammars) {
  auto obj = Grammar::parse_ebnf(json_object_ebnf());
  ASSERT_TRUE(obj.ok()) << obj.status().message();
  for (const char* s : {"{}", R"({"a":[1,{"b":null}]})", "{ \"k\" : \"v\" }"})
    EXPECT_TRUE((*obj)->accepts(s)) << s;
  for (const char* s : {"[]", "1", "\"x\"", "{"}) EXPECT_FALSE((*obj)->accepts(s)) << s;
  auto choice = Grammar::parse_ebnf(
      choice_to_ebnf({"yes", "no", "a \"quoted\"\n\\ one", "\xC3\xA9t\xC3\xA9"}));
  ASSERT_TRUE(choice.ok()) << choice.status().message();
  for (const char* s : {"yes", "no", "a \"quoted\"\n\\ one", "\xC3\xA9t\xC3\xA9"})
    EXPECT_TRUE((*choice)->accepts(s)) << s;
  for (const char* s : {"", "ye", "yesno", "maybe"}) EXPECT_FALSE((*choice)->accepts(s)) << s;
}

}  // namespace
}  // namespace strata::grammar
