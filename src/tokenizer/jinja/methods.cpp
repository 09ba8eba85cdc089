// Methods of builtin values with Python semantics: str (split, strip, startswith, replace,
// format, ...), list/tuple (count, index, copy) and dict (get, items, keys, values, copy).
// Mutating methods of list and dict are "unsafe" like in Jinja's ImmutableSandboxedEnvironment.
#include <algorithm>
#include <unordered_map>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace strata::jinja {

namespace {

using MethodFn = Value (*)(Interp& interp, const Value& self, CallArgs& args);

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t pos = 0; pos < s.size();) out.push_back(unicode::decode(s, &pos));
  return out;
}

// Applies Python's optional [start, end] code-point bounds of find/count/startswith/endswith;
// returns the byte range and the code-point offset of its start.
struct Window {
  std::string_view text;
  int64_t cp_offset = 0;
  bool empty_range = false;
};

Window window(const std::string& s, const ArgReader& a, size_t start_index) {
  Window w;
  w.text = s;
  if (!a.has(start_index) && !a.has(start_index + 1)) return w;
  Value v = Value::string(s);
  Value start = a.get_or(start_index, Value::none());
  Value end = a.get_or(start_index + 1, Value::none());
  int64_t n = value_length(v);
  int64_t st = start.is_none() ? 0 : start.as_int();
  int64_t en = end.is_none() ? n : end.as_int();
  if (st < 0) st = std::max<int64_t>(0, st + n);
  if (en < 0) en = std::max<int64_t>(0, en + n);
  st = std::min(st, n);
  en = std::min(en, n);
  if (st > en) {
    w.empty_range = true;
    return w;
  }
  std::vector<size_t> b = unicode::boundaries(s);
  w.text = std::string_view(s).substr(b[st], b[en] - b[st]);
  w.cp_offset = st;
  return w;
}

int64_t cp_index(std::string_view text, size_t byte_pos) {
  return static_cast<int64_t>(unicode::length(text.substr(0, byte_pos)));
}

Value str_find(const Value& self, CallArgs& args, bool reverse, bool raise, const char* name) {
  ArgReader a(name, args, {"sub", "start", "end"});
  std::string sub = a.get_string(0, "");
  Window w = window(self.str(), a, 1);
  size_t pos = w.empty_range ? std::string::npos : (reverse ? w.text.rfind(sub) : w.text.find(sub));
  if (pos == std::string::npos) {
    if (raise) throw_runtime("substring not found");
    return Value::integer(-1);
  }
  return Value::integer(w.cp_offset + cp_index(w.text, pos));
}

Value m_find(Interp&, const Value& s, CallArgs& a) {
  return str_find(s, a, false, false, "find");
}
Value m_rfind(Interp&, const Value& s, CallArgs& a) {
  return str_find(s, a, true, false, "rfind");
}
Value m_index(Interp&, const Value& s, CallArgs& a) {
  return str_find(s, a, false, true, "index");
}
Value m_rindex(Interp&, const Value& s, CallArgs& a) {
  return str_find(s, a, true, true, "rindex");
}

Value m_count(Interp&, const Value& self, CallArgs& args) {
  ArgReader a("count", args, {"sub", "start", "end"});
  std::string sub = a.get_string(0, "");
  Window w = window(self.str(), a, 1);
  if (w.empty_range) return Value::integer(0);
  if (sub.empty()) return Value::integer(static_cast<int64_t>(unicode::length(w.text)) + 1);
  int64_t n = 0;
  for (size_t pos = w.text.find(sub); pos != std::string::npos;
       pos = w.text.find(sub, pos + sub.size()))
    ++n;
  return Value::integer(n);
}

Value affix_test(const Value& self, CallArgs& args, bool prefix) {
  ArgReader a(prefix ? "startswith" : "endswith", args, {"prefix", "start", "end"});
  Window w = window(self.str(), a, 1);
  const Value& p = a.get(0);
  List options = p.is_tuple() ? p.items() : List{p};
  for (const Value& o : options) {
    if (!o.is_string()) {
      throw_runtime(std::string(prefix ? "startswith" : "endswith") +
                    " first arg must be str or a tuple of str, not " + o.type_name());
    }
    if (w.empty_range) continue;
    const std::string& x = o.str();
    if (x.size() > w.text.size()) continue;
    bool hit = prefix ? w.text.compare(0, x.size(), x) == 0
                      : w.text.compare(w.text.size() - x.size(), x.size(), x) == 0;
    if (hit) return Value::boolean(true);
  }
  return Value::boolean(false);
}

