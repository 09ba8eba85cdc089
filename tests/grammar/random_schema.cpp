#include "grammar/random_schema.h"

#include <cmath>
#include <regex>

#include "grammar/ebnf_text.h"
#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"

namespace strata::grammar::testing {
namespace {

int pick(Rng& r, int n) {
  return static_cast<int>(r.below(static_cast<uint64_t>(n)));
}
bool coin(Rng& r, double p = 0.5) {
  return r.uniform() < p;
}
int64_t range_int(Rng& r, int64_t lo, int64_t hi) {  // [lo, hi]
  return lo + static_cast<int64_t>(r.below(static_cast<uint64_t>(hi - lo + 1)));
}

// ---------------------------------------------------------------- schemas

const char* const kPropertyNames[] = {
    "name",     "id",  "value",       "tags",  "a b",   "q\"uote", "\xC3\xA9t\xC3\xA9", "x-y",
    "_private", "2nd", "back\\slash", "count", "items", "meta",    "enabled",           "type"};
const char* const kFormats[] = {"date", "time", "date-time", "email",    "uuid",
                                "uri",  "ipv4", "ipv6",      "hostname", "byte"};
const char* const kStringPool[] = {"a",
                                   "hello world",
                                   "q\"uote",
                                   "back\\slash",
                                   "new\nline",
                                   "tab\t",
                                   "\xC3\xA9t\xC3\xA9",
                                   "\xF0\x9F\x98\x80",
                                   "",
                                   "x"};

class SchemaGen {
 public:
  explicit SchemaGen(Rng& r) : r_(r) {}

  Json root() {
    Json s = coin(r_, 0.8) ? object(0) : any(0);
    if (!defs_.empty()) s["$defs"] = defs_;
    return s;
  }

 private:
  Json any(int depth) {
    int n = depth >= 3 ? 9 : 17;
    switch (pick(r_, n)) {
      case 0:
      case 1:
        return string();
      case 2:
        return integer();
      case 3:
        return number();
      case 4:
        return Json{{"type", "boolean"}};
      case 5:
        return Json{{"type", "null"}};
      case 6:
        return constant();
      case 7:
        return mixed_enum();
      case 8:
        return nullable(depth);
      case 9:
      case 10:
        return array(depth + 1);
      case 11:
      case 12:
        return object(depth + 1);
      case 13:
        return any_of(depth + 1);
      case 14:
        return one_of(depth + 1);
      case 15:
        return all_of(depth + 1);
      default:
        return ref(depth + 1);
    }
  }

  Json string() {
    Json s = {{"type", "string"}};
    switch (pick(r_, 5)) {
      case 0:
        break;
      case 1: {
        int lo = pick(r_, 4), hi = lo + pick(r_, 6);
        if (coin(r_)) s["minLength"] = lo;
        if (coin(r_)) s["maxLength"] = hi;
        break;
      }
      case 2:
        if (coin(r_, 0.3)) {  // lengths narrowing a repeated class
          s["pattern"] = coin(r_) ? "^[a-z0-9_]+$" : "^id-\\d*$";
          int lo = 1 + pick(r_, 4);
          s["minLength"] = lo;
          s["maxLength"] = lo + 3 + pick(r_, 5);
        } else {
          s["pattern"] = pattern();
        }
        break;
      case 3:
        s["format"] = kFormats[pick(r_, std::size(kFormats))];
        if (s["format"] == "email" && coin(r_)) s["maxLength"] = 254;
        break;
      default: {
        Json e = Json::array();
        int n = 1 + pick(r_, 4);
        for (int i = 0; i < n; ++i) {
          Json v = kStringPool[pick(r_, std::size(kStringPool))];
          if (std::find(e.begin(), e.end(), v) == e.end()) e.push_back(v);
        }
        s["enum"] = e;
      }
    }
    if (coin(r_, 0.2)) s["description"] = "a string";
    return s;
  }

