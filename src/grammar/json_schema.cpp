// JSON Schema -> EBNF (see json_schema.h for what is supported and the deliberate restrictions).
//
// The converter walks the schema and returns, for each subschema, an EBNF expression; objects,
// arrays, alternatives and $ref targets become named rules (a $ref target once, so recursive
// schemas become recursive rules). allOf and $ref with sibling keywords are merged into one
// schema first (json_schema_merge.cpp).
#include "grammar/json_schema.h"

#include <cmath>
#include <map>
#include <set>

#include "grammar/ebnf_text.h"
#include "grammar/json_schema_converter.h"

namespace strata::grammar::schema {
namespace {

const char* const kTypeNames[] = {"null",   "boolean", "integer", "number",
                                  "string", "array",   "object"};

bool is_type_name(const std::string& t) {
  for (const char* n : kTypeNames)
    if (t == n) return true;
  return false;
}

bool matches_type(const Json& v, const std::string& t) {
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

// The types whose keywords appear in `s` (a schema without "type").
std::set<std::string> implied_types(const Json& s) {
  static const std::map<std::string, std::string> kKeywordType = {
      {"properties", "object"},
      {"required", "object"},
      {"additionalProperties", "object"},
      {"minProperties", "object"},
      {"maxProperties", "object"},
      {"items", "array"},
      {"prefixItems", "array"},
      {"minItems", "array"},
      {"maxItems", "array"},
      {"additionalItems", "array"},
      {"uniqueItems", "array"},
      {"minLength", "string"},
      {"maxLength", "string"},
      {"pattern", "string"},
      {"format", "string"},
      {"minimum", "number"},
      {"maximum", "number"},
      {"exclusiveMinimum", "number"},
      {"exclusiveMaximum", "number"},
      {"multipleOf", "number"}};
  std::set<std::string> out;
  for (auto it = s.begin(); it != s.end(); ++it)
    if (auto k = kKeywordType.find(it.key()); k != kKeywordType.end()) out.insert(k->second);
  return out;
}

struct DepthGuard {
  explicit DepthGuard(int& d) : d_(d) { ++d_; }
  ~DepthGuard() { --d_; }
  int& d_;
};

bool has_constraints(const Json& s, std::initializer_list<const char*> except) {
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (schema::is_annotation_keyword(it.key())) continue;
    bool skip = false;
    for (const char* e : except) skip = skip || it.key() == e;
    if (!skip) return true;
  }
  return false;
}

}  // namespace

std::string Converter::prim(const std::string& kind) {
  auto it = prims_.find(kind);
  if (it != prims_.end()) return it->second;
  std::string n = fresh(kind);
  prims_[kind] = n;
  size_t slot = reserve(n);
  std::string body;
  const std::string sep = cat({ws(), "\",\"", ws()});
  if (kind == "value") {
    body = prim("object") + " | " + prim("array") + " | " + prim("string") + " | " +
           prim("number") + " | \"true\" | \"false\" | \"null\"";
  } else if (kind == "object") {
    std::string member = cat({prim("string"), ws(), "\":\"", ws(), prim("value")});
    body =
        cat({"\"{\"", ws(), "(" + member, "(" + cat({sep, member}) + ")*", ws() + ")?", "\"}\""});
  } else if (kind == "array") {
    body = cat({"\"[\"", ws(), "(" + prim("value"), "(" + cat({sep, prim("value")}) + ")*",
                ws() + ")?", "\"]\""});
  } else if (kind == "string") {
    body = "\"\\\"\" " + prim("char") + "* \"\\\"\"";
  } else if (kind == "char") {
    body =
        "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-Ce-fE-F] "
        "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" "
        "[dD] [c-fC-F] [0-9a-fA-F]{2}))";
  } else if (kind == "number") {
    body = schema::number_expr();
  } else if (kind == "integer") {
    body = schema::integer_range_expr(std::nullopt, std::nullopt);
  } else if (kind == "boolean") {
    body = "\"true\" | \"false\"";
  } else if (kind == "ws") {
    body = "[ \\n\\t]{0,20}";
  }
  rules_[slot].second = body;
  return n;
}

std::string Converter::render(const std::string& root_expr) const {
  std::string out = opt_.rule_prefix + "root ::= " + root_expr + "\n";
  for (const auto& [n, body] : rules_) out += n + " ::= " + body + "\n";
  return out;
}

Result<std::string> Converter::visit(const Json& s, const std::string& path) {
  DepthGuard guard(depth_);
  if (depth_ > 200) return invalid_argument("schema nested too deeply at " + path);
  if (s.is_boolean()) {
    if (s.get<bool>()) return prim("value");
    return invalid_argument("schema 'false' at " + path + " allows no value");
  }
  if (!s.is_object())
    return invalid_argument("schema at " + path + " must be an object or a boolean");
  for (auto it = s.begin(); it != s.end(); ++it)
    if (schema::is_unsupported_keyword(it.key()))
      return invalid_argument("unsupported JSON Schema keyword '" + it.key() + "' at " + path);
  if (s.contains("allOf") || (s.contains("$ref") && has_constraints(s, {"$ref", "nullable"}))) {
    auto flat = schema::flatten_schema(s, refs_, path);
    if (!flat.ok()) return flat.status();
    return visit(*flat, path);
  }
  bool nullable = s.contains("nullable") && s["nullable"].is_boolean() && s["nullable"].get<bool>();
  if (s.contains("$ref")) {
    if (!s["$ref"].is_string()) return invalid_argument("'$ref' must be a string at " + path);
    auto r = visit_ref(s["$ref"].get<std::string>(), path);
    if (!r.ok() || !nullable) return r;
    return "(" + *r + " | \"null\")";
  }
  if (s.contains("anyOf") && s.contains("oneOf"))
    return invalid_argument("'anyOf' together with 'oneOf' at " + path + " is not supported");
  if (s.contains("anyOf")) return visit_alternatives(s, "anyOf", path);
  // oneOf is treated as anyOf: exclusivity is not enforced, as it is undecidable for
  // overlapping branches in general (the generated value may match several branches).
  if (s.contains("oneOf")) return visit_alternatives(s, "oneOf", path);
  if (s.contains("enum") || s.contains("const")) return visit_enum(s, path);

  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    std::vector<Json> list =
        t.is_array() ? std::vector<Json>(t.begin(), t.end()) : std::vector<Json>{t};
    if (list.empty()) return invalid_argument("'type' at " + path + " is an empty array");
    for (const auto& x : list) {
      if (!x.is_string() || !is_type_name(x.get<std::string>()))
        return invalid_argument("unknown type " + x.dump() + " at " + child_path(path, "type"));
      types.push_back(x.get<std::string>());
    }
  } else {
    auto implied = implied_types(s);
    if (implied.empty()) return prim("value");
    types.assign(implied.begin(), implied.end());
  }
  if (nullable) types.push_back("null");
  bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
  std::vector<std::string> alts;
  for (const char* t : kTypeNames) {
    if (std::find(types.begin(), types.end(), t) == types.end()) continue;
    if (std::string(t) == "integer" && has_number) continue;
    auto e = visit_type(s, t, path);
    if (!e.ok()) return e.status();
    alts.push_back(*e);
  }
  return alts_expr(alts);
}

