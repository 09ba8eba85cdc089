// The test's JSON Schema validator (random_schema.h: validate) and the helpers the generators
// share with it.
#include <cmath>
#include <map>
#include <regex>

#include "grammar/ebnf_text.h"
#include "grammar/json_schema_internal.h"
#include "grammar/random_schema.h"

namespace strata::grammar::testing {

bool is_leap_year(int y) {
  return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

bool json_has_type(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer")
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (t == "number") return v.is_number();
  if (t == "string") return v.is_string();
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  return false;
}

namespace {

std::u32string code_points(const std::string& s) {
  return decode_utf8(s);
}

bool valid_date(const std::string& s) {
  static const std::regex re("^(\\d{4})-(\\d{2})-(\\d{2})$");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  int y = std::stoi(m[1]), mo = std::stoi(m[2]), d = std::stoi(m[3]);
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1) return false;
  return d <= kDays[mo - 1] + (mo == 2 && is_leap_year(y));
}

bool valid_time(const std::string& s) {
  static const std::regex re("^(\\d\\d):(\\d\\d):(\\d\\d)(\\.\\d+)?([zZ]|[+-](\\d\\d):?(\\d\\d))$");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  int h = std::stoi(m[1]), mi = std::stoi(m[2]), se = std::stoi(m[3]);
  if (h > 23 || mi > 59 || se > 59) return false;
  if (m[6].matched && (std::stoi(m[6]) > 23 || std::stoi(m[7]) > 59)) return false;
  return true;
}

bool valid_format(const std::string& f, const std::string& s) {
  if (f == "date") return valid_date(s);
  if (f == "time") return valid_time(s);
  if (f == "date-time") {
    size_t t = s.find_first_of("tT ");
    return t != std::string::npos && valid_date(s.substr(0, t)) && valid_time(s.substr(t + 1));
  }
  static const std::map<std::string, std::regex> kRegexes = {
      {"email",
       std::regex(
           "^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[a-z0-9!#$%&'*+/"
           "=?^_`{|}~-]+)*@([a-z0-9]([a-z0-9-]*[a-z0-9])?\\.)+[a-z0-9]([a-z0-9-]*[a-z0-9])?$",
           std::regex::icase)},
      {"uuid",
       std::regex("^(urn:uuid:)?[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$", std::regex::icase)},
      {"uri", std::regex("^[a-z][a-z0-9+.-]*://[a-z0-9._~!$&'()*+,;=:%-]*(/"
                         "[a-z0-9._~!$&'()*+,;=:@%-]*)*(\\?[a-z0-9._~!$&'()*+,;=:@%/?-]*)?$",
                         std::regex::icase)},
      {"ipv4",
       std::regex(
           "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$")},
      {"ipv6", std::regex("^[0-9a-f]{1,4}(:[0-9a-f]{1,4}){7}$", std::regex::icase)},
      {"byte",
       std::regex("^([a-z0-9+/]{4})*([a-z0-9+/]{2}==|[a-z0-9+/]{3}=)?$", std::regex::icase)},
      {"hostname",
       std::regex(
           "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\\.?$",
           std::regex::icase)},
  };
  auto it = kRegexes.find(f);
  return it != kRegexes.end() && std::regex_match(s, it->second);
}

class Validator {
 public:
  explicit Validator(const Json& root) : root_(root), refs_(root) {}

  std::string check(const Json& s, const Json& v, const std::string& at, int depth = 0) {
    if (depth > 100) return "too deep at " + at;
    if (s.is_boolean()) return s.get<bool>() ? "" : "false schema at " + at;
    if (s.contains("$ref")) {
      auto target = refs_.resolve(s["$ref"].get<std::string>(), at);
      if (!target.ok()) return target.status().message();
      if (auto e = check(**target, v, at, depth + 1); !e.empty()) return e;
    }
    bool nullable = s.value("nullable", false);
    if (nullable && v.is_null()) return "";
    if (s.contains("type")) {
      bool ok = false;
      const Json& t = s["type"];
      if (t.is_string())
        ok = json_has_type(v, t.get<std::string>());
      else
        for (const auto& x : t) ok = ok || json_has_type(v, x.get<std::string>());
      if (!ok) return "type mismatch at " + at + ": " + v.dump();
    }
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end())
      return "not in enum at " + at + ": " + v.dump();
    if (s.contains("const") && s["const"] != v) return "not const at " + at;
    if (s.contains("allOf"))
      for (const auto& b : s["allOf"])
        if (auto e = check(b, v, at, depth + 1); !e.empty()) return e;
    if (s.contains("anyOf")) {
      bool ok = false;
      for (const auto& b : s["anyOf"]) ok = ok || check(b, v, at, depth + 1).empty();
      if (!ok) return "no anyOf branch matches at " + at;
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const auto& b : s["oneOf"]) n += check(b, v, at, depth + 1).empty();
      if (n != 1) return std::to_string(n) + " oneOf branches match at " + at;
    }
    if (v.is_string()) {
      const std::string& str = v.get_ref<const std::string&>();
      size_t len = code_points(str).size();
      if (s.contains("minLength") && len < s["minLength"].get<size_t>())
        return "too short at " + at;
      if (s.contains("maxLength") && len > s["maxLength"].get<size_t>()) return "too long at " + at;
      if (s.contains("pattern")) {
        std::u32string p = code_points(s["pattern"].get<std::string>());
        std::u32string c = code_points(str);
        std::wregex re(std::wstring(p.begin(), p.end()), std::regex::ECMAScript);
        if (!std::regex_search(std::wstring(c.begin(), c.end()), re))
          return "pattern " + s["pattern"].get<std::string>() + " does not match at " + at + ": " +
                 v.dump();
      }
      if (s.contains("format") && !valid_format(s["format"].get<std::string>(), str))
        return "not a " + s["format"].get<std::string>() + " at " + at + ": " + v.dump();
    }
    if (v.is_number()) {
      double x = v.get<double>();
      auto excl = [&](const char* k) {
        return s.contains(k) && s[k].is_boolean() && s[k].get<bool>();
      };
      if (s.contains("minimum") && (excl("exclusiveMinimum") ? x <= s["minimum"].get<double>()
                                                             : x < s["minimum"].get<double>()))
        return "below minimum at " + at + ": " + v.dump();
      if (s.contains("maximum") && (excl("exclusiveMaximum") ? x >= s["maximum"].get<double>()
                                                             : x > s["maximum"].get<double>()))
        return "above maximum at " + at + ": " + v.dump();
      if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() &&
          x <= s["exclusiveMinimum"].get<double>())
        return "not above exclusiveMinimum at " + at + ": " + v.dump();
      if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() &&
          x >= s["exclusiveMaximum"].get<double>())
        return "not below exclusiveMaximum at " + at + ": " + v.dump();
      if (s.contains("multipleOf") && std::fmod(x, s["multipleOf"].get<double>()) != 0)
        return "not a multiple at " + at;
    }
    if (v.is_array()) {
      size_t n = v.size();
      if (s.contains("minItems") && n < s["minItems"].get<size_t>())
        return "too few items at " + at;
      if (s.contains("maxItems") && n > s["maxItems"].get<size_t>())
        return "too many items at " + at;
      size_t prefix = 0;
      const Json* rest = s.contains("items") && !s["items"].is_array() ? &s["items"] : nullptr;
      const Json* pre = s.contains("prefixItems")                      ? &s["prefixItems"]
                        : s.contains("items") && s["items"].is_array() ? &s["items"]
                                                                       : nullptr;
      if (pre && s.contains("items") && s["items"].is_array())
        rest = s.contains("additionalItems") ? &s["additionalItems"] : nullptr;
      if (pre) {
        prefix = std::min(pre->size(), n);
        for (size_t i = 0; i < prefix; ++i)
          if (auto e = check((*pre)[i], v[i], at + "[" + std::to_string(i) + "]", depth + 1);
              !e.empty())
            return e;
      }
      if (rest)
        for (size_t i = prefix; i < n; ++i)
          if (auto e = check(*rest, v[i], at + "[" + std::to_string(i) + "]", depth + 1);
              !e.empty())
            return e;
      if (s.value("uniqueItems", false))
        for (size_t i = 0; i < n; ++i)
          for (size_t j = i + 1; j < n; ++j)
            if (v[i] == v[j]) return "duplicate items at " + at;
    }
    if (v.is_object()) {
      static const Json kNone = Json::object();
      const Json& props = s.contains("properties") ? s["properties"] : kNone;
      if (s.contains("required"))
        for (const auto& r : s["required"])
          if (!v.contains(r.get<std::string>())) return "missing " + r.dump() + " at " + at;
      for (auto it = v.begin(); it != v.end(); ++it) {
        std::string p = at + "." + it.key();
        if (props.contains(it.key())) {
          if (auto e = check(props[it.key()], it.value(), p, depth + 1); !e.empty()) return e;
        } else if (s.contains("additionalProperties")) {
          if (auto e = check(s["additionalProperties"], it.value(), p, depth + 1); !e.empty())
            return e;
        }
      }
      if (s.contains("minProperties") && v.size() < s["minProperties"].get<size_t>())
        return "too few properties at " + at;
      if (s.contains("maxProperties") && v.size() > s["maxProperties"].get<size_t>())
        return "too many properties at " + at;
    }
    return "";
  }

 private:
  const Json& root_;
  schema::RefResolver refs_;
};

}  // namespace

std::string validate(const Json& schema, const Json& value) {
  return Validator(schema).check(schema, value, "$");
}

}  // namespace strata::grammar::testing
