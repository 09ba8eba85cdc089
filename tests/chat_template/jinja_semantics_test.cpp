// Evaluation semantics: scoping, loops and loop variables, macros and call blocks, namespaces,
// Jinja's default Undefined, and Python-style values. Expected outputs are Jinja2 3.1's.
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace strata::jinja {
namespace {

using testing::error_of;
using testing::render;

constexpr const char* kMessages =
    R"({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": "Hi"},
                     {"role": "assistant", "content": "Yo"}]})";

TEST(JinjaScoping, SetInsideALoopDoesNotLeakOrPersistAcrossIterations) {
  EXPECT_EQ(
      render("{% set x = 1 %}{% for i in [1,2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"),
      "231");
  EXPECT_EQ(render("{% for i in [1,2] %}[{{ x }}]{% set x = i %}{% endfor %}[{{ x }}]"), "[][][]");
}

TEST(JinjaScoping, SetInsideIfLeaksAndNamespacesCarryState) {
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(render("{% set ns = namespace(x=0) %}{% for i in [1,2,3] %}{% set ns.x = ns.x + i %}"
                   "{% endfor %}{{ ns.x }}"),
            "6");
  EXPECT_EQ(
      render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}"
             "{{ ns['a'] }}"),
      "12False1");
  EXPECT_EQ(render("{{ namespace(a=1, b='x') }}"), "<Namespace {'a': 1, 'b': 'x'}>");
}

TEST(JinjaScoping, TupleUnpackingBlockSetAndWith) {
  EXPECT_EQ(
      render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (3, 4) %}{% set c, d = t %}{{ d }}"),
      "124");
  EXPECT_EQ(render("{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]"), "[inner 2]");
  EXPECT_EQ(render("{% set x | upper | trim %} inner {% endset %}[{{ x }}]"), "[INNER]");
  EXPECT_EQ(render("{% set a = 5 %}{% with a = 1, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}"),
            "155");
}

TEST(JinjaLoops, LoopVariables) {
  EXPECT_EQ(render("{% for i in range(3) %}{% if loop.first %}F{% endif %}{{ loop.index }}"
                   "{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.length }}"
                   "{% if loop.last %}L{% endif %} {% endfor %}"),
            "F10323 21213 32103L ");
  EXPECT_EQ(render("{% for i in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}"),
            "-2;1-3;2-;");
  EXPECT_EQ(render("{% for i in [1,2,3] %}{{ loop.cycle('a','b') }}{% endfor %}"), "aba");
  EXPECT_EQ(render("{% for i in [1,1,2] %}{% if loop.changed(i) %}C{% endif %}{{ i }}{% endfor %}"),
            "C11C2");
  EXPECT_EQ(render("{% for a in [[1,2],[3]] %}{% for b in a %}{{ loop.index }}{{ b }}{% endfor %}|"
                   "{% endfor %}"),
            "1122|13|");
}

TEST(JinjaLoops, BreakContinueFilterAndElse) {
  EXPECT_EQ(render("{% for i in [1,2,3,4] %}{% if i == 2 %}{% continue %}{% endif %}"
                   "{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "13");
  EXPECT_EQ(
      render("{% for i in [1,2,3,4,5] if i is odd %}{{ loop.index }}:{{ i }}/{{ loop.length }} "
             "{% endfor %}"),
      "1:1/3 2:3/3 3:5/3 ");
  EXPECT_EQ(render("{% for i in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for i in [0] if i %}x{% else %}none kept{% endfor %}"), "none kept");
}

TEST(JinjaLoops, IteratesDictsStringsAndItems) {
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "b=1;a=2;");
  EXPECT_EQ(render("{% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}"), "ba");
  EXPECT_EQ(render("{% for c in 'hé!' %}{{ c }}.{% endfor %}"), "h.é.!.");
  EXPECT_EQ(
      render("{% for m in messages[::-1] %}{{ loop.index }}{{ m.role[0] }}{% endfor %}", kMessages),
      "1a2u3s");
}

TEST(JinjaLoops, RecursiveLoops) {
  EXPECT_EQ(render("{% for item in tree recursive %}{{ item.n }}({{ loop.depth }})"
                   "{% if item.c %}[{{ loop(item.c) }}]{% endif %}{% endfor %}",
                   R"({"tree": [{"n": "a", "c": [{"n": "b", "c": [{"n": "c"}]}]}, {"n": "d"}]})"),
            "a(1)[b(2)[c(3)]]d(1)");
}

TEST(JinjaMacros, ArgumentsDefaultsVarargsAndKwargs) {
  const std::string greet =
      "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}";
  EXPECT_EQ(
      render(greet + "{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}"),
      "Hello A! Hello B? Hello C.");
  EXPECT_EQ(render("{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, a=3) }}"),
            "(1, 2){'a': 3}");
  EXPECT_EQ(render("{% macro m(a, b=a) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}"), "11");
  EXPECT_EQ(render("{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}"), "[]");
  EXPECT_EQ(render("{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}"
                   "{{ r(3) }}"),
            "321");
  // Free variables resolve when the macro is called.
  EXPECT_EQ(render("{% macro m() %}{{ y }}{% endmacro %}{% set y = 7 %}{{ m() }}"), "7");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "template error at line 1: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(error_of("{% macro m() %}{% endmacro %}{{ m(a=1) }}"),
            "template error at line 1: macro 'm' takes no keyword argument 'a'");
}

