// The JSON Schema converter's class, shared by json_schema.cpp (dispatch, $ref, anyOf, enum)
// and json_schema_types.cpp (strings, numbers, arrays, objects). Internal.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"

namespace strata::grammar::schema {

inline std::string cat(std::initializer_list<std::string> parts) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

inline std::string alts_expr(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

inline std::string repeat_suffix(int64_t lo, int64_t hi) {  // hi < 0: unbounded
  if (lo == 0 && hi < 0) return "*";
  if (lo == 1 && hi < 0) return "+";
  if (lo == 0 && hi == 1) return "?";
  if (lo == hi) return "{" + std::to_string(lo) + "}";
  return "{" + std::to_string(lo) + "," + (hi < 0 ? "" : std::to_string(hi)) + "}";
}

struct Bounds {
  std::optional<double> lo, hi;
  bool lo_excl = false, hi_excl = false;
};

class Converter {
 public:
  Converter(const Json& root, const JsonSchemaOptions& options)
      : root_(root), refs_(root), opt_(options) {}

  Result<std::string> run() {
    auto e = visit(root_, "$");
    if (!e.ok()) return e.status();
    return render(*e);
  }

  // The rules of any JSON value; returns the name of `kind` (value, object, array, string,
  // char, number, integer, boolean, ws), adding them on first use.
  std::string prim(const std::string& kind);
  // The whole grammar with `root_expr` as the root rule.
  std::string render(const std::string& root_expr) const;

 private:
  std::string ws() { return opt_.any_whitespace ? prim("ws") : ""; }

  std::string fresh(const std::string& base) {
    std::string n = opt_.rule_prefix + base;
    if (n == opt_.rule_prefix + "root" || !names_.insert(n).second) {
      for (int i = 1;; ++i) {
        std::string c = opt_.rule_prefix + base + "-" + std::to_string(i);
        if (names_.insert(c).second) return c;
      }
    }
    return n;
  }
  size_t reserve(const std::string& name) {
    rules_.emplace_back(name, "");
    return rules_.size() - 1;
  }
  std::string add_rule(const std::string& base, const std::string& body) {
    std::string n = fresh(base);
    rules_.emplace_back(n, body);
    return n;
  }

  Result<std::string> visit(const Json& s, const std::string& path);
  Result<std::string> visit_ref(const std::string& ref, const std::string& path);
  Result<std::string> visit_alternatives(const Json& s, const std::string& key,
                                         const std::string& path);
  Result<std::string> visit_enum(const Json& s, const std::string& path);
  Result<std::string> visit_type(const Json& s, const std::string& type, const std::string& path);
  Result<std::string> string_expr(const Json& s, const std::string& path);
  Result<std::string> integer_expr(const Json& s, const std::string& path);
  Result<std::string> number_expr(const Json& s, const std::string& path);
  Result<std::string> array_expr(const Json& s, const std::string& path);
  Result<std::string> object_expr(const Json& s, const std::string& path);
  Result<Bounds> bounds(const Json& s, const std::string& path);
  std::string key_not_in(const std::vector<std::string>& names);

  const Json& root_;
  schema::RefResolver refs_;
  JsonSchemaOptions opt_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  std::map<std::string, std::string> prims_;
  std::map<std::string, std::string> ref_rules_;
  std::map<std::string, int> refs_in_progress_;  // pointer -> containers_ when entered
  int containers_ = 0;                           // objects/arrays entered on the current path
  int depth_ = 0;
};

}  // namespace strata::grammar::schema
