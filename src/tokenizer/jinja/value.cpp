#include "tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace strata::jinja {

Value Value::undefined(std::string message) {
  Value v;
  if (!message.empty()) v.ptr_ = std::make_shared<const std::string>(std::move(message));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.ptr_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

namespace {

uint16_t depth_of_items(const List& items) {
  int d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  if (d + 1 > kMaxValueDepth) {
    throw_limit("value nested too deeply (more than " + std::to_string(kMaxValueDepth) +
                " levels)");
  }
  return static_cast<uint16_t>(d + 1);
}

}  // namespace

int Value::depth() const {
  if (kind_ == Kind::kObject) return object()->depth();
  return depth_;
}

void Object::note_child_depth(const Value& value) const {
  int d = value.depth() + 1;
  if (d > kMaxValueDepth) {
    throw_limit("value nested too deeply (more than " + std::to_string(kMaxValueDepth) +
                " levels)");
  }
  if (d > depth_) depth_ = d;
}

Value Value::list(List items) {
  Value v;
  v.depth_ = depth_of_items(items);
  v.kind_ = Kind::kList;
  v.ptr_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::tuple(List items) {
  Value v;
  v.depth_ = depth_of_items(items);
  v.kind_ = Kind::kTuple;
  v.ptr_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  int depth = 0;
  for (const auto& [k, val] : d.entries()) depth = std::max({depth, k.depth(), val.depth()});
  if (depth + 1 > kMaxValueDepth) {
    throw_limit("value nested too deeply (more than " + std::to_string(kMaxValueDepth) +
                " levels)");
  }
  v.depth_ = static_cast<uint16_t>(depth + 1);
  v.kind_ = Kind::kDict;
  v.ptr_ = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::object(std::shared_ptr<Object> o) {
  Value v;
  v.kind_ = Kind::kObject;
  v.ptr_ = std::move(o);
  return v;
}

double Value::as_double() const {
  if (kind_ == Kind::kFloat) return f_;
  return static_cast<double>(as_int());
}

const std::string& Value::undefined_message() const {
  static const std::string kEmpty;
  if (kind_ != Kind::kUndefined || ptr_ == nullptr) return kEmpty;
  return *static_cast<const std::string*>(ptr_.get());
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0.0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
    case Kind::kTuple:
      return !items().empty();
    case Kind::kDict:
      return !dict().empty();
    case Kind::kObject:
      return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kObject:
      return object()->type_name();
  }
  return "object";
}

// ---- Dict ----

void Dict::set(Value key, Value value) {
  if (const Value* existing = find(key)) {
    const_cast<Value&>(*existing) = std::move(value);
    return;
  }
  entries_.emplace_back(std::move(key), std::move(value));
  if (entries_.size() == kIndexThreshold + 1) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].first.is_string()) string_index_.emplace(entries_[i].first.str(), i);
    }
  } else if (entries_.size() > kIndexThreshold + 1 && entries_.back().first.is_string()) {
    string_index_.emplace(entries_.back().first.str(), entries_.size() - 1);
  }
}

const Value* Dict::find(std::string_view key) const {
  if (entries_.size() > kIndexThreshold) {
    auto it = string_index_.find(std::string(key));
    return it == string_index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : entries_) {
    if (!k.is_string() && values_equal(k, key)) return &v;
  }
  return nullptr;
}

// ---- Object ----

Value Object::call(Interp&, CallArgs&) const {
  throw_runtime(std::string("'") + type_name() + "' object is not callable");
}

std::string Object::repr() const {
  return std::string("<") + type_name() + " object>";
}

// ---- comparisons ----

bool values_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone:
      return true;
    case K::kString:
      return a.str() == b.str();
    case K::kList:
    case K::kTuple: {
      const List& x = a.items();
      const List& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!values_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case K::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* other = y.find(k);
        if (other == nullptr || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case K::kObject:
      return a.same_object(b);
    default:
      return false;
  }
}