  std::string pattern() {
    static const char* const kPieces[] = {"[a-z]{1,5}",
                                          "\\d{2,4}",
                                          "[A-F0-9]+",
                                          "-",
                                          "\\.",
                                          "(foo|bar|baz)",
                                          "_?",
                                          "[^,\"\\\\]{0,3}",
                                          "\\w{0,3}",
                                          "x{2}",
                                          "\"",
                                          "\\\\",
                                          "[\\u00e0-\\u00ff]",
                                          "(ab)+",
                                          "\\s?"};
    std::string p;
    int n = 1 + pick(r_, 4);
    for (int i = 0; i < n; ++i) p += kPieces[pick(r_, std::size(kPieces))];
    if (coin(r_)) p = "^" + p + "$";
    return p;
  }

  Json integer() {
    Json s = {{"type", "integer"}};
    int64_t a = range_int(r_, -1000, 1000), b = a + range_int(r_, 0, 2000);
    if (coin(r_, 0.1)) a = -(int64_t{1} << 40), b = int64_t{1} << 41;
    switch (pick(r_, 5)) {
      case 0:
        break;
      case 1:
        s["minimum"] = a;
        break;
      case 2:
        s["maximum"] = b;
        break;
      case 3:
        s["minimum"] = a, s["maximum"] = b;
        break;
      default:
        s["exclusiveMinimum"] = a, s["exclusiveMaximum"] = b + 2;
    }
    return s;
  }

  Json number() {
    Json s = {{"type", "number"}};
    int64_t a = range_int(r_, -50, 50), b = a + range_int(r_, 1, 100);
    switch (pick(r_, 7)) {
      case 0:
        break;
      case 1:
        s["minimum"] = 0;
        break;
      case 2:
        s["minimum"] = a, s["maximum"] = b;
        break;
      case 3:
        s["exclusiveMinimum"] = a, s["exclusiveMaximum"] = b;
        break;
      case 4:
        s["exclusiveMinimum"] = 0;
        break;
      case 5:
        s["maximum"] = int64_t{1} << 33;  // integers only near large bounds
        break;
      default:  // decimal bounds
        s["minimum"] = static_cast<double>(a) / 8.0;
        s[coin(r_) ? "maximum" : "exclusiveMaximum"] = static_cast<double>(b) / 8.0 + 0.125;
        break;
    }
    return s;
  }

  Json small_value(int depth = 0) {
    switch (pick(r_, depth > 1 ? 4 : 6)) {
      case 0:
        return kStringPool[pick(r_, std::size(kStringPool))];
      case 1:
        return range_int(r_, -100, 100);
      case 2:
        return coin(r_) ? Json(nullptr) : Json(coin(r_));
      case 3:
        return static_cast<double>(range_int(r_, -4000, 4000)) / 8.0;
      case 4:
        return Json::array({small_value(depth + 1), small_value(depth + 1)});
      default:
        return Json{{"k", small_value(depth + 1)}, {"q\"", small_value(depth + 1)}};
    }
  }

  Json constant() { return Json{{"const", small_value()}}; }

  Json mixed_enum() {
    Json e = Json::array();
    int n = 1 + pick(r_, 5);
    for (int i = 0; i < n; ++i) {
      Json v = small_value();
      if (std::find(e.begin(), e.end(), v) == e.end()) e.push_back(v);
    }
    return Json{{"enum", e}};
  }

  Json nullable(int depth) {
    Json s = coin(r_) ? string() : integer();
    if (coin(r_)) {
      s["nullable"] = true;
    } else {
      std::string t = s["type"].get<std::string>();
      s["type"] = Json::array({t, "null"});
    }
    if (s.contains("enum")) s["enum"].push_back(nullptr);
    return s;
  }

  Json array(int depth) {
    Json s = {{"type", "array"}};
    int kind = pick(r_, 4);
    if (kind < 3) s["items"] = any(depth);
    if (kind == 3) {
      Json prefix = Json::array();
      int n = 1 + pick(r_, 3);
      for (int i = 0; i < n; ++i) prefix.push_back(any(depth));
      s["prefixItems"] = prefix;
      if (coin(r_)) s["items"] = coin(r_) ? Json(false) : any(depth);
    }
    int lo = pick(r_, 3);
    if (s.contains("items") && s["items"] == Json(false))
      lo = std::min<int>(lo, s["prefixItems"].size());
    if (coin(r_)) s["minItems"] = lo;
    if (coin(r_)) s["maxItems"] = lo + pick(r_, 4);
    return s;
  }

