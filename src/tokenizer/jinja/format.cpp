// Python string formatting: printf-style `fmt % args` and str.format() with the format
// mini-language ([[fill]align][sign][#][0][width][,][.precision][type]).
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace strata::jinja {

namespace {

std::string c_format(const std::string& spec, double d) {
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf), spec.c_str(), d);
  if (n < 0) throw_runtime("bad format");
  if (static_cast<size_t>(n) < sizeof(buf)) return std::string(buf, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), spec.c_str(), d);
  big.resize(static_cast<size_t>(n));
  return big;
}

std::string c_format_int(const std::string& spec, long long v) {
  char buf[128];
  int n = std::snprintf(buf, sizeof(buf), spec.c_str(), v);
  if (n < 0 || static_cast<size_t>(n) >= sizeof(buf)) throw_runtime("bad format");
  return std::string(buf, static_cast<size_t>(n));
}

double number_arg(const Value& v, char conv) {
  if (v.is_number()) return v.as_double();
  if (v.is_undefined()) fail_undefined(v);
  throw_runtime(std::string("%") + conv + " format: a real number is required, not " +
                v.type_name());
}

int64_t int_arg(const Value& v, char conv) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float()) return float_to_int(v.as_double());
  if (v.is_undefined()) fail_undefined(v);
  throw_runtime(std::string("%") + conv + " format: a number is required, not " + v.type_name());
}

std::string pad_to(const std::string& body, int64_t width, bool left_align) {
  int64_t len = static_cast<int64_t>(unicode::length(body));
  if (width <= len) return body;
  std::string padding(static_cast<size_t>(width - len), ' ');
  return left_align ? body + padding : padding + body;
}

}  // namespace

std::string percent_format(Interp& interp, const std::string& fmt, const Value& args) {
  List positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.items();
  } else {
    positional.push_back(args);
    if (args.is_dict()) mapping = &args.dict();
  }
  size_t next_arg = 0;
  bool used_mapping = false;
  auto take = [&]() -> const Value& {
    if (next_arg >= positional.size()) throw_runtime("not enough arguments for format string");
    return positional[next_arg++];
  };
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c != '%') {
      out.push_back(c);
      continue;
    }
    if (++i >= fmt.size()) throw_runtime("incomplete format");
    const Value* value = nullptr;
    Value keyed;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) throw_runtime("incomplete format key");
      if (mapping == nullptr) throw_runtime("format requires a mapping");
      const Value* v = mapping->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (v == nullptr) throw_runtime("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      keyed = *v;
      value = &keyed;
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos)
      flags += fmt[i++];
    std::string width;
    if (i < fmt.size() && fmt[i] == '*') {
      width = std::to_string(int_arg(take(), '*'));
      ++i;
    }
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') width += fmt[i++];
    std::string precision;
    bool has_precision = false;
    if (i < fmt.size() && fmt[i] == '.') {
      has_precision = true;
      ++i;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') precision += fmt[i++];
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) throw_runtime("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (value == nullptr) value = &take();
    if (width.size() > 6 || precision.size() > 6) throw_runtime("format width too large");
    int64_t w = width.empty() ? 0 : std::stoll(width);
    interp.check_size(out.size() + static_cast<size_t>(w));
    std::string spec = "%" + flags + width + (has_precision ? "." + precision : "");
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        std::string body = conv == 's' ? to_str(*value) : repr(*value);
        if (has_precision) {
          size_t p = precision.empty() ? 0 : std::stoul(precision);
          if (unicode::length(body) > p) {
            std::vector<size_t> b = unicode::boundaries(body);
            body = body.substr(0, b[p]);
          }
        }
        out += pad_to(body, w, flags.find('-') != std::string::npos);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
        out += c_format_int(spec + "lld", int_arg(*value, conv));
        break;
      case 'x':
      case 'X':
      case 'o': {
        int64_t v = int_arg(*value, conv);
        std::string body = c_format_int(spec + "ll" + conv, v < 0 ? -v : v);
        if (v < 0) body.insert(body.find_first_not_of(' '), "-");
        out += body;
        break;
      }
      case 'c': {
        std::string ch;
        if (value->is_string()) {
          ch = value->str();
        } else {
          unicode::append_utf8(&ch, static_cast<uint32_t>(int_arg(*value, conv)));
        }
        out += pad_to(ch, w, flags.find('-') != std::string::npos);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        out += c_format(spec + conv, number_arg(*value, conv));
        break;
      default:
        throw_runtime(std::string("unsupported format character '") + conv + "'");
    }
    interp.check_size(out.size());
  }
  if (!used_mapping && mapping == nullptr && next_arg < positional.size()) {
    throw_runtime("not all arguments converted during string formatting");
  }
  return out;
}