TEST(JinjaMacros, CallBlocksAndCaller) {
  EXPECT_EQ(render("{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}body"
                   "{% endcall %}"),
            "[body]");
  EXPECT_EQ(render("{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}"
                   "{% endmacro %}{% call(x) each([1,2]) %}<{{ x }}>{% endcall %}"),
            "<1><2>");
  EXPECT_EQ(render("{% filter upper %}abc {{ 'd' }}{% endfilter %}"), "ABC D");
  EXPECT_EQ(render("{% generation %}gen {{ 1 }}{% endgeneration %}|{% block b %}blk{% endblock %}"),
            "gen 1|blk");
}

TEST(JinjaUndefined, DefaultUndefinedSemantics) {
  EXPECT_EQ(render("[{{ foo }}][{{ foo is defined }}][{{ foo is undefined }}][{{ foo | length }}]"
                   "[{{ foo | default('d') }}][{{ not foo }}][{{ foo == foo }}][{{ 'x' in foo }}]"
                   "[{{ 'a' ~ foo }}][{% for x in foo %}x{% endfor %}][{{ foo is iterable }}]"),
            "[][False][True][0][d][True][True][False][a][][True]");
  EXPECT_EQ(
      render("{{ m.nope }}|{{ m.nope is defined }}|{{ m['nope'] is none }}|{{ l[5] is defined }}",
             R"({"m": {}, "l": [1]})"),
      "|False|False|False");
  EXPECT_EQ(error_of("{{ foo.bar }}"), "template error at line 1: 'foo' is undefined");
  EXPECT_EQ(error_of("{{ m.nope.deeper }}", R"({"m": {}})"),
            "template error at line 1: 'dict object' has no attribute 'nope'");
  EXPECT_EQ(error_of("{{ foo + 1 }}"), "template error at line 1: 'foo' is undefined");
  EXPECT_EQ(error_of("{{ foo() }}"), "template error at line 1: 'foo' is undefined");
  EXPECT_EQ(render("{{ none['x'] }}|{{ none.x is defined }}"), "|False");
}

TEST(JinjaUndefined, ParametersLikeToolsAreNoneNotUndefined) {
  EXPECT_EQ(render("{{ tools is none }}{{ tools is defined }}{% if tools %}T{% endif %}",
                   R"({"tools": null})"),
            "TrueTrue");
}

TEST(JinjaValues, DictsKeepInsertionOrder) {
  EXPECT_EQ(render("{{ d }}|{{ d | tojson }}|{{ d.keys() | list }}",
                   R"({"d": {"z": 1, "a": 2, "m": 3}})"),
            "{'z': 1, 'a': 2, 'm': 3}|{\"z\": 1, \"a\": 2, \"m\": 3}|['z', 'a', 'm']");
  EXPECT_EQ(render("{% set d = {'b': 1, 'a': 2, 'b': 3} %}{{ d }}"), "{'b': 3, 'a': 2}");
}

TEST(JinjaValues, MethodsShadowDictKeysOnAttributeAccess) {
  // Python's getattr finds dict methods before keys: d.items is the method, d['items'] the key.
  EXPECT_EQ(render("{{ d['items'] }}|{{ d.items is defined }}|{{ d.items() | list }}",
                   R"({"d": {"items": 5}})"),
            "5|True|[('items', 5)]");
}

TEST(JinjaValues, ImmutableSandboxRefusesMutators) {
  EXPECT_EQ(error_of("{% set l = [1] %}{{ l.append(2) }}"),
            "template error at line 1: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_of("{% set d = {} %}{{ d.update({'a': 1}) }}"),
            "template error at line 1: access to attribute 'update' of 'dict' object is unsafe.");
  EXPECT_EQ(render("{% set l = [1] %}{{ l.append is defined }}"), "False");
}

TEST(JinjaValues, RaiseExceptionMessageIsReturnedAsIs) {
  EXPECT_EQ(error_of("{% if true %}{{ raise_exception('Roles must alternate: ' ~ 2) }}{% endif %}"),
            "Roles must alternate: 2");
}

TEST(JinjaValues, StrftimeNowUsesTheRenderTime) {
  // The test clock is 2026-01-02 13:04:05 UTC; print only fields that no time zone changes.
  EXPECT_EQ(render("{{ strftime_now('%Y') }}|{{ strftime_now('%S') }}|{{ strftime_now('') }}"),
            "2026|05|");
}

}  // namespace
}  // namespace strata::jinja
