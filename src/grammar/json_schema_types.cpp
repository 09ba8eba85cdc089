// The JSON Schema converter's per-type grammars: strings (lengths, patterns, formats), integers
// and numbers (ranges), arrays (prefixItems/items, min/maxItems) and objects (properties in
// schema order, required, additionalProperties).
#include <cmath>
#include <map>

#include "grammar/ebnf_text.h"
#include "grammar/json_schema_converter.h"

namespace strata::grammar::schema {
namespace {

constexpr double kMaxSafe = 9007199254740992.0;  // 2^53
constexpr double kFractionLimit = 2147483648.0;  // 2^31: bounds below keep fractions exact
constexpr int kObjectInlineLimit = 6;            // more properties: the tails become rules

struct Counter {
  explicit Counter(int& c) : c_(c) { ++c_; }
  ~Counter() { --c_; }
  int& c_;
};

Result<std::optional<int64_t>> count_keyword(const Json& s, const char* k,
                                             const std::string& path) {
  if (!s.contains(k)) return std::optional<int64_t>();
  const Json& v = s[k];
  if (!v.is_number() || v.get<double>() < 0 || std::floor(v.get<double>()) != v.get<double>() ||
      v.get<double>() > 1e9)
    return invalid_argument("'" + std::string(k) + "' at " + path +
                            " must be a non-negative integer");
  return std::optional<int64_t>(static_cast<int64_t>(v.get<double>()));
}

const char* const kQuote = "\"\\\"\"";  // EBNF for the quote of a JSON string

}  // namespace

Result<Bounds> Converter::bounds(const Json& s, const std::string& path) {
  Bounds b;
  for (const char* k : {"minimum", "maximum"}) {
    if (!s.contains(k)) continue;
    if (!s[k].is_number())
      return invalid_argument("'" + std::string(k) + "' at " + path + " must be a number");
    (k[1] == 'i' ? b.lo : b.hi) = s[k].get<double>();
  }
  for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"}) {
    if (!s.contains(k)) continue;
    bool is_min = k[9] == 'i';
    const Json& v = s[k];
    auto& bound = is_min ? b.lo : b.hi;
    bool& excl = is_min ? b.lo_excl : b.hi_excl;
    if (v.is_boolean()) {  // draft 4: modifies minimum/maximum
      if (bound) excl = v.get<bool>();
      continue;
    }
    if (!v.is_number())
      return invalid_argument("'" + std::string(k) + "' at " + path + " must be a number");
    double x = v.get<double>();
    if (!bound || (is_min ? x >= *bound : x <= *bound)) {
      bound = x;
      excl = true;
    }
  }
  return b;
}

Result<std::string> Converter::integer_expr(const Json& s, const std::string& path) {
  auto b = bounds(s, path);
  if (!b.ok()) return b.status();
  if (s.contains("multipleOf") &&
      !(s["multipleOf"].is_number() && s["multipleOf"].get<double>() == 1))
    return invalid_argument("'multipleOf' " + s["multipleOf"].dump() + " at " + path +
                            " is not supported (only 1)");
  std::optional<double> lo = b->lo, hi = b->hi;
  bool lo_excl = b->lo_excl, hi_excl = b->hi_excl;
  if (s.contains("format") && s["format"].is_string()) {
    std::string f = s["format"].get<std::string>();
    double fmin = 0, fmax = 0;
    if (f == "int32")
      fmin = -2147483648.0, fmax = 2147483647.0;
    else if (f == "int64")
      fmin = -(kMaxSafe - 1), fmax = kMaxSafe - 1;
    else if (f != "float" && f != "double")
      return invalid_argument("unsupported format '" + f + "' for a number at " + path);
    if (f == "int32" || f == "int64") {
      if (!lo || *lo < fmin) lo = fmin, lo_excl = false;
      if (!hi || *hi > fmax) hi = fmax, hi_excl = false;
    }
  }
  if (!lo && !hi) return prim("integer");
  std::optional<int64_t> l, h;
  constexpr double kCap = 1e18;
  if (lo) {
    double v = lo_excl ? std::floor(*lo) + 1 : std::ceil(*lo);
    if (v > kCap)
      return invalid_argument("'minimum' at " + path + " is beyond the supported range");
    if (v >= -kCap) l = static_cast<int64_t>(v);
  }
  if (hi) {
    double v = hi_excl ? std::ceil(*hi) - 1 : std::floor(*hi);
    if (v < -kCap)
      return invalid_argument("'maximum' at " + path + " is beyond the supported range");
    if (v <= kCap) h = static_cast<int64_t>(v);
  }
  std::string e = integer_range_expr(l, h);
  if (e.empty()) return invalid_argument("no integer satisfies the bounds at " + path);
  return e;
}