namespace {

struct Spec {
  std::string fill = " ";
  char align = 0;
  char sign = '-';
  bool alternate = false;
  int64_t width = 0;
  char grouping = 0;
  int64_t precision = -1;
  char type = 0;
};

Spec parse_spec(const std::string& s) {
  Spec spec;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '=' || c == '^'; };
  size_t p = 0;
  if (!s.empty()) unicode::decode(s, &p);
  if (p < s.size() && is_align(s[p])) {
    spec.fill = s.substr(0, p);
    spec.align = s[p];
    i = p + 1;
  } else if (!s.empty() && is_align(s[0])) {
    spec.align = s[0];
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) spec.sign = s[i++];
  if (i < s.size() && s[i] == '#') {
    spec.alternate = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    if (spec.align == 0) {
      spec.fill.assign(1, '0');
      spec.align = '=';
    }
    ++i;
  }
  size_t digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (++digits > 6) throw_runtime("format width too large");
    spec.width = spec.width * 10 + (s[i++] - '0');
  }
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) spec.grouping = s[i++];
  if (i < s.size() && s[i] == '.') {
    ++i;
    spec.precision = 0;
    digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (++digits > 6) throw_runtime("format precision too large");
      spec.precision = spec.precision * 10 + (s[i++] - '0');
    }
  }
  if (i < s.size()) spec.type = s[i++];
  if (i != s.size()) throw_runtime("Invalid format specifier '" + s + "'");
  return spec;
}

std::string group_digits(const std::string& digits, char sep) {
  size_t end = digits.find_first_not_of("0123456789");
  if (end == std::string::npos) end = digits.size();
  std::string head = digits.substr(0, end);
  std::string out;
  for (size_t i = 0; i < head.size(); ++i) {
    if (i > 0 && (head.size() - i) % 3 == 0) out.push_back(sep);
    out.push_back(head[i]);
  }
  return out + digits.substr(end);
}