  Json object(int depth) {
    Json s = {{"type", "object"}};
    Json props = Json::object();
    Json required = Json::array();
    int n = pick(r_, 6);
    for (int i = 0; i < n; ++i) {
      std::string name = kPropertyNames[pick(r_, std::size(kPropertyNames))];
      if (props.contains(name)) continue;
      props[name] = any(depth);
      if (coin(r_, 0.6)) required.push_back(name);
    }
    if (!props.empty() || coin(r_)) s["properties"] = props;
    if (!required.empty()) s["required"] = required;
    switch (pick(r_, 4)) {
      case 0:
        break;
      case 1:
        s["additionalProperties"] = false;
        break;
      case 2:
        s["additionalProperties"] = true;
        break;
      default:
        s["additionalProperties"] = coin(r_) ? Json{{"type", "integer"}} : Json{{"type", "string"}};
    }
    return s;
  }

  Json any_of(int depth) {
    Json b = Json::array();
    int n = 2 + pick(r_, 2);
    for (int i = 0; i < n; ++i) b.push_back(any(depth));
    return Json{{"anyOf", b}};
  }

  // Branches of distinct types, each typed explicitly: every value matches at most one.
  Json one_of(int depth) {
    std::vector<int> kinds = {0, 1, 2, 3, 4, 5};
    for (size_t i = kinds.size(); i > 1; --i)
      std::swap(kinds[i - 1], kinds[pick(r_, static_cast<int>(i))]);
    Json b = Json::array();
    int n = 2 + pick(r_, 2);
    for (int i = 0; i < n; ++i) {
      switch (kinds[i]) {
        case 0:
          b.push_back(string());
          break;
        case 1:
          b.push_back(integer());
          break;
        case 2:
          b.push_back(Json{{"type", "boolean"}});
          break;
        case 3:
          b.push_back(Json{{"type", "null"}});
          break;
        case 4:
          b.push_back(array(depth));
          break;
        default:
          b.push_back(object(depth));
          break;
      }
    }
    return Json{{"oneOf", b}};
  }

  Json all_of(int depth) {
    if (coin(r_)) {
      int64_t a = range_int(r_, -100, 100);
      return Json{{"allOf", Json::array({Json{{"type", "integer"}, {"minimum", a}},
                                         Json{{"maximum", a + range_int(r_, 0, 50)}}})}};
    }
    Json a = {
        {"type", "object"}, {"properties", {{"id", {{"type", "integer"}}}}}, {"required", {"id"}}};
    Json b = {{"properties", {{"name", string()}}}};
    if (coin(r_)) b["required"] = Json::array({"name"});
    return Json{{"allOf", Json::array({a, b})}};
  }

  Json ref(int depth) {
    std::string name;
    if (coin(r_, 0.4)) {
      name = "tree" + std::to_string(defs_.size());
      std::string self = "#/$defs/" + name;
      defs_[name] =
          Json{{"type", "object"},
               {"properties",
                {{"value", integer()},
                 {"children", {{"type", "array"}, {"items", {{"$ref", self}}}, {"maxItems", 2}}}}},
               {"required", {"value"}},
               {"additionalProperties", false}};
    } else {
      name = "def" + std::to_string(defs_.size());
      defs_[name] = Json();  // reserve the name before generating nested definitions
      defs_[name] = any(depth);
    }
    return Json{{"$ref", "#/$defs/" + name}};
  }