Result<std::string> Converter::number_expr(const Json& s, const std::string& path) {
  if (s.contains("multipleOf")) {
    if (s["multipleOf"].is_number() && s["multipleOf"].get<double>() == 1)
      return integer_expr(s, path);
    return invalid_argument("'multipleOf' " + s["multipleOf"].dump() + " at " + path +
                            " is not supported for numbers (only 1)");
  }
  if (s.contains("format") && s["format"].is_string()) {
    std::string f = s["format"].get<std::string>();
    if (f == "int32" || f == "int64") return integer_expr(s, path);
    if (f != "float" && f != "double")
      return invalid_argument("unsupported format '" + f + "' for a number at " + path);
  }
  auto b = bounds(s, path);
  if (!b.ok()) return b.status();
  if (!b->lo && !b->hi) return prim("number");
  NumberBound lo, hi;
  bool fractions = true;
  for (auto [bound, excl, out, name] : {std::tuple{b->lo, b->lo_excl, &lo, "minimum"},
                                        std::tuple{b->hi, b->hi_excl, &hi, "maximum"}}) {
    if (!bound) continue;
    double v = *bound;
    if (std::floor(v) != v || std::fabs(v) > kMaxSafe)
      return invalid_argument("number bound " + Json(v).dump() + " ('" + name + "') at " + path +
                              " is not supported: only integer-valued bounds up to 2^53 are");
    *out = NumberBound{.set = true, .value = static_cast<int64_t>(v), .exclusive = excl};
    if (std::fabs(v) >= kFractionLimit) fractions = false;
  }
  std::string e = number_range_expr(lo, hi, fractions);
  if (e.empty()) return invalid_argument("no number satisfies the bounds at " + path);
  return e;
}

Result<std::string> Converter::string_expr(const Json& s, const std::string& path) {
  auto min_len = count_keyword(s, "minLength", path);
  if (!min_len.ok()) return min_len.status();
  auto max_len = count_keyword(s, "maxLength", path);
  if (!max_len.ok()) return max_len.status();
  bool lengths = min_len->has_value() || max_len->has_value();
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string())
      return invalid_argument("'pattern' at " + path + " must be a string");
    if (lengths || s.contains("format"))
      return invalid_argument("'pattern' together with 'minLength', 'maxLength' or 'format' at " +
                              path + " is not supported");
    auto e = regex_to_ebnf_expression(s["pattern"].get<std::string>(), true);
    if (!e.ok())
      return invalid_argument("unsupported 'pattern' at " + path + ": " + e.status().message());
    return add_rule("pattern", std::string(kQuote) + " " + *e + " " + kQuote);
  }
  if (s.contains("format")) {
    if (!s["format"].is_string())
      return invalid_argument("'format' at " + path + " must be a string");
    std::string f = s["format"].get<std::string>();
    auto e = string_format_expr(f);
    if (!e) return invalid_argument("unsupported string format '" + f + "' at " + path);
    if (lengths)
      return invalid_argument("'format' together with 'minLength' or 'maxLength' at " + path +
                              " is not supported");
    std::string key = "format:" + f;
    if (auto it = prims_.find(key); it != prims_.end()) return it->second;
    std::string base;
    for (char c : f) base += (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '-';
    return prims_[key] = add_rule(base, *e);
  }
  if (!lengths) return prim("string");
  int64_t lo = min_len->value_or(0), hi = max_len->value_or(-1);
  if (hi >= 0 && hi < lo) return invalid_argument("'maxLength' is below 'minLength' at " + path);
  return std::string(kQuote) + " " + prim("char") + repeat_suffix(lo, hi) + " " + kQuote;
}