Result<std::string> Converter::visit_ref(const std::string& ref, const std::string& path) {
  auto ptr = refs_.pointer(ref, path);
  if (!ptr.ok()) return ptr.status();
  if (auto it = ref_rules_.find(*ptr); it != ref_rules_.end()) {
    auto p = refs_in_progress_.find(*ptr);
    if (p != refs_in_progress_.end() && p->second == containers_)
      return invalid_argument("$ref '" + ref + "' at " + path +
                              " refers back to itself without an enclosing object or array");
    return it->second;
  }
  auto target = refs_.resolve(ref, path);
  if (!target.ok()) return target.status();
  std::string base = "ref";
  size_t slash = ptr->rfind('/');
  std::string last = slash == std::string::npos ? std::string() : ptr->substr(slash + 1);
  for (char c : last)
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
      base += c;
    else if (c == '-' || c == '_')
      base += '-';
  if (base != "ref") base.insert(3, "-");
  std::string name = fresh(base);
  ref_rules_[*ptr] = name;
  refs_in_progress_[*ptr] = containers_;
  size_t slot = reserve(name);
  std::string target_path = "$";
  for (char c : *ptr) target_path += c == '/' ? '.' : c;
  auto body = visit(**target, target_path);
  refs_in_progress_.erase(*ptr);
  if (!body.ok()) return body.status();
  rules_[slot].second = *body;
  return name;
}

