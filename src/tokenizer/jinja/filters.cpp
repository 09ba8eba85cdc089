// Scalar and string filters (Jinja2 3.1 semantics; tojson as transformers overrides it). The
// sequence filters live in filters_seq.cpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace strata::jinja {

// Defined in filters_seq.cpp.
void add_sequence_filters(std::unordered_map<std::string_view, FilterFn>* table);

namespace {

// Jinja's soft_str: str(value), with Undefined as "".
std::string text_of(const Value& v) {
  return to_str(v);
}

Value call_str_method(Interp& interp, const std::string& s, const char* name, CallArgs& args) {
  return call_method(interp, Value::string(s), name, args);
}

Value f_default(Interp&, const Value& input, CallArgs& args) {
  ArgReader a("default", args, {"default_value", "boolean"});
  bool boolean = a.get_truthy(1, false);
  if (input.is_undefined() || (boolean && !input.truthy())) {
    return a.get_or(0, Value::string(""));
  }
  return input;
}

Value f_string(Interp&, const Value& input, CallArgs& args) {
  ArgReader("string", args, {});
  return Value::string(text_of(input));
}

Value f_lower(Interp&, const Value& input, CallArgs& args) {
  ArgReader("lower", args, {});
  return Value::string(unicode::lower(text_of(input)));
}

Value f_upper(Interp&, const Value& input, CallArgs& args) {
  ArgReader("upper", args, {});
  return Value::string(unicode::upper(text_of(input)));
}

Value f_trim(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("trim", args, {"chars"});
  CallArgs strip_args;
  if (a.has(0)) strip_args.positional.push_back(a.get(0));
  return call_str_method(interp, text_of(input), "strip", strip_args);
}

Value f_capitalize(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader("capitalize", args, {});
  CallArgs none;
  return call_str_method(interp, text_of(input), "capitalize", none);
}

// Jinja's title: each word (split at runs of -, whitespace, brackets) gets an uppercase first
// character and lowercase rest.
Value f_title(Interp&, const Value& input, CallArgs& args) {
  ArgReader("title", args, {});
  std::string s = text_of(input);
  std::string out;
  bool at_word_start = true;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp = unicode::decode(s, &pos);
    bool separator =
        cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || unicode::is_space(cp);
    if (separator) {
      unicode::append_utf8(&out, cp);
      at_word_start = true;
      continue;
    }
    unicode::append_utf8(&out, at_word_start ? unicode::to_upper(cp) : unicode::to_lower(cp));
    at_word_start = false;
  }
  return Value::string(std::move(out));
}

Value f_replace(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("replace", args, {"old", "new", "count"});
  CallArgs r;
  r.positional.push_back(Value::string(text_of(a.get(0))));
  r.positional.push_back(Value::string(text_of(a.get(1))));
  if (a.has(2) && !a.get(2).is_none()) r.positional.push_back(a.get(2));
  return call_str_method(interp, text_of(input), "replace", r);
}

Value f_center(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("center", args, {"width"});
  CallArgs c;
  c.positional.push_back(Value::integer(a.get_int(0, 80)));
  return call_str_method(interp, text_of(input), "center", c);
}

Value f_escape(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader("escape", args, {});
  std::string s = text_of(input);
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  interp.check_size(out.size());
  return Value::string(std::move(out));
}

Value f_safe(Interp&, const Value& input, CallArgs& args) {
  ArgReader("safe", args, {});
  return input;
}

Value f_format(Interp& interp, const Value& input, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    throw_runtime("can't handle positional and keyword arguments at the same time");
  }
  Value spec;
  if (!args.keyword.empty()) {
    Dict d;
    for (const auto& [k, v] : args.keyword) d.set(Value::string(k), v);
    spec = Value::dict(std::move(d));
  } else {
    spec = Value::tuple(args.positional);
  }
  return Value::string(percent_format(interp, text_of(input), spec));
}