Result<std::string> Converter::array_expr(const Json& s, const std::string& path) {
  Counter in_container(containers_);
  auto min_items = count_keyword(s, "minItems", path);
  if (!min_items.ok()) return min_items.status();
  auto max_items = count_keyword(s, "maxItems", path);
  if (!max_items.ok()) return max_items.status();
  int64_t lo = min_items->value_or(0), hi = max_items->value_or(-1);
  if (s.contains("uniqueItems") && s["uniqueItems"] == Json(true) && !(hi >= 0 && hi <= 1))
    return invalid_argument("unsupported JSON Schema keyword 'uniqueItems' at " + path);
  const Json* prefix = nullptr;
  std::string prefix_key;
  Json rest = true;
  std::string rest_path;
  if (s.contains("prefixItems")) {
    prefix = &s["prefixItems"];
    prefix_key = "prefixItems";
    if (s.contains("items")) rest = s["items"], rest_path = child_path(path, "items");
  } else if (s.contains("items") && s["items"].is_array()) {
    prefix = &s["items"];
    prefix_key = "items";
    if (s.contains("additionalItems"))
      rest = s["additionalItems"], rest_path = child_path(path, "additionalItems");
  } else if (s.contains("items")) {
    rest = s["items"], rest_path = child_path(path, "items");
  }
  if (prefix && !prefix->is_array())
    return invalid_argument("'" + prefix_key + "' at " + path + " must be an array");
  std::vector<std::string> items;
  if (prefix) {
    for (size_t i = 0; i < prefix->size(); ++i) {
      if ((*prefix)[i] == Json(false)) break;  // no array reaches this position
      auto e = visit((*prefix)[i], child_path(path, prefix_key, i));
      if (!e.ok()) return e.status();
      items.push_back(*e);
    }
    if (items.size() < prefix->size()) rest = false;
  }
  std::string rest_expr;
  if (rest != Json(false)) {
    auto e = visit(rest, rest_path.empty() ? child_path(path, "items") : rest_path);
    if (!e.ok()) return e.status();
    rest_expr = *e;
  }
  int64_t p = static_cast<int64_t>(items.size());
  if (rest_expr.empty()) hi = hi < 0 ? p : std::min(hi, p);
  if (hi >= 0 && lo > hi) return invalid_argument("no array satisfies 'minItems' at " + path);
  const std::string sep = cat({ws(), "\",\"", ws()});
  std::string first;
  if (hi == 0) {
    return add_rule("arr", cat({"\"[\"", ws(), "\"]\""}));
  } else if (p > 0) {
    int64_t pe = hi < 0 ? p : std::min(p, hi);
    std::string tail;
    if (pe == p && !rest_expr.empty()) {
      int64_t a = std::max<int64_t>(0, lo - p), b = hi < 0 ? -1 : hi - p;
      if (b != 0) tail = "(" + cat({sep, rest_expr}) + ")" + repeat_suffix(a, b);
    }
    for (int64_t j = pe - 1; j >= 1; --j) {
      std::string step = cat({sep, items[j], tail});
      tail = j < lo ? step : "(" + step + ")?";
    }
    first = cat({items[0], tail});
  } else {
    first = rest_expr;
    if (hi != 1)
      first = cat({first, "(" + cat({sep, rest_expr}) + ")" +
                              repeat_suffix(std::max<int64_t>(0, lo - 1), hi < 0 ? -1 : hi - 1)});
  }
  std::string body = lo == 0 ? cat({"\"[\"", ws(), "(" + cat({first, ws()}) + ")?", "\"]\""})
                             : cat({"\"[\"", ws(), first, ws(), "\"]\""});
  return add_rule("arr", body);
}

std::string Converter::key_not_in(const std::vector<std::string>& names) {
  // A trie of the names (those made of plain characters only: others can never be produced).
  struct TrieNode {
    bool terminal = false;
    std::map<char32_t, int> kids;
  };
  std::vector<TrieNode> trie(1);
  for (const auto& n : names) {
    std::u32string cs = decode_utf8(n);
    bool plain = true;
    for (char32_t c : cs) plain = plain && json_plain_chars().contains(c);
    if (!plain) continue;
    int node = 0;
    for (char32_t c : cs) {
      auto it = trie[node].kids.find(c);
      if (it == trie[node].kids.end()) {
        trie.push_back({});
        int child = static_cast<int>(trie.size()) - 1;
        trie[node].kids[c] = child;
        node = child;
      } else {
        node = it->second;
      }
    }
    trie[node].terminal = true;
  }
  const std::string any_plain = ebnf_class(json_plain_chars()) + "*";
  // Strings of plain characters that are not names below `node`.
  auto not_in = [&](auto&& self, int node) -> std::string {
    std::vector<std::string> alts;
    CodePointSet kids;
    for (auto [c, child] : trie[node].kids) {
      kids.add(c, c);
      alts.push_back(cat({ebnf_literal(std::u32string(1, c)), self(self, child)}));
    }
    CodePointSet other = json_plain_chars().minus(kids);
    alts.push_back(cat({ebnf_class(other), any_plain}));
    std::string body = alts_expr(alts);
    if (trie[node].terminal) return body;
    return (body[0] == '(' ? body : "(" + body + ")") + "?";
  };
  return not_in(not_in, 0);
}

