// Jinja tests (`x is defined`, `x is string`, `n is divisibleby 3`, ...).
#include <unordered_map>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace strata::jinja {

namespace {

const Value& only_arg(const char* name, CallArgs& args) {
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    throw_runtime(std::string("test '") + name + "' takes exactly one argument");
  }
  return args.positional[0];
}

void no_args(const char* name, CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty()) {
    throw_runtime(std::string("test '") + name + "' takes no arguments");
  }
}

int64_t int_value(const Value& v, const char* test) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int() || v.is_bool()) return v.as_int();
  throw_runtime(std::string("test '") + test + "' needs an integer, not " + v.type_name());
}

bool t_defined(Interp&, const Value& v, CallArgs& a) {
  no_args("defined", a);
  return !v.is_undefined();
}
bool t_undefined(Interp&, const Value& v, CallArgs& a) {
  no_args("undefined", a);
  return v.is_undefined();
}
bool t_none(Interp&, const Value& v, CallArgs& a) {
  no_args("none", a);
  return v.is_none();
}
bool t_boolean(Interp&, const Value& v, CallArgs& a) {
  no_args("boolean", a);
  return v.is_bool();
}
bool t_true(Interp&, const Value& v, CallArgs& a) {
  no_args("true", a);
  return v.is_bool() && v.as_bool();
}
bool t_false(Interp&, const Value& v, CallArgs& a) {
  no_args("false", a);
  return v.is_bool() && !v.as_bool();
}
bool t_integer(Interp&, const Value& v, CallArgs& a) {
  no_args("integer", a);
  return v.is_int();
}
bool t_float(Interp&, const Value& v, CallArgs& a) {
  no_args("float", a);
  return v.is_float();
}
bool t_number(Interp&, const Value& v, CallArgs& a) {
  no_args("number", a);
  return v.is_number();
}
bool t_string(Interp&, const Value& v, CallArgs& a) {
  no_args("string", a);
  return v.is_string();
}
bool t_mapping(Interp&, const Value& v, CallArgs& a) {
  no_args("mapping", a);
  return v.is_dict();
}
bool t_escaped(Interp&, const Value&, CallArgs& a) {
  no_args("escaped", a);
  return false;
}

// Python: anything with __iter__ (Undefined included).
bool t_iterable(Interp&, const Value& v, CallArgs& a) {
  no_args("iterable", a);
  return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_dict();
}

// Python: anything with __len__ and __getitem__ (str, list, tuple, dict).
bool t_sequence(Interp&, const Value& v, CallArgs& a) {
  no_args("sequence", a);
  return v.is_string() || v.is_sequence() || v.is_dict();
}

bool t_callable(Interp&, const Value& v, CallArgs& a) {
  no_args("callable", a);
  return v.is_object() && v.object()->callable();
}

bool t_sameas(Interp&, const Value& v, CallArgs& a) {
  const Value& other = only_arg("sameas", a);
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kUndefined:
      return v.is_none();
    case Value::Kind::kBool:
      return v.as_bool() == other.as_bool();
    case Value::Kind::kInt:  // CPython caches small ints
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    default:
      return v.same_object(other);
  }
}

bool t_odd(Interp&, const Value& v, CallArgs& a) {
  no_args("odd", a);
  return (int_value(v, "odd") % 2 + 2) % 2 == 1;
}

bool t_even(Interp&, const Value& v, CallArgs& a) {
  no_args("even", a);
  return int_value(v, "even") % 2 == 0;
}

bool t_divisibleby(Interp&, const Value& v, CallArgs& a) {
  int64_t n = int_value(only_arg("divisibleby", a), "divisibleby");
  if (n == 0) throw_runtime("integer division or modulo by zero");
  return int_value(v, "divisibleby") % n == 0;
}

bool t_lower(Interp&, const Value& v, CallArgs& a) {
  no_args("lower", a);
  std::string s = to_str(v);
  bool any = false;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp = unicode::decode(s, &pos);
    if (unicode::is_upper(cp)) return false;
    any = any || unicode::is_lower(cp);
  }
  return any;
}

bool t_upper(Interp&, const Value& v, CallArgs& a) {
  no_args("upper", a);
  std::string s = to_str(v);
  bool any = false;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp = unicode::decode(s, &pos);
    if (unicode::is_lower(cp) && !unicode::is_upper(cp)) return false;
    any = any || unicode::is_upper(cp);
  }
  return any;
}

bool t_in(Interp&, const Value& v, CallArgs& a) {
  return contains(only_arg("in", a), v);
}
bool t_eq(Interp&, const Value& v, CallArgs& a) {
  return values_equal(v, only_arg("eq", a));
}
bool t_ne(Interp&, const Value& v, CallArgs& a) {
  return !values_equal(v, only_arg("ne", a));
}
bool t_gt(Interp&, const Value& v, CallArgs& a) {
  return compare_values(v, only_arg("gt", a), ">") > 0;
}
bool t_ge(Interp&, const Value& v, CallArgs& a) {
  return compare_values(v, only_arg("ge", a), ">=") >= 0;
}
bool t_lt(Interp&, const Value& v, CallArgs& a) {
  return compare_values(v, only_arg("lt", a), "<") < 0;
}
bool t_le(Interp&, const Value& v, CallArgs& a) {
  return compare_values(v, only_arg("le", a), "<=") <= 0;
}

bool t_filter(Interp&, const Value& v, CallArgs& a) {
  no_args("filter", a);
  return v.is_string() && find_filter(v.str()) != nullptr;
}

bool t_test(Interp&, const Value& v, CallArgs& a) {
  no_args("test", a);
  return v.is_string() && find_test(v.str()) != nullptr;
}

}  // namespace

TestFn find_test(std::string_view name) {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"callable", t_callable},
      {"sameas", t_sameas},
      {"escaped", t_escaped},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"lower", t_lower},
      {"upper", t_upper},
      {"in", t_in},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"filter", t_filter},
      {"test", t_test},
  };
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace strata::jinja