Value f_indent(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("indent", args, {"width", "first", "blank"});
  std::string indention;
  if (a.has(0) && a.get(0).is_string()) {
    indention = a.get(0).str();
  } else {
    int64_t w = a.get_int(0, 4);
    if (w > 0) interp.check_size(static_cast<size_t>(w));
    indention = std::string(static_cast<size_t>(std::max<int64_t>(0, w)), ' ');
  }
  bool first = a.get_truthy(1, false);
  bool blank = a.get_truthy(2, false);
  std::string s = text_of(input) + "\n";
  CallArgs none;
  List lines = call_str_method(interp, s, "splitlines", none).items();
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i].str();
    }
  } else {
    rv = lines.empty() ? "" : lines[0].str();
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].str().empty()) rv += indention;
      rv += lines[i].str();
      interp.check_size(rv.size());
    }
  }
  if (first) rv = indention + rv;
  return Value::string(std::move(rv));
}

Value f_truncate(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("truncate", args, {"length", "killwords", "end", "leeway"});
  std::string s = text_of(input);
  int64_t length = a.get_int(0, 255);
  bool killwords = a.get_truthy(1, false);
  std::string end = a.get_string(2, "...");
  int64_t leeway = a.get_int(3, 5);
  int64_t end_len = static_cast<int64_t>(unicode::length(end));
  if (length < end_len) throw_runtime("expected length >= " + std::to_string(end_len));
  if (leeway < 0) throw_runtime("expected leeway >= 0");
  Value sv = Value::string(s);
  if (value_length(sv) <= length + leeway) return sv;
  Value stop = Value::integer(length - end_len);
  std::string head = slice_value(sv, nullptr, &stop, nullptr).str();
  if (killwords) return Value::string(head + end);
  size_t space = head.rfind(' ');
  if (space != std::string::npos) head = head.substr(0, space);
  (void)interp;
  return Value::string(head + end);
}

Value f_wordcount(Interp&, const Value& input, CallArgs& args) {
  ArgReader("wordcount", args, {});
  std::string s = text_of(input);
  int64_t words = 0;
  bool in_word = false;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp = unicode::decode(s, &pos);
    bool word_char = unicode::is_alpha(cp) || unicode::is_digit(cp) || cp == '_';
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::integer(words);
}

Value f_tojson(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = a.get_truthy(0, false);
  if (a.has(1) && !a.get(1).is_none()) {
    o.has_indent = true;
    if (a.get(1).is_string()) {
      o.indent_text = a.get(1).str();
    } else {
      o.indent = static_cast<int>(std::clamp<int64_t>(a.get_int(1, 0), 0, 64));
    }
    o.item_separator.assign(1, ',');
  }
  if (a.has(2) && !a.get(2).is_none()) {
    List seps = iterate(a.get(2));
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      throw_runtime("tojson: separators must be a pair of strings (item, key)");
    }
    o.item_separator = seps[0].str();
    o.key_separator = seps[1].str();
  }
  o.sort_keys = a.get_truthy(3, false);
  return Value::string(to_json(interp, input, o));
}

// Python's int(str): optional sign, digits with single underscores, surrounding whitespace.
bool parse_int_text(const std::string& text, int base, int64_t* out) {
  std::string s(unicode::strip(text, true, true, nullptr));
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (i + 1 < s.size() && s[i] == '0') {
      char p = static_cast<char>(s[i + 1] | 0x20);
      int b = p == 'x' ? 16 : (p == 'o' ? 8 : (p == 'b' ? 2 : 0));
      if (b != 0 && (base == 0 || base == b)) {
        base = b;
        i += 2;
      }
    }
    if (base == 0) base = 10;
  }
  if (i >= s.size()) return false;
  int64_t v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_' && prev_digit) {
      prev_digit = false;
      continue;
    }
    int d = (c >= '0' && c <= '9')                     ? c - '0'
            : ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ? (c | 0x20) - 'a' + 10
                                                       : 99;
    if (d >= base) return false;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return false;
    prev_digit = true;
  }
  if (!prev_digit) return false;
  *out = negative ? -v : v;
  return true;
}

bool parse_float_text(const std::string& text, double* out) {
  std::string s(unicode::strip(text, true, true, nullptr));
  if (s.empty()) return false;
  std::string cleaned;
  for (char c : s) {
    if (c != '_') cleaned.push_back(c);
  }
  char* end = nullptr;
  double d = std::strtod(cleaned.c_str(), &end);
  if (end != cleaned.c_str() + cleaned.size()) return false;
  // strtod accepts hex floats; Python's float() does not.
  if (cleaned.find('x') != std::string::npos || cleaned.find('X') != std::string::npos)
    return false;
  *out = d;
  return true;
}

