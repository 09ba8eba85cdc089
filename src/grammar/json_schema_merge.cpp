// JSON paths, keyword classes, local $ref resolution and the merging of schemas that allOf (and
// $ref with sibling keywords) asks for.
#include <algorithm>
#include <set>

#include "grammar/json_schema_internal.h"

namespace strata::grammar::schema {
namespace {

bool is_identifier(std::string_view k) {
  if (k.empty()) return false;
  for (char c : k)
    if (!(c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9')))
      return false;
  return !(k[0] >= '0' && k[0] <= '9');
}

constexpr int kMaxDepth = 64;

}  // namespace

std::string child_path(const std::string& path, std::string_view keyword) {
  return path + "." + std::string(keyword);
}

std::string child_path(const std::string& path, std::string_view keyword, std::string_view key) {
  if (is_identifier(key)) return path + "." + std::string(keyword) + "." + std::string(key);
  std::string quoted = "'";
  for (char c : key) {
    if (c == '\'' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return path + "." + std::string(keyword) + "[" + quoted + "']";
}

std::string child_path(const std::string& path, std::string_view keyword, size_t index) {
  return path + "." + std::string(keyword) + "[" + std::to_string(index) + "]";
}

bool is_annotation_keyword(std::string_view k) {
  static const std::set<std::string_view> kAnnotations = {"title",
                                                          "description",
                                                          "examples",
                                                          "example",
                                                          "default",
                                                          "$schema",
                                                          "$id",
                                                          "$comment",
                                                          "deprecated",
                                                          "readOnly",
                                                          "writeOnly",
                                                          "$defs",
                                                          "definitions",
                                                          "contentMediaType",
                                                          "contentEncoding",
                                                          "contentSchema",
                                                          "discriminator",
                                                          "xml",
                                                          "externalDocs",
                                                          "$anchor",
                                                          "$vocabulary",
                                                          "$dynamicAnchor",
                                                          "$recursiveAnchor",
                                                          "strict"};
  return kAnnotations.count(k) > 0 || k.substr(0, 2) == "x-";
}

bool is_unsupported_keyword(std::string_view k) {
  static const std::set<std::string_view> kUnsupported = {"if",
                                                          "then",
                                                          "else",
                                                          "not",
                                                          "dependentSchemas",
                                                          "dependentRequired",
                                                          "dependencies",
                                                          "contains",
                                                          "minContains",
                                                          "maxContains",
                                                          "propertyNames",
                                                          "unevaluatedProperties",
                                                          "unevaluatedItems",
                                                          "patternProperties",
                                                          "$dynamicRef",
                                                          "$recursiveRef"};
  return kUnsupported.count(k) > 0;
}

Result<std::string> RefResolver::pointer(const std::string& ref, const std::string& path) const {
  std::string_view r = ref;
  if (root_.is_object() && root_.contains("$id") && root_["$id"].is_string()) {
    const auto& id = root_["$id"].get_ref<const std::string&>();
    if (!id.empty() && r.substr(0, id.size()) == id) r.remove_prefix(id.size());
  }
  if (r.empty() || r[0] != '#')
    return invalid_argument("unsupported $ref '" + ref + "' at " + path +
                            ": only local references ('#/...') are supported");
  r.remove_prefix(1);
  // Percent-decoding of the URI fragment.
  std::string out;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i] == '%' && i + 2 < r.size()) {
      auto hex = [](char c) {
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
      };
      int h = hex(r[i + 1]), l = hex(r[i + 2]);
      if (h >= 0 && l >= 0) {
        out += static_cast<char>(h * 16 + l);
        i += 2;
        continue;
      }
    }
    out += r[i];
  }
  if (!out.empty() && out[0] != '/')
    return invalid_argument("unsupported $ref '" + ref + "' at " + path +
                            ": anchors are not supported, use a JSON pointer ('#/$defs/name')");
  return out;
}

Result<const Json*> RefResolver::resolve(const std::string& ref, const std::string& path) const {
  auto ptr = pointer(ref, path);
  if (!ptr.ok()) return ptr.status();
  try {
    const Json& target = root_.at(Json::json_pointer(*ptr));
    return &target;
  } catch (const std::exception&) {
    return invalid_argument("$ref '" + ref + "' at " + path + " does not resolve");
  }
}

Result<Json> flatten_schema(const Json& s, const RefResolver& refs, const std::string& path,
                            int depth) {
  if (depth > kMaxDepth)
    return invalid_argument("$ref/allOf nesting too deep (or recursive without progress) at " +
                            path);
  if (!s.is_object()) return s;
  Json out = s;
  if (out.contains("$ref")) {
    if (!out["$ref"].is_string()) return invalid_argument("'$ref' must be a string at " + path);
    std::string ref = out["$ref"].get<std::string>();
    auto target = refs.resolve(ref, path);
    if (!target.ok()) return target.status();
    out.erase("$ref");
    auto flat = flatten_schema(**target, refs, path, depth + 1);
    if (!flat.ok()) return flat.status();
    auto merged = merge_schemas(out, *flat, refs, path, depth + 1);
    if (!merged.ok()) return merged.status();
    out = std::move(merged).value();
  }
  if (out.is_object() && out.contains("allOf")) {
    const Json all = out["allOf"];
    if (!all.is_array() || all.empty())
      return invalid_argument("'allOf' must be a non-empty array at " + path);
    out.erase("allOf");
    for (size_t i = 0; i < all.size(); ++i) {
      std::string p = child_path(path, "allOf", i);
      auto flat = flatten_schema(all[i], refs, p, depth + 1);
      if (!flat.ok()) return flat.status();
      auto merged = merge_schemas(out, *flat, refs, p, depth + 1);
      if (!merged.ok()) return merged.status();
      out = std::move(merged).value();
    }
  }
  if (out.is_object() && (out.contains("$ref") || out.contains("allOf")))
    return flatten_schema(out, refs, path, depth + 1);
  return out;
}

namespace {

std::vector<std::string> type_list(const Json& t) {
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  if (t.is_array())
    for (const auto& x : t)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

Result<Json> merge_types(const Json& a, const Json& b, const std::string& path) {
  auto ta = type_list(a), tb = type_list(b);
  std::vector<std::string> out;
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  for (const auto& t : ta) {
    if (has(tb, t))
      out.push_back(t);
    else if (t == "integer" && has(tb, "number"))
      out.push_back("integer");
    else if (t == "number" && has(tb, "integer"))
      out.push_back("integer");
  }
  if (out.empty()) return invalid_argument("allOf at " + path + ": no type satisfies all branches");
  if (out.size() == 1) return Json(out[0]);
  return Json(out);
}

bool is_bound_keyword(std::string_view k, bool& take_max) {
  static const std::set<std::string_view> kMins = {"minimum", "minLength", "minItems",
                                                   "minProperties"};
  static const std::set<std::string_view> kMaxs = {"maximum", "maxLength", "maxItems",
                                                   "maxProperties"};
  if (kMins.count(k)) return take_max = true, true;
  if (kMaxs.count(k)) return take_max = false, true;
  return false;
}

}  // namespace

Result<Json> merge_schemas(const Json& a_in, const Json& b_in, const RefResolver& refs,
                           const std::string& path, int depth) {
  if (depth > kMaxDepth)
    return invalid_argument("$ref/allOf nesting too deep (or recursive without progress) at " +
                            path);
  if (a_in == b_in) return a_in;
  if (a_in.is_boolean()) return a_in.get<bool>() ? b_in : a_in;
  if (b_in.is_boolean()) return b_in.get<bool>() ? a_in : b_in;
  auto fa = flatten_schema(a_in, refs, path, depth + 1);
  if (!fa.ok()) return fa.status();
  auto fb = flatten_schema(b_in, refs, path, depth + 1);
  if (!fb.ok()) return fb.status();
  Json a = std::move(fa).value();
  const Json& b = *fb;
  if (!a.is_object() || !b.is_object())
    return invalid_argument("schema must be an object or a boolean at " + path);
  // Per-property schemas, as each side sees a key (its properties, else additionalProperties).
  auto side = [](const Json& s, const std::string& key) -> Json {
    if (s.contains("properties") && s["properties"].is_object() && s["properties"].contains(key))
      return s["properties"][key];
    if (s.contains("additionalProperties")) return s["additionalProperties"];
    return true;
  };
  bool object_merge = a.contains("properties") || b.contains("properties") ||
                      a.contains("additionalProperties") || b.contains("additionalProperties");
  if (object_merge) {
    Json props = Json::object();
    std::vector<std::string> keys;
    for (const Json* s : {static_cast<const Json*>(&a), &b})
      if (s->contains("properties") && (*s)["properties"].is_object())
        for (auto it = (*s)["properties"].begin(); it != (*s)["properties"].end(); ++it)
          if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
    Json addl = true;
    auto addl_merged = merge_schemas(a.value("additionalProperties", Json(true)),
                                     b.value("additionalProperties", Json(true)), refs,
                                     child_path(path, "additionalProperties"), depth + 1);
    if (!addl_merged.ok()) return addl_merged.status();
    addl = *addl_merged;
    for (const auto& k : keys) {
      auto m =
          merge_schemas(side(a, k), side(b, k), refs, child_path(path, "properties", k), depth + 1);
      if (!m.ok()) return m.status();
      if (m->is_boolean() && !m->get<bool>() && !(addl.is_boolean() && !addl.get<bool>()))
        return invalid_argument("allOf at " + path + ": property '" + k +
                                "' is forbidden by one branch and allowed by another");
      if (!(m->is_boolean() && !m->get<bool>())) props[k] = *m;
    }
    a["properties"] = props;
    if (a.contains("additionalProperties") || b.contains("additionalProperties"))
      a["additionalProperties"] = addl;
  }
  for (auto it = b.begin(); it != b.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (k == "properties" || k == "additionalProperties") continue;
    if (!a.contains(k)) {
      a[k] = v;
      continue;
    }
    Json& av = a[k];
    if (av == v || is_annotation_keyword(k)) continue;
    bool take_max = false;
    if (k == "type") {
      auto t = merge_types(av, v, path);
      if (!t.ok()) return t.status();
      av = *t;
    } else if (k == "required" && av.is_array() && v.is_array()) {
      for (const auto& r : v)
        if (std::find(av.begin(), av.end(), r) == av.end()) av.push_back(r);
    } else if (is_bound_keyword(k, take_max) && av.is_number() && v.is_number()) {
      bool b_wins =
          take_max ? v.get<double>() > av.get<double>() : v.get<double>() < av.get<double>();
      if (b_wins) av = v;
    } else if ((k == "exclusiveMinimum" || k == "exclusiveMaximum") && av.is_number() &&
               v.is_number()) {
      bool b_wins = k == "exclusiveMinimum" ? v.get<double>() > av.get<double>()
                                            : v.get<double>() < av.get<double>();
      if (b_wins) av = v;
    } else if (k == "items") {
      auto m = merge_schemas(av, v, refs, child_path(path, "items"), depth + 1);
      if (!m.ok()) return m.status();
      av = *m;
    } else if (k == "enum" && av.is_array() && v.is_array()) {
      Json both = Json::array();
      for (const auto& x : av)
        if (std::find(v.begin(), v.end(), x) != v.end()) both.push_back(x);
      if (both.empty()) return invalid_argument("allOf at " + path + ": the enums share no value");
      av = both;
    } else if (k == "nullable") {
      av = av.is_boolean() && v.is_boolean() && av.get<bool>() && v.get<bool>();
    } else if (k == "const") {
      return invalid_argument("allOf at " + path + ": conflicting 'const' values");
    } else {
      return invalid_argument("allOf at " + path + ": cannot merge keyword '" + k +
                              "' appearing in several branches with different values");
    }
  }
  return a;
}

}  // namespace strata::grammar::schema