  Rng& r_;
  Json defs_ = Json::object();
};

// ---------------------------------------------------------------- instances

const char32_t kCharPool[] = {U'a',  U'Z',      U'0',      U' ',          U'"',      U'\\', U'\n',
                              U'\t', U'\u00e9', U'\u4e2d', U'\U0001F600', U'\u0001', U'/',  U'-'};

std::string random_format(const std::string& f, Rng& r) {
  char buf[64];
  auto two = [&](int v) {
    std::snprintf(buf, sizeof buf, "%02d", v);
    return std::string(buf);
  };
  auto date = [&] {
    int y = static_cast<int>(range_int(r, 1900, 2099)), m = static_cast<int>(range_int(r, 1, 12));
    static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int d = static_cast<int>(range_int(r, 1, kDays[m - 1] + (m == 2 && is_leap_year(y))));
    return std::to_string(y) + "-" + two(m) + "-" + two(d);
  };
  auto time = [&] {
    std::string t = two(static_cast<int>(range_int(r, 0, 23))) + ":" +
                    two(static_cast<int>(range_int(r, 0, 59))) + ":" +
                    two(static_cast<int>(range_int(r, 0, 59)));
    if (coin(r)) {
      t += '.';
      t += std::to_string(range_int(r, 0, 999));
    }
    if (coin(r)) return t + "Z";
    return t + (coin(r) ? "+" : "-") + two(static_cast<int>(range_int(r, 0, 23))) + ":" +
           two(static_cast<int>(range_int(r, 0, 59)));
  };
  auto label = [&] {
    static const char* const kLabels[] = {"example", "a1", "my-host", "x", "test9"};
    return std::string(kLabels[pick(r, 5)]);
  };
  auto hex = [&](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += "0123456789abcdef"[pick(r, 16)];
    return s;
  };
  if (f == "date") return date();
  if (f == "time") return time();
  if (f == "date-time") return date() + "T" + time();
  if (f == "email") return label() + (coin(r) ? ".name+tag" : "") + "@" + label() + ".com";
  if (f == "uuid") return hex(8) + "-" + hex(4) + "-" + hex(4) + "-" + hex(4) + "-" + hex(12);
  if (f == "uri")
    return "https://" + label() + ".org" + (coin(r) ? "/p/" + label() : "") +
           (coin(r) ? "?q=1" : "");
  if (f == "ipv4") {
    std::string s;
    for (int i = 0; i < 4; ++i) s += (i ? "." : "") + std::to_string(range_int(r, 0, 255));
    return s;
  }
  if (f == "ipv6") {
    std::string s;
    for (int i = 0; i < 8; ++i) s += (i ? ":" : "") + hex(1 + pick(r, 4));
    return s;
  }
  if (f == "byte") {
    std::string s;
    int quads = pick(r, 4);
    for (int i = 0; i < quads * 4 + (coin(r) ? 2 : 3); ++i)
      s += "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[pick(r, 64)];
    return s + (s.size() % 4 == 2 ? "==" : "=");
  }
  return label() + (coin(r) ? "." + label() : "");  // hostname
}

class InstanceGen {
 public:
  InstanceGen(const Json& root, Rng& r) : root_(root), refs_(root), r_(r) {}

  Json any(int depth) {
    switch (pick(r_, depth > 2 ? 4 : 6)) {
      case 0:
        return range_int(r_, -50, 50);
      case 1:
        return coin(r_);
      case 2:
        return nullptr;
      case 3:
        return std::string("s").append(std::to_string(pick(r_, 100)));
      case 4:
        return Json::array({any(depth + 1)});
      default:
        return Json{{"k", any(depth + 1)}};
    }
  }

  Json gen(const Json& s_in, int depth) {
    if (s_in.is_boolean()) return any(depth);
    Json s = s_in;
    if (s.contains("allOf") || (s.contains("$ref") && s.size() > 1))
      s = *schema::flatten_schema(s, refs_, "$");
    if (s.contains("$ref"))
      return gen(**refs_.resolve(s["$ref"].get<std::string>(), "$"), depth + 1);
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      Json branch = s[k][pick(r_, static_cast<int>(s[k].size()))];
      Json rest = s;
      rest.erase(k);
      if (rest.size() > 0) branch = *schema::merge_schemas(rest, branch, refs_, "$");
      return gen(branch, depth);
    }
    if (s.value("nullable", false) && coin(r_, 0.2)) return nullptr;
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (s["type"].is_string())
        types.push_back(s["type"].get<std::string>());
      else
        for (const auto& t : s["type"]) types.push_back(t.get<std::string>());
    }
    if (s.contains("enum") || s.contains("const")) {
      std::vector<Json> values;
      if (s.contains("const"))
        values.push_back(s["const"]);
      else
        values.assign(s["enum"].begin(), s["enum"].end());
      std::vector<Json> ok;
      for (const auto& v : values) {
        bool fits = types.empty();
        for (const auto& t : types) fits = fits || json_has_type(v, t);
        if (fits) ok.push_back(v);
      }
      return ok[pick(r_, static_cast<int>(ok.size()))];
    }
    if (types.empty()) {
      if (s.contains("properties") || s.contains("required"))
        types = {"object"};
      else if (s.contains("items") || s.contains("prefixItems"))
        types = {"array"};
      else if (s.contains("minimum") || s.contains("maximum"))
        types = {"integer"};
      else
        return any(depth);
    }
    const std::string t = types[pick(r_, static_cast<int>(types.size()))];
    if (t == "null") return nullptr;
    if (t == "boolean") return coin(r_);
    if (t == "integer" || t == "number") return number(s, t == "integer");
    if (t == "string") return string(s);
    if (t == "array") return array(s, depth);
    return object(s, depth);
  }