int compare_values(const Value& a, const Value& b, const char* op) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.kind() == b.kind() && a.is_sequence()) {
    const List& x = a.items();
    const List& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!values_equal(x[i], y[i])) return compare_values(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined())
    throw_runtime(a.undefined_message().empty() ? "value is undefined" : a.undefined_message());
  if (b.is_undefined())
    throw_runtime(b.undefined_message().empty() ? "value is undefined" : b.undefined_message());
  throw_runtime(std::string("'") + op + "' not supported between instances of '" + a.type_name() +
                "' and '" + b.type_name() + "'");
}

// ---- formatting ----

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci looks like "-1.2345e+05": split sign, digits and exponent.
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out.push_back('-');
    i = 1;
  }
  size_t e = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e; ++k) {
    if (sci[k] != '.') digits.push_back(sci[k]);
  }
  int exp10 = std::atoi(sci.c_str() + e + 1);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int decpt = exp10 + 1;  // position of the decimal point relative to the digits
  int ndigits = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out.push_back(digits[0]);
    if (ndigits > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    out += ebuf;
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (decpt < ndigits) {
    out.append(digits, 0, static_cast<size_t>(decpt));
    out.push_back('.');
    out.append(digits, static_cast<size_t>(decpt), std::string::npos);
  } else {
    out += digits;
    out.append(static_cast<size_t>(decpt - ndigits), '0');
    out += ".0";
  }
  return out;
}

void append_string_repr(std::string* out, std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  for (size_t pos = 0; pos < s.size();) {
    size_t start = pos;
    uint32_t cp = unicode::decode(s, &pos);
    char buf[16];
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      *out += "\\n";
    } else if (cp == '\r') {
      *out += "\\r";
    } else if (cp == '\t') {
      *out += "\\t";
    } else if (unicode::is_printable(cp)) {
      out->append(s.data() + start, pos - start);
    } else {
      if (cp < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
      }
      *out += buf;
    }
  }
  out->push_back(quote);
}

namespace {

// Namespaces can hold themselves ({% set ns.x = ns %}); this guard ends such cycles in repr().
thread_local int repr_depth = 0;

struct ReprGuard {
  ReprGuard() { ++repr_depth; }
  ~ReprGuard() { --repr_depth; }
};

}  // namespace

void append_repr(std::string* out, const Value& v) {
  using K = Value::Kind;
  ReprGuard guard;
  if (repr_depth > kMaxValueDepth + 2) {
    *out += "...";
    return;
  }
  switch (v.kind()) {
    case K::kString:
      append_string_repr(out, v.str());
      return;
    case K::kList:
    case K::kTuple: {
      bool tuple = v.is_tuple();
      out->push_back(tuple ? '(' : '[');
      const List& items = v.items();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += ", ";
        append_repr(out, items[i]);
      }
      if (tuple && items.size() == 1) out->push_back(',');
      out->push_back(tuple ? ')' : ']');
      return;
    }
    case K::kDict: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, val] : v.dict().entries()) {
        if (!first) *out += ", ";
        first = false;
        append_repr(out, k);
        *out += ": ";
        append_repr(out, val);
      }
      out->push_back('}');
      return;
    }
    case K::kUndefined:
      return;  // str(Undefined) is "" and repr is rarely seen; keep the output empty
    default:
      append_str(out, v);
  }
}

void append_str(std::string* out, const Value& v) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::kUndefined:
      return;
    case K::kNone:
      *out += "None";
      return;
    case K::kBool:
      *out += v.as_bool() ? "True" : "False";
      return;
    case K::kInt:
      *out += std::to_string(v.as_int());
      return;
    case K::kFloat:
      *out += float_repr(v.as_double());
      return;
    case K::kString:
      *out += v.str();
      return;
    case K::kObject:
      *out += v.object()->repr();
      return;
    default:
      append_repr(out, v);
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(&out, v);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  append_repr(&out, v);
  return out;
}

}  // namespace strata::jinja