Result<std::string> Converter::visit_alternatives(const Json& s, const std::string& key,
                                                  const std::string& path) {
  const Json& branches = s[key];
  if (!branches.is_array() || branches.empty())
    return invalid_argument("'" + key + "' must be a non-empty array at " + path);
  Json rest = s;
  rest.erase(key);
  bool distribute = has_constraints(rest, {"nullable"});
  std::vector<std::string> alts;
  for (size_t i = 0; i < branches.size(); ++i) {
    std::string p = child_path(path, key, i);
    Result<std::string> e = std::string();
    if (distribute) {
      auto merged = schema::merge_schemas(rest, branches[i], refs_, p);
      if (!merged.ok()) return merged.status();
      Json m = std::move(merged).value();
      if (m.is_object()) m.erase("nullable");
      e = visit(m, p);
    } else {
      e = visit(branches[i], p);
    }
    if (!e.ok()) return e.status();
    alts.push_back(*e);
  }
  if (s.contains("nullable") && s["nullable"] == Json(true)) alts.push_back("\"null\"");
  if (alts.size() == 1) return alts[0];
  std::string body;
  for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
  return add_rule("alt", body);
}

Result<std::string> Converter::visit_enum(const Json& s, const std::string& path) {
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (k == "enum" || k == "const" || k == "type" || k == "nullable" ||
        schema::is_annotation_keyword(k))
      continue;
    return invalid_argument("'" + k + "' together with 'enum'/'const' at " + path +
                            " is not supported");
  }
  std::vector<Json> values;
  if (s.contains("enum")) {
    if (!s["enum"].is_array() || s["enum"].empty())
      return invalid_argument("'enum' must be a non-empty array at " + path);
    values.assign(s["enum"].begin(), s["enum"].end());
  }
  if (s.contains("const")) {
    if (!s.contains("enum") || std::find(values.begin(), values.end(), s["const"]) != values.end())
      values = {s["const"]};
    else
      values.clear();
  }
  bool nullable = s.contains("nullable") && s["nullable"] == Json(true);
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    if (t.is_array())
      for (const auto& x : t)
        if (x.is_string()) types.push_back(x.get<std::string>());
    if (nullable) types.push_back("null");
  }
  std::vector<std::string> alts;
  for (const auto& v : values) {
    bool ok = types.empty();
    for (const auto& t : types) ok = ok || matches_type(v, t);
    if (!ok) continue;
    std::string text = v.dump();  // compact JSON
    std::string l = ebnf_literal(text);
    if (std::find(alts.begin(), alts.end(), l) == alts.end()) alts.push_back(l);
  }
  if (nullable && std::find(alts.begin(), alts.end(), "\"null\"") == alts.end())
    alts.push_back("\"null\"");
  if (alts.empty())
    return invalid_argument("'enum'/'const' at " + path + " has no value of the allowed type");
  return alts_expr(alts);
}

Result<std::string> Converter::visit_type(const Json& s, const std::string& t,
                                          const std::string& path) {
  if (t == "null") return std::string("\"null\"");
  if (t == "boolean") return prim("boolean");
  if (t == "integer") return integer_expr(s, path);
  if (t == "number") return number_expr(s, path);
  if (t == "string") return string_expr(s, path);
  if (t == "array") return array_expr(s, path);
  return object_expr(s, path);
}

}  // namespace strata::grammar::schema

namespace strata::grammar {

std::string json_object_ebnf(const JsonSchemaOptions& options) {
  static const schema::Json kEmpty = schema::Json::object();
  schema::Converter c(kEmpty, options);
  return c.render(c.prim("object"));
}

Result<std::string> json_schema_to_ebnf(const nlohmann::ordered_json& schema,
                                        const JsonSchemaOptions& options) {
  try {
    schema::Converter c(schema, options);
    return c.run();
  } catch (const std::exception& e) {
    // nlohmann throws on type errors in malformed schemas (e.g. a number where an object is
    // expected in a place this converter did not check).
    return invalid_argument(std::string("invalid JSON Schema: ") + e.what());
  }
}

std::string choice_to_ebnf(const std::vector<std::string>& choices) {
  std::string body;
  for (size_t i = 0; i < choices.size(); ++i) body += (i ? " | " : "") + ebnf_literal(choices[i]);
  if (body.empty()) body = "\"\"";
  return "root ::= " + body + "\n";
}

}  // namespace strata::grammar