 private:
  Json number(const Json& s, bool integer) {
    double lo = -1e6, hi = 1e6;
    bool lo_x = false, hi_x = false;
    if (s.contains("minimum")) lo = s["minimum"].get<double>();
    if (s.contains("maximum")) hi = s["maximum"].get<double>();
    if (s.contains("exclusiveMinimum")) lo = s["exclusiveMinimum"].get<double>(), lo_x = true;
    if (s.contains("exclusiveMaximum")) hi = s["exclusiveMaximum"].get<double>(), hi_x = true;
    lo = std::max(lo, -1e12), hi = std::min(hi, 1e12);
    int64_t a = static_cast<int64_t>(std::ceil(lo)) + (lo_x && std::ceil(lo) == lo);
    int64_t b = static_cast<int64_t>(std::floor(hi)) - (hi_x && std::floor(hi) == hi);
    bool big = std::fabs(lo) >= 2147483648.0 || std::fabs(hi) >= 2147483648.0;
    for (int attempt = 0; attempt < 20; ++attempt) {
      if (integer || big || coin(r_, 0.3)) {
        int64_t n = coin(r_, 0.2) ? (coin(r_) ? a : b) : range_int(r_, a, std::max(a, b));
        if (n >= a && n <= b) return n;
        continue;
      }
      // Integer part from one below the least integer in range (0.5 in (0, 1)).
      int64_t n = range_int(r_, a - 1, std::max(a - 1, b));
      // Through decimal text, so that the double prints back with at most 3 fraction digits.
      char text[48];
      std::snprintf(text, sizeof text, "%s%lld.%03d", n < 0 ? "-" : "",
                    static_cast<long long>(n < 0 ? -n : n), pick(r_, 1000));
      double x = std::stod(text);
      if ((lo_x ? x > lo : x >= lo) && (hi_x ? x < hi : x <= hi) && x != 0) return x;
    }
    if (a <= b) return a;
    char text[48];
    std::snprintf(text, sizeof text, "%.3f", (lo + hi) / 2);
    return std::stod(text);
  }

  Json string(const Json& s) {
    if (s.contains("format")) return random_format(s["format"].get<std::string>(), r_);
    if (s.contains("pattern"))
      return pattern_string(s["pattern"].get<std::string>(), s.value("minLength", 0),
                            s.value("maxLength", -1));
    int lo = s.value("minLength", 0), hi = s.value("maxLength", lo + 8);
    int n = static_cast<int>(range_int(r_, lo, hi));
    std::string out;
    for (int i = 0; i < n; ++i) append_utf8(out, kCharPool[pick(r_, std::size(kCharPool))]);
    return out;
  }

  // A string matching the pattern in full: a random sentence of its grammar.
  std::string pattern_string(const std::string& pattern, int min_len, int max_len) {
    auto expr = regex_to_ebnf_expression(pattern, false, min_len, max_len);
    auto g = Grammar::parse_ebnf("root ::= " + *expr + "\n");
    for (int attempt = 0; attempt < 100; ++attempt)
      if (auto s = random_sentence(*g, r_, 400)) return *s;
    return "";
  }