Value m_startswith(Interp&, const Value& s, CallArgs& a) {
  return affix_test(s, a, true);
}
Value m_endswith(Interp&, const Value& s, CallArgs& a) {
  return affix_test(s, a, false);
}

Value strip_impl(const Value& self, CallArgs& args, bool left, bool right, const char* name) {
  ArgReader a(name, args, {"chars"});
  if (!a.has(0) || a.get(0).is_none()) {
    return Value::string(std::string(unicode::strip(self.str(), left, right, nullptr)));
  }
  std::string chars = a.get_string(0, "");
  return Value::string(std::string(unicode::strip(self.str(), left, right, &chars)));
}

Value m_strip(Interp&, const Value& s, CallArgs& a) {
  return strip_impl(s, a, true, true, "strip");
}
Value m_lstrip(Interp&, const Value& s, CallArgs& a) {
  return strip_impl(s, a, true, false, "lstrip");
}
Value m_rstrip(Interp&, const Value& s, CallArgs& a) {
  return strip_impl(s, a, false, true, "rstrip");
}

// Python's str.split / str.rsplit.
Value split_impl(Interp& interp, const Value& self, CallArgs& args, bool reverse) {
  ArgReader a(reverse ? "rsplit" : "split", args, {"sep", "maxsplit"});
  const std::string& s = self.str();
  int64_t maxsplit = a.get_int(1, -1);
  List parts;
  if (!a.has(0) || a.get(0).is_none()) {
    std::vector<uint32_t> cps = code_points(s);
    // Work on code points; rebuild pieces by re-encoding (whitespace-separated words).
    std::vector<std::pair<size_t, size_t>> words;  // [begin, end) in code points
    size_t n = cps.size();
    if (!reverse) {
      size_t i = 0;
      while (i < n) {
        while (i < n && unicode::is_space(cps[i])) ++i;
        if (i >= n) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          size_t end = n;
          words.emplace_back(i, end);
          break;
        }
        size_t j = i;
        while (j < n && !unicode::is_space(cps[j])) ++j;
        words.emplace_back(i, j);
        i = j;
      }
    } else {
      size_t i = n;
      while (i > 0) {
        while (i > 0 && unicode::is_space(cps[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.emplace_back(0, i);
          break;
        }
        size_t j = i;
        while (j > 0 && !unicode::is_space(cps[j - 1])) --j;
        words.emplace_back(j, i);
        i = j;
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto [b, e] : words) {
      std::string w;
      for (size_t k = b; k < e; ++k) unicode::append_utf8(&w, cps[k]);
      parts.push_back(Value::string(std::move(w)));
    }
  } else {
    std::string sep = a.get_string(0, "");
    if (sep.empty()) throw_runtime("empty separator");
    std::vector<std::string> pieces;
    if (!reverse) {
      size_t start = 0;
      while (true) {
        size_t pos = (maxsplit >= 0 && static_cast<int64_t>(pieces.size()) >= maxsplit)
                         ? std::string::npos
                         : s.find(sep, start);
        if (pos == std::string::npos) {
          pieces.push_back(s.substr(start));
          break;
        }
        pieces.push_back(s.substr(start, pos - start));
        start = pos + sep.size();
      }
    } else {
      size_t end = s.size();
      while (true) {
        size_t pos = std::string::npos;
        if (!(maxsplit >= 0 && static_cast<int64_t>(pieces.size()) >= maxsplit) &&
            end >= sep.size()) {
          pos = s.rfind(sep, end - sep.size());
        }
        if (pos == std::string::npos) {
          pieces.push_back(s.substr(0, end));
          break;
        }
        pieces.push_back(s.substr(pos + sep.size(), end - pos - sep.size()));
        end = pos;
      }
      std::reverse(pieces.begin(), pieces.end());
    }
    for (auto& p : pieces) parts.push_back(Value::string(std::move(p)));
  }
  interp.charge(static_cast<int64_t>(parts.size()));
  return Value::list(std::move(parts));
}

Value m_split(Interp& i, const Value& s, CallArgs& a) {
  return split_impl(i, s, a, false);
}
Value m_rsplit(Interp& i, const Value& s, CallArgs& a) {
  return split_impl(i, s, a, true);
}

bool is_line_break(uint32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
         cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

Value m_splitlines(Interp& interp, const Value& self, CallArgs& args) {
  ArgReader a("splitlines", args, {"keepends"});
  bool keepends = a.get_truthy(0, false);
  const std::string& s = self.str();
  List lines;
  size_t line_start = 0;
  for (size_t pos = 0; pos < s.size();) {
    size_t at = pos;
    uint32_t cp = unicode::decode(s, &pos);
    if (!is_line_break(cp)) continue;
    size_t brk_end = pos;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') brk_end = ++pos;
    lines.push_back(Value::string(s.substr(line_start, (keepends ? brk_end : at) - line_start)));
    line_start = brk_end;
  }
  if (line_start < s.size()) lines.push_back(Value::string(s.substr(line_start)));
  interp.charge(static_cast<int64_t>(lines.size()));
  return Value::list(std::move(lines));
}

Value m_replace(Interp& interp, const Value& self, CallArgs& args) {
  ArgReader a("replace", args, {"old", "new", "count"});
  std::string old_s = a.get_string(0, "");
  std::string new_s = a.get_string(1, "");
  int64_t count = a.get_int(2, -1);
  const std::string& s = self.str();
  std::string out;
  int64_t done = 0;
  if (old_s.empty()) {
    for (size_t pos = 0; pos <= s.size();) {
      if (count < 0 || done < count) {
        out += new_s;
        ++done;
      }
      if (pos == s.size()) break;
      size_t start = pos;
      unicode::decode(s, &pos);
      out.append(s, start, pos - start);
      interp.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    size_t pos = s.find(old_s, start);
    if (pos == std::string::npos) break;
    out.append(s, start, pos - start);
    out += new_s;
    interp.check_size(out.size());
    start = pos + old_s.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return Value::string(std::move(out));
}

Value m_lower(Interp&, const Value& s, CallArgs& a) {
  ArgReader("lower", a, {});
  return Value::string(unicode::lower(s.str()));
}
Value m_upper(Interp&, const Value& s, CallArgs& a) {
  ArgReader("upper", a, {});
  return Value::string(unicode::upper(s.str()));
}

Value m_title(Interp&, const Value& self, CallArgs& args) {
  ArgReader("title", args, {});
  std::string out;
  bool prev_cased = false;
  const std::string& s = self.str();
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp = unicode::decode(s, &pos);
    bool cased = unicode::is_upper(cp) || unicode::is_lower(cp);
    unicode::append_utf8(&out,
                         cased ? (prev_cased ? unicode::to_lower(cp) : unicode::to_upper(cp)) : cp);
    prev_cased = cased;
  }
  return Value::string(std::move(out));
}

Value m_capitalize(Interp&, const Value& self, CallArgs& args) {
  ArgReader("capitalize", args, {});
  std::string out;
  const std::string& s = self.str();
  for (size_t pos = 0; pos < s.size();) {
    bool first = pos == 0;
    uint32_t cp = unicode::decode(s, &pos);
    unicode::append_utf8(&out, first ? unicode::to_upper(cp) : unicode::to_lower(cp));
  }
  return Value::string(std::move(out));
}

Value m_swapcase(Interp&, const Value& self, CallArgs& args) {
  ArgReader("swapcase", args, {});
  std::string out;
  const std::string& s = self.str();
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp = unicode::decode(s, &pos);
    unicode::append_utf8(&out,
                         unicode::is_upper(cp) ? unicode::to_lower(cp) : unicode::to_upper(cp));
  }
  return Value::string(std::move(out));
}

template <bool (*Pred)(uint32_t)>
Value char_class(Interp&, const Value& self, CallArgs&) {
  const std::string& s = self.str();
  if (s.empty()) return Value::boolean(false);
  for (size_t pos = 0; pos < s.size();) {
    if (!Pred(unicode::decode(s, &pos))) return Value::boolean(false);
  }
  return Value::boolean(true);
}

bool pred_alnum(uint32_t cp) {
  return unicode::is_alpha(cp) || unicode::is_digit(cp);
}

Value m_isascii(Interp&, const Value& self, CallArgs&) {
  return Value::boolean(unicode::is_ascii(self.str()));
}

// islower/isupper: at least one cased character and none of the other case.
Value case_test(const Value& self, bool want_lower) {
  bool any = false;
  const std::string& s = self.str();
  for (size_t pos = 0; pos < s.size();) {
    uint32_t cp = unicode::decode(s, &pos);
    if (unicode::is_upper(cp)) {
      if (want_lower) return Value::boolean(false);
      any = true;
    } else if (unicode::is_lower(cp)) {
      if (!want_lower) return Value::boolean(false);
      any = true;
    }
  }
  return Value::boolean(any);
}

Value m_islower(Interp&, const Value& s, CallArgs&) {
  return case_test(s, true);
}
Value m_isupper(Interp&, const Value& s, CallArgs&) {
  return case_test(s, false);
}

Value pad(Interp& interp, const Value& self, CallArgs& args, const char* name) {
  ArgReader a(name, args, {"width", "fillchar"});
  int64_t width = a.get_int(0, 0);
  std::string fill = a.get_string(1, " ");
  if (unicode::length(fill) != 1)
    throw_runtime("The fill character must be exactly one character long");
  const std::string& s = self.str();
  int64_t len = static_cast<int64_t>(unicode::length(s));
  if (width <= len) return self;
  interp.check_size(static_cast<size_t>(width) * fill.size());
  int64_t marg = width - len;
  int64_t left = 0;
  std::string n(name);
  if (n == "center") {
    left = marg / 2 + (marg & width & 1);
  } else if (n == "rjust") {
    left = marg;
  }
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += fill;
  return Value::string(std::move(out));
}

Value m_center(Interp& i, const Value& s, CallArgs& a) {
  return pad(i, s, a, "center");
}
Value m_ljust(Interp& i, const Value& s, CallArgs& a) {
  return pad(i, s, a, "ljust");
}
Value m_rjust(Interp& i, const Value& s, CallArgs& a) {
  return pad(i, s, a, "rjust");
}

Value m_zfill(Interp& interp, const Value& self, CallArgs& args) {
  ArgReader a("zfill", args, {"width"});
  int64_t width = a.get_int(0, 0);
  const std::string& s = self.str();
  int64_t len = static_cast<int64_t>(unicode::length(s));
  if (width <= len) return self;
  interp.check_size(static_cast<size_t>(width));
  size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  return Value::string(s.substr(0, sign) + std::string(static_cast<size_t>(width - len), '0') +
                       s.substr(sign));
}

Value m_join(Interp& interp, const Value& self, CallArgs& args) {
  ArgReader a("join", args, {"iterable"});
  List items = iterate(a.get(0));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      throw_runtime("sequence item " + std::to_string(i) + ": expected str instance, " +
                    items[i].type_name() + " found");
    }
    if (i) out += self.str();
    out += items[i].str();
    interp.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value partition_impl(const Value& self, CallArgs& args, bool reverse) {
  ArgReader a(reverse ? "rpartition" : "partition", args, {"sep"});
  std::string sep = a.get_string(0, "");
  if (sep.empty()) throw_runtime("empty separator");
  const std::string& s = self.str();
  size_t pos = reverse ? s.rfind(sep) : s.find(sep);
  if (pos == std::string::npos) {
    return reverse ? Value::tuple({Value::string(""), Value::string(""), self})
                   : Value::tuple({self, Value::string(""), Value::string("")});
  }
  return Value::tuple({Value::string(s.substr(0, pos)), Value::string(sep),
                       Value::string(s.substr(pos + sep.size()))});
}

Value m_partition(Interp&, const Value& s, CallArgs& a) {
  return partition_impl(s, a, false);
}
Value m_rpartition(Interp&, const Value& s, CallArgs& a) {
  return partition_impl(s, a, true);
}

Value m_removeprefix(Interp&, const Value& self, CallArgs& args) {
  ArgReader a("removeprefix", args, {"prefix"});
  std::string p = a.get_string(0, "");
  const std::string& s = self.str();
  return s.compare(0, p.size(), p) == 0 ? Value::string(s.substr(p.size())) : self;
}

Value m_removesuffix(Interp&, const Value& self, CallArgs& args) {
  ArgReader a("removesuffix", args, {"suffix"});
  std::string p = a.get_string(0, "");
  const std::string& s = self.str();
  if (!p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0) {
    return Value::string(s.substr(0, s.size() - p.size()));
  }
  return self;
}

Value m_format(Interp& interp, const Value& self, CallArgs& args) {
  return Value::string(str_format(interp, self.str(), args));
}

// ---- list / tuple ----

Value m_list_count(Interp&, const Value& self, CallArgs& args) {
  ArgReader a("count", args, {"value"});
  int64_t n = 0;
  for (const Value& v : self.items()) n += values_equal(v, a.get(0)) ? 1 : 0;
  return Value::integer(n);
}

Value m_list_index(Interp&, const Value& self, CallArgs& args) {
  ArgReader a("index", args, {"value", "start", "stop"});
  const List& items = self.items();
  auto n = static_cast<int64_t>(items.size());
  int64_t start = a.get_int(1, 0);
  int64_t stop = a.get_int(2, n);
  if (start < 0) start = std::max<int64_t>(0, start + n);
  if (stop < 0) stop = std::max<int64_t>(0, stop + n);
  for (int64_t i = start; i < std::min(stop, n); ++i) {
    if (values_equal(items[static_cast<size_t>(i)], a.get(0))) return Value::integer(i);
  }
  throw_runtime(repr(a.get(0)) + " is not in " + self.type_name());
}

Value m_copy(Interp&, const Value& self, CallArgs& args) {
  ArgReader("copy", args, {});
  return self;
}

// ---- dict ----

Value m_get(Interp&, const Value& self, CallArgs& args) {
  ArgReader a("get", args, {"key", "default"});
  if (const Value* v = self.dict().find(a.get(0))) return *v;
  return a.get_or(1, Value::none());
}

Value m_items(Interp& interp, const Value& self, CallArgs& args) {
  ArgReader("items", args, {});
  List out;
  out.reserve(self.dict().size());
  for (const auto& [k, v] : self.dict().entries()) out.push_back(Value::tuple({k, v}));
  interp.charge(static_cast<int64_t>(out.size()));
  return Value::list(std::move(out));
}

Value m_keys(Interp& interp, const Value& self, CallArgs& args) {
  ArgReader("keys", args, {});
  interp.charge(static_cast<int64_t>(self.dict().size()));
  return Value::list(iterate(self));
}

Value m_values(Interp& interp, const Value& self, CallArgs& args) {
  ArgReader("values", args, {});
  List out;
  for (const auto& [k, v] : self.dict().entries()) out.push_back(v);
  interp.charge(static_cast<int64_t>(out.size()));
  return Value::list(std::move(out));
}

using Table = std::unordered_map<std::string_view, MethodFn>;

const Table& str_methods() {
  static const Table t = {
      {"find", m_find},
      {"rfind", m_rfind},
      {"index", m_index},
      {"rindex", m_rindex},
      {"count", m_count},
      {"startswith", m_startswith},
      {"endswith", m_endswith},
      {"strip", m_strip},
      {"lstrip", m_lstrip},
      {"rstrip", m_rstrip},
      {"split", m_split},
      {"rsplit", m_rsplit},
      {"splitlines", m_splitlines},
      {"replace", m_replace},
      {"lower", m_lower},
      {"casefold", m_lower},
      {"upper", m_upper},
      {"title", m_title},
      {"capitalize", m_capitalize},
      {"swapcase", m_swapcase},
      {"isalpha", char_class<unicode::is_alpha>},
      {"isdigit", char_class<unicode::is_digit>},
      {"isdecimal", char_class<unicode::is_digit>},
      {"isnumeric", char_class<unicode::is_digit>},
      {"isalnum", char_class<pred_alnum>},
      {"isspace", char_class<unicode::is_space>},
      {"isascii", m_isascii},
      {"islower", m_islower},
      {"isupper", m_isupper},
      {"center", m_center},
      {"ljust", m_ljust},
      {"rjust", m_rjust},
      {"zfill", m_zfill},
      {"join", m_join},
      {"partition", m_partition},
      {"rpartition", m_rpartition},
      {"removeprefix", m_removeprefix},
      {"removesuffix", m_removesuffix},
      {"format", m_format},
  };
  return t;
}

const Table& list_methods() {
  static const Table t = {{"count", m_list_count}, {"index", m_list_index}, {"copy", m_copy}};
  return t;
}

const Table& tuple_methods() {
  static const Table t = {{"count", m_list_count}, {"index", m_list_index}};
  return t;
}

const Table& dict_methods() {
  static const Table t = {
      {"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"copy", m_copy}};
  return t;
}

const Table* table_for(const Value& self) {
  if (self.is_string()) return &str_methods();
  if (self.is_list()) return &list_methods();
  if (self.is_tuple()) return &tuple_methods();
  if (self.is_dict()) return &dict_methods();
  return nullptr;
}

bool is_unsafe(const Value& self, std::string_view name) {
  static const char* kList[] = {"append", "clear",  "extend",  "insert",
                                "pop",    "remove", "reverse", "sort"};
  static const char* kDict[] = {"clear", "pop", "popitem", "setdefault", "update"};
  if (self.is_list()) {
    return std::find(std::begin(kList), std::end(kList), name) != std::end(kList);
  }
  if (self.is_dict()) {
    return std::find(std::begin(kDict), std::end(kDict), name) != std::end(kDict);
  }
  return false;
}

}  // namespace

MethodKind method_kind(const Value& self, std::string_view name) {
  const Table* t = table_for(self);
  if (t == nullptr) return MethodKind::kNone;
  if (t->count(name)) return MethodKind::kSafe;
  return is_unsafe(self, name) ? MethodKind::kUnsafe : MethodKind::kNone;
}

Value call_method(Interp& interp, const Value& self, const std::string& name, CallArgs& args) {
  const Table* t = table_for(self);
  auto it = t->find(name);
  return it->second(interp, self, args);
}

}  // namespace strata::jinja