Result<std::string> Converter::object_expr(const Json& s, const std::string& path) {
  Counter in_container(containers_);
  static const Json kEmpty = Json::object();
  const Json& props = s.contains("properties") ? s["properties"] : kEmpty;
  if (!props.is_object()) return invalid_argument("'properties' at " + path + " must be an object");
  Json addl = !(opt_.disable_additional_properties || opt_.strict);
  if (s.contains("additionalProperties") && !opt_.strict) addl = s["additionalProperties"];
  if (!addl.is_boolean() && !addl.is_object())
    return invalid_argument("'additionalProperties' at " + path + " must be a schema");
  bool closed = addl == Json(false);
  std::vector<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array())
      return invalid_argument("'required' at " + path + " must be an array");
    for (const auto& r : s["required"]) {
      if (!r.is_string()) return invalid_argument("'required' at " + path + " must hold strings");
      required.push_back(r.get<std::string>());
    }
  }
  auto is_required = [&](const std::string& k) {
    return opt_.strict || std::find(required.begin(), required.end(), k) != required.end();
  };
  struct Entry {
    std::string key, expr;
    bool required;
  };
  std::vector<Entry> entries;
  std::vector<std::string> names;
  for (auto it = props.begin(); it != props.end(); ++it) {
    names.push_back(it.key());
    std::string p = child_path(path, "properties", it.key());
    if (it.value() == Json(false)) {
      if (is_required(it.key()))
        return invalid_argument("required property '" + it.key() + "' at " + p +
                                " allows no value");
      continue;
    }
    auto e = visit(it.value(), p);
    if (!e.ok()) return e.status();
    entries.push_back({it.key(), *e, is_required(it.key())});
  }
  std::string addl_expr;
  if (!closed) {
    auto e = visit(addl, child_path(path, "additionalProperties"));
    if (!e.ok()) return e.status();
    addl_expr = *e;
  }
  for (const auto& r : required) {
    if (props.contains(r)) continue;
    if (closed)
      return invalid_argument("required property '" + r + "' at " + path +
                              " is not in 'properties' and additional properties are not allowed");
    names.push_back(r);
    entries.push_back({r, addl_expr, true});
  }
  size_t num_required = 0;
  for (const auto& e : entries) num_required += e.required;
  auto min_props = count_keyword(s, "minProperties", path);
  if (!min_props.ok()) return min_props.status();
  auto max_props = count_keyword(s, "maxProperties", path);
  if (!max_props.ok()) return max_props.status();
  if (min_props->has_value() && **min_props > static_cast<int64_t>(num_required))
    return invalid_argument("unsupported JSON Schema keyword 'minProperties' at " + path +
                            " (supported up to the number of required properties)");
  if (max_props->has_value() && (!closed || **max_props < static_cast<int64_t>(entries.size())))
    return invalid_argument("unsupported JSON Schema keyword 'maxProperties' at " + path +
                            " (supported when no more properties than that can appear)");

  const std::string sep = cat({ws(), "\",\"", ws()});
  auto kv = [&](const std::string& key, const std::string& value) {
    return cat({ebnf_literal(Json(key).dump()), ws(), "\":\"", ws(), value});
  };
  std::string addl_kv;
  if (!closed) {
    std::string key =
        names.empty()
            ? prim("string")
            : add_rule("key", std::string(kQuote) + " " + key_not_in(names) + " " + kQuote);
    addl_kv = kv(key, addl_expr);
  }
  size_t n = entries.size();
  // after[i]: properties i.. when something precedes them (each with its comma).
  std::vector<std::string> after(n + 1);
  after[n] = closed ? "" : "(" + cat({sep, addl_kv}) + ")*";
  for (size_t i = n; i-- > 0;) {
    std::string item = cat({sep, kv(entries[i].key, entries[i].expr)});
    after[i] =
        entries[i].required ? cat({item, after[i + 1]}) : cat({"(" + item + ")?", after[i + 1]});
    if (n > kObjectInlineLimit && i > 0 && !after[i].empty())
      after[i] = add_rule("obj-tail", after[i]);
  }
  // first: the non-empty content from property i on, nothing before it.
  std::optional<std::string> first;
  if (!closed) first = cat({addl_kv, after[n]});
  for (size_t i = n; i-- > 0;) {
    std::string here = cat({kv(entries[i].key, entries[i].expr), after[i + 1]});
    if (entries[i].required || !first)
      first = here;
    else
      first = "(" + here + " | " + *first + ")";
  }
  std::string body;
  if (!first)
    body = cat({"\"{\"", ws(), "\"}\""});
  else if (num_required == 0)
    body = cat({"\"{\"", ws(), "(" + cat({*first, ws()}) + ")?", "\"}\""});
  else
    body = cat({"\"{\"", ws(), *first, ws(), "\"}\""});
  return add_rule("obj", body);
}

}  // namespace strata::grammar::schema