std::string apply_spec(const Value& v, const std::string& spec_text) {
  if (spec_text.empty()) return to_str(v);
  Spec spec = parse_spec(spec_text);
  std::string body;
  std::string sign;
  char default_align = '<';
  if (v.is_string()) {
    if (spec.type != 0 && spec.type != 's') {
      throw_runtime(std::string("Unknown format code '") + spec.type +
                    "' for object of type 'str'");
    }
    body = v.str();
    if (spec.precision >= 0 && static_cast<int64_t>(unicode::length(body)) > spec.precision) {
      body = body.substr(0, unicode::boundaries(body)[spec.precision]);
    }
  } else if (v.is_number()) {
    default_align = '>';
    bool as_int = (v.is_int() || v.is_bool()) &&
                  (spec.type == 0 || spec.type == 'd' || spec.type == 'x' || spec.type == 'X' ||
                   spec.type == 'o' || spec.type == 'b' || spec.type == 'n');
    if (as_int) {
      int64_t i = v.as_int();
      uint64_t mag = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
      if (i < 0) sign = "-";
      char t = spec.type == 0 || spec.type == 'n' ? 'd' : spec.type;
      if (t == 'b') {
        do {
          body.insert(body.begin(), static_cast<char>('0' + (mag & 1)));
          mag >>= 1;
        } while (mag);
      } else {
        char f[8] = {'%', 'l', 'l', t == 'd' ? 'u' : t, 0};
        char buf[32];
        std::snprintf(buf, sizeof(buf), f, static_cast<unsigned long long>(mag));
        body = buf;
      }
      if (spec.alternate && t != 'd') body = std::string("0") + t + body;
      if (v.is_bool() && spec.type == 0) body = v.as_bool() ? "True" : "False";
    } else {
      double d = v.as_double();
      if (std::signbit(d) && !std::isnan(d)) {
        sign = "-";
        d = -d;
      }
      char t = spec.type;
      if (t == 0 && spec.precision < 0) {
        body = float_repr(d);
      } else {
        if (t == '%') d *= 100;
        int64_t prec = spec.precision < 0 ? 6 : spec.precision;
        char ct = (t == 0) ? 'g' : (t == '%' ? 'f' : t);
        if (ct != 'f' && ct != 'F' && ct != 'e' && ct != 'E' && ct != 'g' && ct != 'G') {
          throw_runtime(std::string("Unknown format code '") + t + "' for object of type 'float'");
        }
        std::string f =
            std::string("%") + (spec.alternate ? "#" : "") + "." + std::to_string(prec) + ct;
        body = c_format(f, d);
        if (t == '%') body += "%";
      }
    }
    if (sign.empty() && spec.sign == '+') sign = "+";
    if (sign.empty() && spec.sign == ' ') sign = " ";
    if (spec.grouping) body = group_digits(body, spec.grouping);
  } else {
    throw_runtime("unsupported format string passed to " + v.type_name() + ".__format__");
  }
  char align = spec.align ? spec.align : default_align;
  int64_t len = static_cast<int64_t>(unicode::length(body) + unicode::length(sign));
  if (spec.width <= len) return sign + body;
  int64_t pad = spec.width - len;
  auto fill = [&](int64_t n) {
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += spec.fill;
    return out;
  };
  switch (align) {
    case '<':
      return sign + body + fill(pad);
    case '>':
      return fill(pad) + sign + body;
    case '=':
      return sign + fill(pad) + body;
    default:
      return fill(pad / 2) + sign + body + fill(pad - pad / 2);
  }
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

std::string str_format(Interp& interp, const std::string& fmt, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      throw_runtime("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw_runtime("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos) {
      throw_runtime("nested replacement fields in format specs are not supported");
    }
    i = close;
    std::string spec;
    char conversion = 0;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      if (bang + 2 != field.size()) throw_runtime("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    size_t name_end = field.find_first_of(".[");
    std::string head = field.substr(0, name_end);
    Value value;
    if (head.empty()) {
      if (auto_index >= args.positional.size()) {
        throw_runtime("Replacement index " + std::to_string(auto_index) +
                      " out of range for positional args tuple");
      }
      value = args.positional[auto_index++];
    } else if (all_digits(head)) {
      // More than 18 digits is out of range for any tuple (and for std::stoul).
      size_t index = head.size() > 18 ? args.positional.size() : std::stoul(head);
      if (index >= args.positional.size()) {
        throw_runtime("Replacement index " + head + " out of range for positional args tuple");
      }
      value = args.positional[index];
    } else {
      bool found = false;
      for (const auto& [k, v] : args.keyword) {
        if (k == head) {
          value = v;
          found = true;
        }
      }
      if (!found) throw_runtime("KeyError: '" + head + "'");
    }
    // Attribute and item accessors: .name and [key]
    size_t p = name_end;
    while (p != std::string::npos && p < field.size()) {
      if (field[p] == '.') {
        size_t e = field.find_first_of(".[", p + 1);
        value = interp.get_attribute(
            value, field.substr(p + 1, e == std::string::npos ? std::string::npos : e - p - 1));
        p = e;
      } else {
        size_t e = field.find(']', p);
        if (e == std::string::npos) throw_runtime("Missing ']' in format string");
        std::string key = field.substr(p + 1, e - p - 1);
        if (all_digits(key) && key.size() > 18)
          throw_runtime("IndexError: format field index [" + key + "] is out of range");
        value = interp.get_item(
            value, all_digits(key) ? Value::integer(std::stoll(key)) : Value::string(key));
        p = e + 1;
      }
    }
    if (conversion == 'r' || conversion == 'a') {
      value = Value::string(repr(value));
    } else if (conversion == 's') {
      value = Value::string(to_str(value));
    } else if (conversion != 0) {
      throw_runtime(std::string("Unknown conversion specifier ") + conversion);
    }
    out += apply_spec(value, spec);
    interp.check_size(out.size());
  }
  return out;
}

}  // namespace strata::jinja