Value f_int(Interp&, const Value& input, CallArgs& args) {
  ArgReader a("int", args, {"default", "base"});
  Value fallback = a.get_or(0, Value::integer(0));
  int base = static_cast<int>(a.get_int(1, 10));
  if (input.is_undefined()) fail_undefined(input);
  if (input.is_int() || input.is_bool()) return Value::integer(input.as_int());
  if (input.is_float()) {
    double d = input.as_double();
    if (std::isnan(d)) return fallback;
    if (std::isinf(d) || std::fabs(d) >= 9.2e18) throw_runtime("cannot convert float to integer");
    return Value::integer(static_cast<int64_t>(d));
  }
  if (input.is_string()) {
    int64_t v;
    bool base_ok = base == 0 || (base >= 2 && base <= 36);
    if (base_ok && parse_int_text(input.str(), base, &v)) return Value::integer(v);
    double d;
    if (parse_float_text(input.str(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value::integer(static_cast<int64_t>(d));
    }
  }
  return fallback;
}

Value f_float(Interp&, const Value& input, CallArgs& args) {
  ArgReader a("float", args, {"default"});
  Value fallback = a.get_or(0, Value::number(0.0));
  if (input.is_undefined()) fail_undefined(input);
  if (input.is_number()) return Value::number(input.as_double());
  double d;
  if (input.is_string() && parse_float_text(input.str(), &d)) return Value::number(d);
  return fallback;
}

Value f_abs(Interp&, const Value& input, CallArgs& args) {
  ArgReader("abs", args, {});
  if (input.is_float()) return Value::number(std::fabs(input.as_double()));
  if (input.is_int() || input.is_bool()) {
    if (input.as_int() == INT64_MIN) throw_runtime("integer overflow");
    return Value::integer(std::llabs(input.as_int()));
  }
  if (input.is_undefined()) fail_undefined(input);
  throw_runtime("bad operand type for abs(): '" + input.type_name() + "'");
}

Value f_round(Interp&, const Value& input, CallArgs& args) {
  ArgReader a("round", args, {"precision", "method"});
  int64_t precision = a.get_int(0, 0);
  std::string method = a.get_string(1, "common");
  if (method != "common" && method != "ceil" && method != "floor") {
    throw_runtime("method must be common, ceil or floor");
  }
  if (input.is_undefined()) fail_undefined(input);
  if (!input.is_number()) throw_runtime("round(): a number is required, not " + input.type_name());
  if (method == "common" && (input.is_int() || input.is_bool()))
    return Value::integer(input.as_int());
  double x = input.as_double();
  if (!std::isfinite(x)) return Value::number(x);
  if (method != "common") {
    double scale = std::pow(10.0, static_cast<double>(precision));
    double r = method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale);
    return Value::number(r / scale);
  }
  if (precision >= 0 && precision <= 300) {
    // Correctly rounded decimal conversion rounds half to even, like Python's round().
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
    return Value::number(std::strtod(buf, nullptr));
  }
  double scale = std::pow(10.0, static_cast<double>(-precision));
  return Value::number(std::nearbyint(x / scale) * scale);
}

Value f_attr(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("attr", args, {"name"});
  std::string name = a.get_string(0, "");
  if (input.is_dict() && method_kind(input, name) == MethodKind::kNone) {
    return Value::undefined("'dict object' has no attribute '" + name + "'");
  }
  return interp.get_attribute(input, name);
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string_view, FilterFn>{
        {"default", f_default},       {"d", f_default},
        {"string", f_string},         {"lower", f_lower},
        {"upper", f_upper},           {"trim", f_trim},
        {"capitalize", f_capitalize}, {"title", f_title},
        {"replace", f_replace},       {"center", f_center},
        {"escape", f_escape},         {"e", f_escape},
        {"forceescape", f_escape},    {"safe", f_safe},
        {"format", f_format},         {"indent", f_indent},
        {"truncate", f_truncate},     {"wordcount", f_wordcount},
        {"tojson", f_tojson},         {"int", f_int},
        {"float", f_float},           {"abs", f_abs},
        {"round", f_round},           {"attr", f_attr},
    };
    add_sequence_filters(t);
    return t;
  }();
  auto it = table->find(name);
  return it == table->end() ? nullptr : it->second;
}

}  // namespace strata::jinja
