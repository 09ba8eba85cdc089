// Builtin filters, tests, globals and the str/list/dict methods templates call, with Python's
// semantics. Expected outputs are what Jinja2 3.1 (with transformers' tojson) renders.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace strata::jinja {
namespace {

using testing::error_of;
using testing::render;

TEST(JinjaStringMethods, StripSplitAndFriends) {
  EXPECT_EQ(
      render("{{ '  hi  '.strip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}"
             "|{{ 'hi  '.rstrip() }}|{{ '\\u3000x\\u00a0'.strip() }}"),
      "hi|hi|hi\n|hi|x");
  EXPECT_EQ(
      render("{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|"
             "{{ 'a b c'.rsplit(' ', 1) }}|{{ '  a b  c '.split(none, 1) }}|"
             "{{ '  a b  c '.rsplit(none, 1) }}"),
      "['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a b', 'c']|['a', 'b  c ']|['  a b', 'c']");
  EXPECT_EQ(render("{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ 'x=y=z'.partition('=') }}|"
                   "{{ 'x=y=z'.rpartition('=') }}"),
            "['a', 'b', 'c']|('x', '=', 'y=z')|('x=y', '=', 'z')");
  // The Qwen3 reasoning extraction idiom.
  EXPECT_EQ(render("{% set c = '<think>\\nr\\n</think>\\n\\nanswer' %}"
                   "{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}|"
                   "{{ c.split('</think>')[-1].lstrip('\\n') }}"),
            "r|answer");
}

TEST(JinjaStringMethods, SearchCaseAndPadding) {
  EXPECT_EQ(render("{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x','lo')) }}"
                   "{{ 'Hello'.find('l') }}{{ 'Hello'.rfind('l') }}{{ 'Hello'.count('l') }}"
                   "{{ 'héllo'.find('l') }}{{ 'Hello'.startswith('l', 2) }}"),
            "TrueTrue2322True");
  EXPECT_EQ(render("{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'Hello'.upper() }}|"
                   "{{ 'a-b'.replace('-', '+') }}|{{ 'aaa'.replace('a','b',2) }}|{{ "
                   "'ab'.replace('', '.') }}"),
            "Hello World|Hello|HELLO|a+b|bba|.a.b.");
  EXPECT_EQ(render("{{ ', '.join(['a','b']) }}|{{ 'ab'.center(7, '*') }}|{{ '5'.zfill(3) }}|"
                   "{{ 'ab'.ljust(4,'.') }}|{{ 'ab'.rjust(4) }}"),
            "a, b|***ab**|005|ab..|  ab");
  EXPECT_EQ(
      render("{{ 'abc'.isalpha() }}{{ '123'.isdigit() }}{{ 'ab1'.isalnum() }}"
             "{{ '  '.isspace() }}{{ 'abc'.islower() }}{{ 'ABC'.isupper() }}{{ ''.isalpha() }}"),
      "TrueTrueTrueTrueTrueTrueFalse");
  EXPECT_EQ(render("{{ 'Ünïcödé'.upper() }}|{{ 'ΑΒ' | lower }}"), "ÜNÏCÖDÉ|αβ");
}

TEST(JinjaStringMethods, SlicingCountsCodePoints) {
  EXPECT_EQ(render("{{ 'héllo wörld'[1:4] }}|{{ 'abcdef'[::2] }}|{{ 'abcdef'[::-1] }}|"
                   "{{ 'abc'[-1] }}|{{ 'abc'[5] is defined }}|{{ 'héllo' | length }}"),
            "éll|ace|fedcba|c|False|5");
  EXPECT_EQ(
      render("{{ [1,2,3,4,5][1:-1] }}|{{ [1,2,3][-2:] }}|{{ [1,2,3,4][::-2] }}|{{ [1,2,3][10:] }}"),
      "[2, 3, 4]|[2, 3]|[4, 2]|[]");
}

TEST(JinjaStringMethods, Formatting) {
  EXPECT_EQ(
      render("{{ '{} and {}'.format('a', 1) }}|{{ '{0}{1}{0}'.format('x','y') }}|"
             "{{ '{name}!'.format(name='N') }}|{{ '{:>6}|{:<4}|{:^5}'.format('r','l','c') }}"),
      "a and 1|xyx|N!|     r|l   |  c  ");
  EXPECT_EQ(
      render(
          "{{ '{:.3f} {:5d} {:+d} {:,}'.format(3.14159, 42, 5, 1234567) }}|"
          "{{ '{:08.3f}'.format(3.14159) }}|{{ '{:#x}'.format(255) }}|{{ '{:%}'.format(0.25) }}"),
      "3.142    42 +5 1,234,567|0003.142|0xff|25.000000%");
  EXPECT_EQ(render("{{ '%s is %d years' % ('Bob', 30) }}|{{ '%.2f' % 3.14159 }}|"
                   "{{ '%5s|%-5s|' % ('a', 'b') }}|{{ '%x %o %%' % (255, 8) }}|"
                   "{{ '%(a)s-%(b)s' % {'a': 1, 'b': 2} }}|{{ '%05d' % 42 }}"),
            "Bob is 30 years|3.14|    a|b    ||ff 10 %|1-2|00042");
}

TEST(JinjaDictListMethods, GetItemsKeysValuesCountIndex) {
  EXPECT_EQ(
      render("{% set d = {'b': 1, 'a': 2} %}{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 9) }}"
             "{{ d.keys() | list }}{{ d.values() | list }}{{ d.items() | list }}"),
      "2None9['b', 'a'][1, 2][('b', 1), ('a', 2)]");
  EXPECT_EQ(render("{% set l = [1,2,2,3] %}{{ l.count(2) }}{{ l.index(3) }}"), "23");
}

TEST(JinjaFilters, SequenceFilters) {
  EXPECT_EQ(
      render("{{ [3,1,2] | sort }}|{{ [3,1,2] | sort(reverse=true) }}|{{ ['b','A','c'] | sort }}|"
             "{{ ['b','A','c'] | sort(case_sensitive=true) }}|"
             "{{ [{'n':2},{'n':1}] | sort(attribute='n') }}"),
      "[1, 2, 3]|[3, 2, 1]|['A', 'b', 'c']|['A', 'b', 'c']|[{'n': 1}, {'n': 2}]");
  EXPECT_EQ(render("{{ [1,2,3] | first }}{{ [1,2,3] | last }}{{ 'abc' | first }}{{ 'abc' | last }}"
                   "{{ [] | first is defined }}"),
            "13acFalse");
  EXPECT_EQ(render("{{ [1,2,3] | join(',') }}|{{ [1,none,'a'] | join }}|"
                   "{{ [{'a':'x'},{'a':'y'}] | join('-', attribute='a') }}"),
            "1,2,3|1Nonea|x-y");
  EXPECT_EQ(render("{{ [1,2,3] | length }}{{ 'hé' | length }}{{ {'a':1} | count }}"
                   "|{{ 'abc' | list }}|{{ {'a':1,'b':2} | list }}"),
            "321|['a', 'b', 'c']|['a', 'b']");
  EXPECT_EQ(render("{{ {'b':1,'a':2} | items | list }}|{{ {'b':1,'a':2} | dictsort }}|"
                   "{{ {'b':1,'a':2} | dictsort(by='value') }}|{{ foo | items | list }}"),
            "[('b', 1), ('a', 2)]|[('a', 2), ('b', 1)]|[('b', 1), ('a', 2)]|[]");
  EXPECT_EQ(render("{{ [1,2,2,3,1] | unique | list }}|{{ ['a','A','b'] | unique | list }}|"
                   "{{ [3,1,2] | min }}{{ [3,1,2] | max }}|{{ [1,2,3] | sum }}|"
                   "{{ [{'v':1},{'v':2}] | sum(attribute='v') }}"),
            "[1, 2, 3]|['a', 'b']|13|6|3");
  EXPECT_EQ(render("{{ [1,2,3] | reverse | list }}|{{ 'abc' | reverse }}|{{ [1,2,3,4,5] | batch(2) "
                   "| list }}|"
                   "{{ [1,2,3,4,5] | batch(2, 'x') | list }}|{{ [1,2,3,4,5] | slice(2) | list }}"),
            "[3, 2, 1]|cba|[[1, 2], [3, 4], [5]]|[[1, 2], [3, 4], [5, 'x']]|[[1, 2, 3], [4, 5]]");
}

TEST(JinjaFilters, MapSelectReject) {
  EXPECT_EQ(render("{{ [{'a':1},{'a':2}] | map(attribute='a') | list }}|{{ ['a','b'] | "
                   "map('upper') | list }}|"
                   "{{ [{'a':1},{}] | map(attribute='a', default=0) | list }}"),
            "[1, 2]|['A', 'B']|[1, 0]");
  EXPECT_EQ(
      render("{{ [1,2,3,4] | select('odd') | list }}|{{ [1,2,3,4] | reject('odd') | list }}|"
             "{{ [0,1,'',none,'x'] | select | list }}|{{ [1,5,10] | select('>', 4) | list }}"),
      "[1, 3]|[2, 4]|[1, 'x']|[5, 10]");
  EXPECT_EQ(
      render(
          "{{ c | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('|') }}/"
          "{{ c | rejectattr('type', 'eq', 'text') | list | length }}/"
          "{{ c | selectattr('text') | list | length }}",
          R"({"c": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]})"),
      "a|b/1/2");
}

TEST(JinjaFilters, StringFilters) {
  EXPECT_EQ(render("{{ '  x  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'Hello World' | lower }}|"
                   "{{ 'hello world' | upper }}|{{ 'hello wORLD-foo (bar' | title }}|{{ 'hELLO' | "
                   "capitalize }}"),
            "x|a|hello world|HELLO WORLD|Hello World-Foo (Bar|Hello");
  EXPECT_EQ(render("{{ 'aXbXc' | replace('X', '-') }}|{{ 'aXbXc' | replace('X', '-', 1) }}|"
                   "{{ 42 | string }}|{{ none | string }}|{{ [1] | string }}|{{ foo | string }}"),
            "a-b-c|a-bXc|42|None|[1]|");
  EXPECT_EQ(render("{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}|"
                   "{{ 'a\\n\\nb' | indent(2, blank=true) }}|{{ 'a\\nb' | indent('>>') }}"),
            "a\n  b\n\n  c|  a\n  b|a\n  \n  b|a\n>>b");
  EXPECT_EQ(
      render(
          "{{ 'hello world foo bar' | truncate(12) }}|"
          "{{ 'hello world foo bar baz qux' | truncate(12, true) }}|{{ 'short' | truncate(10) }}|"
          "{{ 'one two three' | wordcount }}"),
      "hello...|hello wor...|short|3");
  EXPECT_EQ(render("{{ '<a href=\"x\">&</a>' | e }}|{{ 'x' | safe }}|{{ '%s-%s' | format(1, 2) }}|"
                   "{{ 'ab' | center(6) }}"),
            "&lt;a href=&#34;x&#34;&gt;&amp;&lt;/a&gt;|x|1-2|  ab  ");
}

TEST(JinjaFilters, NumberFilters) {
  EXPECT_EQ(
      render("{{ '42' | int }}{{ '4.7' | int }}{{ 'x' | int }}{{ 'x' | int(7) }}{{ 3.9 | int }}"
             "{{ '0x1A' | int(0, 16) }}{{ ' 12 ' | int }}|{{ '3.5' | float }}{{ 'x' | float }}"
             "{{ 2 | float }}"),
      "4240732612|3.50.02.0");
  EXPECT_EQ(
      render("{{ 2.5 | round }}{{ 3.5 | round }}{{ 2.675 | round(2) }}{{ 1.5 | round(0, 'floor') }}"
             "{{ 1.2 | round(0, 'ceil') }}{{ 3 | round }}{{ -3 | abs }}{{ -2.5 | abs }}"),
      "2.04.02.671.02.0332.5");
}

TEST(JinjaFilters, TojsonMatchesPythonJsonDumps) {
  EXPECT_EQ(render("{{ {'a': 'ü', 'b': [1, 2.0, none, true]} | tojson }}"),
            "{\"a\": \"ü\", \"b\": [1, 2.0, null, true]}");
  EXPECT_EQ(
      render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|"
             "{{ {'a': 1, 'b': [2]} | tojson(separators=(',', ':')) }}|"
             "{{ 'é\"\\n\\u0001\\u2028</s>' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}"),
      "{\"a\": 2, \"b\": 1}|{\"a\":1,\"b\":[2]}|\"é\\\"\\n\\u0001 </s>\"|\"\\u00e9\"");
  EXPECT_EQ(render("{{ [1, {'a': 2, 'e': {}, 'l': []}] | tojson(indent=2) }}"),
            "[\n  1,\n  {\n    \"a\": 2,\n    \"e\": {},\n    \"l\": []\n  }\n]");
  EXPECT_EQ(render("{{ {'k': 1} | tojson(indent='\\t') }}"), "{\n\t\"k\": 1\n}");
  EXPECT_EQ(error_of("{{ foo | tojson }}"),
            "template error at line 1: Object of type Undefined is not JSON serializable");
}