  Json array(const Json& s, int depth) {
    const Json* prefix = s.contains("prefixItems") ? &s["prefixItems"] : nullptr;
    Json rest = s.contains("items") ? s["items"] : Json(true);
    int p = prefix ? static_cast<int>(prefix->size()) : 0;
    int lo = s.value("minItems", 0);
    int hi = s.value("maxItems", depth > 3 ? lo : lo + 3);
    if (rest == Json(false)) hi = std::min(hi, p);
    if (depth > 4) hi = lo;
    int n = static_cast<int>(range_int(r_, lo, std::max(lo, hi)));
    Json out = Json::array();
    for (int i = 0; i < n; ++i) out.push_back(gen(i < p ? (*prefix)[i] : rest, depth + 1));
    return out;
  }

  Json object(const Json& s, int depth) {
    Json out = Json::object();
    static const Json kNone = Json::object();
    const Json& props = s.contains("properties") ? s["properties"] : kNone;
    auto required = [&](const std::string& k) {
      return s.contains("required") &&
             std::find(s["required"].begin(), s["required"].end(), k) != s["required"].end();
    };
    for (auto it = props.begin(); it != props.end(); ++it)
      if (required(it.key()) || (depth < 4 && coin(r_))) out[it.key()] = gen(it.value(), depth + 1);
    Json addl = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
    if (s.contains("required"))
      for (const auto& k : s["required"])
        if (!out.contains(k.get<std::string>())) out[k.get<std::string>()] = gen(addl, depth + 1);
    if (addl != Json(false) && depth < 3) {
      int n = pick(r_, 3);
      for (int i = 0; i < n; ++i) {
        std::string key = "extra" + std::to_string(pick(r_, 5));
        if (!props.contains(key) && !out.contains(key)) out[key] = gen(addl, depth + 1);
      }
    }
    return out;
  }

  const Json& root_;
  schema::RefResolver refs_;
  Rng& r_;
};

}  // namespace

std::vector<Json> random_schemas(int count, uint64_t seed) {
  std::vector<Json> out;
  for (int i = 0; i < count; ++i) {
    Rng r(seed * 1000003 + static_cast<uint64_t>(i));
    out.push_back(SchemaGen(r).root());
  }
  return out;
}

Json random_instance(const Json& schema, Rng& rng) {
  return InstanceGen(schema, rng).gen(schema, 0);
}

std::optional<std::string> random_sentence(std::shared_ptr<const Grammar> grammar, Rng& rng,
                                           int max_bytes) {
  static const std::shared_ptr<const TokenVocabulary> kBytes = [] {
    auto v = std::make_shared<TokenVocabulary>();
    for (int b = 0; b < 256; ++b) v->token_bytes.push_back(std::string(1, static_cast<char>(b)));
    v->token_bytes.push_back("");  // 256: EOS
    v->is_special.assign(257, 0);
    v->is_special[256] = 1;
    v->eos_token_ids = {256};
    v->vocab_size = 257;
    return v;
  }();
  auto compiled = CompiledGrammar::compile(std::move(grammar), kBytes);
  GrammarMatcher m(compiled);
  std::string out;
  std::vector<uint64_t> mask(GrammarMatcher::mask_words(257));
  while (static_cast<int>(out.size()) <= max_bytes) {
    std::fill(mask.begin(), mask.end(), 0);
    m.fill_next_token_mask(mask);
    std::vector<int> allowed, closing;
    bool eos = false;
    for (int id = 0; id < 257; ++id) {
      if (!((mask[id >> 6] >> (id & 63)) & 1)) continue;
      if (id == 256) {
        eos = true;
        continue;
      }
      allowed.push_back(id);
      if (id == '"' || id == ',' || id == '}' || id == ']' || id == ':') closing.push_back(id);
    }
    if (eos && (allowed.empty() || coin(rng, 0.5))) return out;
    if (allowed.empty()) return std::nullopt;  // a dead end: the matcher's bug
    const auto& from = !closing.empty() && coin(rng, 0.35) ? closing : allowed;
    int id = from[pick(rng, static_cast<int>(from.size()))];
    if (!m.accept_token(id)) return std::nullopt;
    out.push_back(static_cast<char>(id));
  }
  return std::nullopt;
}

}  // namespace strata::grammar::testing
