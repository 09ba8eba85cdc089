// The XML and DSML tool-call formats: qwen3_xml/qwen3_coder and deepseek_v32/deepseek_v4. They
// build the arguments JSON themselves, with parameter values coerced to the types of the tool's
// JSON schema.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "server/tool_formats.h"

namespace strata::server::tool_formats {
namespace {

// ---------------------------------------------------------------------------------------------
// Parameter typing from a tool's JSON schema (XML and DSML formats).

// The JSON schema of parameter `param` of function `fn` in `tools` (null when not declared).
const OrderedJson* param_schema(const OrderedJson* tools, const std::string& fn,
                                const std::string& param) {
  if (tools == nullptr || !tools->is_array()) return nullptr;
  for (const auto& t : *tools) {
    if (!t.is_object()) continue;
    auto f = t.find("function");
    if (f == t.end() || !f->is_object()) continue;
    auto n = f->find("name");
    if (n == f->end() || !n->is_string() || n->get<std::string>() != fn) continue;
    auto p = f->find("parameters");
    if (p == f->end() || !p->is_object()) return nullptr;
    auto props = p->find("properties");
    if (props == p->end() || !props->is_object()) return nullptr;
    auto s = props->find(param);
    return s == props->end() ? nullptr : &*s;
  }
  return nullptr;
}

// A schema's type ("" when it names none): for a list of types or anyOf/oneOf, the first that is
// not "null".
std::string schema_type(const OrderedJson& sc) {
  if (!sc.is_object()) return "";
  auto ty = sc.find("type");
  if (ty != sc.end()) {
    if (ty->is_string()) return ty->get<std::string>();
    if (ty->is_array())
      for (const auto& x : *ty)
        if (x.is_string() && x.get<std::string>() != "null") return x.get<std::string>();
  }
  for (const char* k : {"anyOf", "oneOf"}) {
    auto a = sc.find(k);
    if (a != sc.end() && a->is_array())
      for (const auto& alt : *a) {
        std::string t = schema_type(alt);
        if (!t.empty() && t != "null") return t;
      }
  }
  if (sc.contains("enum") || sc.contains("const")) return "string";
  if (sc.contains("properties")) return "object";
  if (sc.contains("items")) return "array";
  return "";
}

// The schema admits null (type "null", a type list or anyOf/oneOf with it, nullable: true).
bool schema_nullable(const OrderedJson& sc) {
  if (!sc.is_object()) return false;
  auto ty = sc.find("type");
  if (ty != sc.end()) {
    if (*ty == "null") return true;
    if (ty->is_array())
      for (const auto& x : *ty)
        if (x == "null") return true;
  }
  if (auto n = sc.find("nullable"); n != sc.end() && *n == true) return true;
  for (const char* k : {"anyOf", "oneOf"}) {
    auto a = sc.find(k);
    if (a != sc.end() && a->is_array())
      for (const auto& alt : *a)
        if (schema_nullable(alt)) return true;
  }
  return false;
}

// The schema type of a parameter ("" when unknown); *known: the schema declares it.
std::string param_type(const OrderedJson* tools, const std::string& fn, const std::string& param,
                       bool* known) {
  const OrderedJson* s = param_schema(tools, fn, param);
  *known = s != nullptr;
  return s ? schema_type(*s) : "";
}

bool is_string_type(const std::string& t) {
  return t.empty() || t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" ||
         t == "enum";
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::optional<OrderedJson> try_parse(std::string_view text) {
  try {
    return OrderedJson::parse(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// A raw parameter text converted to the schema type `type` (Qwen3-Coder's rules): integers and
// numbers parsed, booleans from true/false, objects and arrays as JSON; anything that does not
// convert stays a string.
OrderedJson convert_param(const std::string& value, const std::string& type) {
  if (is_string_type(type)) return value;
  if (iequals(value, "null") || iequals(value, "none")) return nullptr;
  std::string t = type;
  if (t == "integer" || t == "int" || t.rfind("int", 0) == 0 || t.rfind("uint", 0) == 0 ||
      t == "long" || t == "short") {
    auto j = try_parse(value);
    if (j && j->is_number_integer()) return *j;
    return value;
  }
  if (t == "number" || t == "float" || t == "double" || t.rfind("num", 0) == 0) {
    auto j = try_parse(value);
    if (j && j->is_number_float()) {
      const double d = j->get<double>();
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9e15)
        return static_cast<int64_t>(d);  // 5.0 -> 5, as the Qwen3-Coder parser reads it
    }
    if (j && j->is_number()) return *j;
    return value;
  }
  if (t == "boolean" || t == "bool" || t == "binary") return iequals(value, "true");
  auto j = try_parse(value);
  if (j) return *j;
  return value;
}

// Every type a schema admits (type names and lists, enum values, anyOf/oneOf/allOf), with the
// usual aliases folded in ("int" -> "integer", ...).
void collect_types(const OrderedJson& sc, std::vector<std::string>* out) {
  if (!sc.is_object()) return;
  auto add = [&](std::string t) {
    for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum") t = "string";
    if (t.rfind("int", 0) == 0 || t.rfind("uint", 0) == 0 || t == "long" || t == "short" ||
        t == "unsigned")
      t = "integer";
    if (t == "float" || t == "float32" || t == "float64" || t == "double") t = "number";
    if (t == "bool") t = "boolean";
    if (t == "dict") t = "object";
    if (t == "arr" || t == "list" || t == "sequence") t = "array";
    out->push_back(std::move(t));
  };
  if (auto ty = sc.find("type"); ty != sc.end()) {
    if (ty->is_string()) add(ty->get<std::string>());
    if (ty->is_array())
      for (const auto& x : *ty)
        if (x.is_string()) add(x.get<std::string>());
  }
  if (auto e = sc.find("enum"); e != sc.end() && e->is_array()) {
    for (const auto& v : *e) {
      if (v.is_null())
        add("null");
      else if (v.is_boolean())
        add("boolean");
      else if (v.is_number_integer())
        add("integer");
      else if (v.is_number())
        add("number");
      else if (v.is_string())
        add("string");
      else if (v.is_array())
        add("array");
      else if (v.is_object())
        add("object");
    }
  }
  for (const char* k : {"anyOf", "oneOf", "allOf"})
    if (auto a = sc.find(k); a != sc.end() && a->is_array())
      for (const auto& alt : *a) collect_types(alt, out);
}

bool finite_json(const OrderedJson& v) {
  if (v.is_number_float()) return std::isfinite(v.get<double>());
  if (v.is_array() || v.is_object())
    for (const auto& x : v)
      if (!finite_json(x)) return false;
  return true;
}

// A DSML value written as JSON (string="false"), read as the schema's types allow, tried in the
// order null, integer, number, boolean, object, array, string (vLLM's coercion); an undeclared
// parameter is a string. What fits none is the JSON value, or else the raw text.
OrderedJson coerce_json_param(const std::string& raw, const OrderedJson* schema) {
  std::vector<std::string> types;
  if (schema) collect_types(*schema, &types);
  if (types.empty()) types.push_back("string");
  auto has = [&](const char* t) { return std::find(types.begin(), types.end(), t) != types.end(); };
  std::string_view v(raw);
  while (!v.empty() && is_ws(v.front())) v.remove_prefix(1);
  while (!v.empty() && is_ws(v.back())) v.remove_suffix(1);
  if (has("null") && iequals(raw, "null")) return nullptr;
  if (has("integer")) {
    std::string_view d = v;
    if (!d.empty() && (d[0] == '-' || d[0] == '+')) d.remove_prefix(1);
    if (!d.empty() &&
        std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      auto j = try_parse(v[0] == '+' ? v.substr(1) : v);
      if (j && j->is_number()) return *j;
    }
  }
  if (has("number")) {
    auto j = try_parse(v);
    if (j && j->is_number()) {
      const double d = j->get<double>();
      if (std::isfinite(d)) {
        if (d == std::trunc(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
        return d;
      }
    }
  }
  if (has("boolean")) {
    if (iequals(v, "true") || v == "1") return true;
    if (iequals(v, "false") || v == "0") return false;
  }
  if (has("object") || has("array")) {
    auto j = try_parse(raw);
    if (j && finite_json(*j)) return *j;
  }
  if (has("string")) return raw;
  auto j = try_parse(raw);
  if (j && finite_json(*j)) return *j;
  return raw;
}

// One parameter of an XML/DSML call as read so far.
struct RawParam {
  std::string name;
  std::string value;      // raw text (stable part when !complete)
  bool complete = false;  // the closing tag was seen (or the text ended)
  bool as_string = true;  // DSML string="true"; XML: schema type is a string (or unknown)
  std::string type;       // schema type
  const OrderedJson* schema = nullptr;  // the parameter's schema (null: undeclared)
  bool json_form = false;               // DSML string="false": value is JSON
  bool null_word = false;               // XML: a string value "null" means null
};

// Builds the arguments JSON of a call from its parameters: strings stream as they arrive,
// typed values appear once complete. `closed`: the call is finished (adds the closing brace).
std::string build_args(const std::vector<RawParam>& params, bool closed) {
  std::string out = "{";
  bool first = true;
  for (const auto& p : params) {
    std::string piece = first ? "" : ", ";
    piece += json_quoted(p.name) + ": ";
    if (p.as_string) {
      if (!p.complete) {
        // A value that may still turn out to be "null" is held back.
        if (p.null_word && p.value.size() <= 4 &&
            (iequals(p.value, std::string_view("none").substr(0, p.value.size())) ||
             iequals(p.value, std::string_view("null").substr(0, p.value.size()))))
          return out;
        out += piece + "\"" + json_escape(p.value);
        return out;
      }
      if (p.null_word && (iequals(p.value, "null") || iequals(p.value, "none")))
        out += piece + "null";
      else
        out += piece + json_quoted(p.value);
    } else {
      if (!p.complete) return out;
      OrderedJson v =
          p.json_form ? coerce_json_param(p.value, p.schema) : convert_param(p.value, p.type);
      out += piece + python_json_dumps(v);
    }
    first = false;
  }
  if (closed) out += "}";
  return out;
}

// Qwen3-Coder XML: <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...
// </function>\n</tool_call>. One newline around a value is layout, not value.
class Qwen3XmlFormat : public ToolFormat {
 public:
  explicit Qwen3XmlFormat(const OrderedJson* tools) {
    if (tools) tools_ = *tools;
  }
  std::string make_id() const override { return "call_" + random_hex(24); }
  ToolSnapshot parse(std::string_view s, bool final) const override {
    static constexpr std::string_view kToolCall = "<tool_call>",
                                      kFn = "<function=", kFnEnd = "</function>",
                                      kParam = "<parameter=", kParamEnd = "</parameter>",
                                      kToolCallEnd = "</tool_call>";
    ToolSnapshot snap;
    size_t start = std::min(s.find(kToolCall), s.find(kFn));
    if (start == std::string_view::npos) {
      snap.content_len = final ? s.size() : s.size() - partial_any(s, {kToolCall, kFn});
      return snap;
    }
    snap.content_len = start;
    size_t pos = s.find(kFn, start);
    if (pos == std::string_view::npos) snap.calls.emplace_back();
    while (pos != std::string_view::npos) {
      snap.calls.emplace_back();
      ToolSnapshot::Call& c = snap.calls.back();
      size_t n = pos + kFn.size();
      size_t gt = s.find('>', n);
      if (gt == std::string_view::npos) break;
      c.name = std::string(s.substr(n, gt - n));
      c.name_done = true;
      std::vector<RawParam> params;
      size_t i = gt + 1;
      bool closed = false;
      for (;;) {
        i = skip_ws(s, i);
        if (starts_at(s, i, kFnEnd)) {
          closed = true;
          i += kFnEnd.size();
          break;
        }
        if (!starts_at(s, i, kParam)) {
          // Text ends inside a tag, or a stray byte: skip it (or stop).
          if (i >= s.size() || ends_inside(s, i, kParam) || ends_inside(s, i, kFnEnd)) break;
          size_t next = std::min(s.find(kParam, i), s.find(kFnEnd, i));
          if (next == std::string_view::npos) break;
          i = next;
          continue;
        }
        size_t pn = i + kParam.size();
        size_t pgt = s.find('>', pn);
        if (pgt == std::string_view::npos) break;
        RawParam p;
        p.name = std::string(s.substr(pn, pgt - pn));
        bool known = false;
        p.type = param_type(&tools_, c.name, p.name, &known);
        p.as_string = is_string_type(p.type);
        // A string keeps "null" as text unless its schema admits null.
        if (const OrderedJson* sc = param_schema(&tools_, c.name, p.name))
          p.null_word = p.as_string && schema_nullable(*sc);
        size_t v = pgt + 1;
        size_t stop = std::min(
            {s.find(kParamEnd, v), s.find(kParam, v), s.find(kFnEnd, v), s.find(kToolCallEnd, v)});
        std::string_view value;
        if (stop == std::string_view::npos) {
          value = s.substr(v);
          if (!final) {
            value.remove_suffix(partial_any(value, {kParamEnd, kParam, kFnEnd, kToolCallEnd}));
            if (!value.empty() && value.back() == '\n') value.remove_suffix(1);  // may be layout
          }
          p.complete = final;
        } else {
          value = s.substr(v, stop - v);
          p.complete = true;
        }
        if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
        if (p.complete && !value.empty() && value.back() == '\n') value.remove_suffix(1);
        p.value = std::string(value);
        params.push_back(std::move(p));
        if (stop == std::string_view::npos) break;
        i = starts_at(s, stop, kParamEnd) ? stop + kParamEnd.size() : stop;
      }
      if (!closed && final) closed = true;
      c.arguments = build_args(params, closed);
      if (!closed) break;
      pos = s.find(kFn, i);
    }
    return snap;
  }

 private:
  OrderedJson tools_;
};

// DeepSeek V3.2 / V4 DSML:
//   <｜DSML｜WRAP>\n<｜DSML｜invoke name="NAME">\n<｜DSML｜parameter name="P" string="true">V
//   </｜DSML｜parameter>\n...</｜DSML｜invoke>\n</｜DSML｜WRAP>   (WRAP: function_calls |
//   tool_calls)
class DsmlFormat : public ToolFormat {
 public:
  DsmlFormat(const OrderedJson* tools, std::string wrapper) : wrapper_(std::move(wrapper)) {
    if (tools) tools_ = *tools;
  }
  std::string make_id() const override { return "call_" + random_hex(24); }
  ToolSnapshot parse(std::string_view s, bool final) const override {
    static constexpr std::string_view kInvoke = "<｜DSML｜invoke name=\"",
                                      kInvokeEnd = "</｜DSML｜invoke>",
                                      kParam = "<｜DSML｜parameter name=\"",
                                      kParamEnd = "</｜DSML｜parameter>";
    const std::string open = "<｜DSML｜" + wrapper_ + ">";
    ToolSnapshot snap;
    size_t start = s.find(open);
    if (start == std::string_view::npos) {
      snap.content_len = final ? s.size() : s.size() - partial_marker(s, open);
      return snap;
    }
    snap.content_len = start;
    size_t pos = s.find(kInvoke, start);
    if (pos == std::string_view::npos) snap.calls.emplace_back();
    while (pos != std::string_view::npos) {
      snap.calls.emplace_back();
      ToolSnapshot::Call& c = snap.calls.back();
      size_t n = pos + kInvoke.size();
      size_t q = s.find("\">", n);
      if (q == std::string_view::npos) break;
      c.name = std::string(s.substr(n, q - n));
      c.name_done = true;
      std::vector<RawParam> params;
      size_t i = q + 2;
      bool closed = false;
      for (;;) {
        i = skip_ws(s, i);
        if (starts_at(s, i, kInvokeEnd)) {
          closed = true;
          i += kInvokeEnd.size();
          break;
        }
        if (!starts_at(s, i, kParam)) {
          if (i >= s.size() || ends_inside(s, i, kParam) || ends_inside(s, i, kInvokeEnd)) break;
          size_t next = std::min(s.find(kParam, i), s.find(kInvokeEnd, i));
          if (next == std::string_view::npos) break;
          i = next;
          continue;
        }
        size_t pn = i + kParam.size();
        size_t pq = s.find('"', pn);
        size_t gt = pq == std::string_view::npos ? pq : s.find('>', pq);
        if (gt == std::string_view::npos) break;
        RawParam p;
        p.name = std::string(s.substr(pn, pq - pn));
        std::string_view attrs = s.substr(pq + 1, gt - pq - 1);
        bool known = false;
        p.type = param_type(&tools_, c.name, p.name, &known);
        p.schema = param_schema(&tools_, c.name, p.name);
        if (attrs.find("string=\"false\"") != std::string_view::npos) {
          p.as_string = false;
          p.json_form = true;
        } else if (attrs.find("string=\"true\"") != std::string_view::npos) {
          p.as_string = true;
        } else {
          p.as_string = is_string_type(p.type);
          p.json_form = !p.as_string;
        }
        size_t v = gt + 1;
        size_t stop = s.find(kParamEnd, v);
        std::string_view value;
        if (stop == std::string_view::npos) {
          value = s.substr(v);
          if (!final) value.remove_suffix(partial_marker(value, kParamEnd));
          p.complete = final;
        } else {
          value = s.substr(v, stop - v);
          p.complete = true;
        }
        p.value = std::string(value);
        params.push_back(std::move(p));
        if (stop == std::string_view::npos) break;
        i = stop + kParamEnd.size();
      }
      if (!closed && final) closed = true;
      c.arguments = args_of(c.name, params, closed);
      if (!closed) break;
      pos = s.find(kInvoke, i);
    }
    return snap;
  }

 private:
  // A lone "arguments"/"input" object parameter that the schema does not declare wraps the real
  // arguments: unwrap it (held until the call closes, since only then is it known to be alone).
  std::string args_of(const std::string& fn, const std::vector<RawParam>& params,
                      bool closed) const {
    if (!params.empty() && (params[0].name == "arguments" || params[0].name == "input") &&
        params[0].schema == nullptr) {
      const OrderedJson* props = properties_of(fn);
      if (props != nullptr && !props->empty()) {
        if (!closed) return "";
        if (params.size() == 1) {
          auto j = try_parse(params[0].value);
          if (j && j->is_string()) j = try_parse(j->get<std::string>());
          bool fits = j && j->is_object();
          if (fits)
            for (auto it = j->begin(); it != j->end(); ++it)
              fits = fits && props->contains(it.key());
          if (fits) return python_json_dumps(*j);
        }
      }
    }
    return build_args(params, closed);
  }

  // The declared properties of function `fn` (null when none).
  const OrderedJson* properties_of(const std::string& fn) const {
    if (!tools_.is_array()) return nullptr;
    for (const auto& t : tools_) {
      if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
      const OrderedJson& f = t["function"];
      if (!f.contains("name") || f["name"] != fn) continue;
      if (!f.contains("parameters") || !f["parameters"].is_object()) return nullptr;
      auto p = f["parameters"].find("properties");
      return (p != f["parameters"].end() && p->is_object()) ? &*p : nullptr;
    }
    return nullptr;
  }

  OrderedJson tools_;
  std::string wrapper_;
};

}  // namespace

std::unique_ptr<ToolFormat> make_qwen3_xml_format(const OrderedJson* tools) {
  return std::make_unique<Qwen3XmlFormat>(tools);
}

std::unique_ptr<ToolFormat> make_dsml_format(const OrderedJson* tools, std::string wrapper) {
  return std::make_unique<DsmlFormat>(tools, std::move(wrapper));
}

}  // namespace strata::server::tool_formats