TEST(JinjaTests, TypeAndValueTests) {
  EXPECT_EQ(
      render("{{ 1 is number }}{{ 1.0 is float }}{{ 1 is integer }}{{ true is integer }}"
             "{{ true is boolean }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is iterable }}"
             "{{ 'a' is iterable }}{{ [] is sequence }}{{ {} is sequence }}{{ none is none }}"),
      "TrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}"
                   "{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 1 is eq 1 }}{{ 2 is gt 1 }}"
                   "{{ 1 is lt(2) }}{{ 1 is ne 2 }}{{ 2 is in [1,2] }}{{ none is sameas none }}"
                   "{{ 0 is false }}{{ false is false }}"),
            "TrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueFalseTrue");
  EXPECT_EQ(render("{{ raise_exception is callable }}{{ 'upper' is filter }}{{ 'odd' is test }}"
                   "{{ 'nope' is filter }}{{ x is not none }}",
                   R"({"x": null})"),
            "TrueTrueTrueFalseFalse");
}

TEST(JinjaGlobals, RangeDictCyclerJoiner) {
  EXPECT_EQ(render("{{ range(3) | list }}{{ range(1, 5, 2) | list }}{{ range(5, 0, -2) | list }}"),
            "[0, 1, 2][1, 3][5, 3, 1]");
  EXPECT_EQ(render("{{ dict(a=1, b=2) }}{{ dict({'x': 1}, y=2) }}"),
            "{'a': 1, 'b': 2}{'x': 1, 'y': 2}");
  EXPECT_EQ(render("{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}"
                   "{{ c.current }}"),
            "abab");
  EXPECT_EQ(render("{% set j = joiner('|') %}{% for i in [1,2,3] %}{{ j() }}{{ i }}{% endfor %}"),
            "1|2|3");
}

}  // namespace
}  // namespace strata::jinja
