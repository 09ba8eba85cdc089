#include "server/tool_parsers.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>

#include "core/json.h"
#include "core/logging.h"

namespace strata::server {

void OutputDelta::append(OutputDelta other) {
  content += other.content;
  reasoning += other.reasoning;
  for (auto& t : other.tool_calls) tool_calls.push_back(std::move(t));
}

namespace {

// ---------------------------------------------------------------------------------------------
// Small text helpers.

std::string random_hex(int digits) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < digits; ++i) s += kHex[rng() & 15];
  return s;
}

std::string random_alnum(int n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s;
  for (int i = 0; i < n; ++i) s += kChars[rng() % 62];
  return s;
}

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

// Length of the longest proper prefix of `marker` that ends `s` (0 when none): the bytes to hold
// back because they may be the start of the marker.
size_t partial_marker(std::string_view s, std::string_view marker) {
  const size_t max = std::min(s.size(), marker.size() - 1);
  for (size_t k = max; k > 0; --k)
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  return 0;
}

size_t partial_any(std::string_view s, std::initializer_list<std::string_view> markers) {
  size_t k = 0;
  for (auto m : markers) k = std::max(k, partial_marker(s, m));
  return k;
}

// True when s[i..] is a proper prefix of `marker` (the text ends inside the marker).
bool ends_inside(std::string_view s, size_t i, std::string_view marker) {
  std::string_view rest = s.substr(i);
  return rest.size() < marker.size() && marker.substr(0, rest.size()) == rest;
}

bool starts_at(std::string_view s, size_t i, std::string_view m) {
  return s.size() - std::min(i, s.size()) >= m.size() && s.substr(i, m.size()) == m;
}

// `s` escaped as the inside of a JSON string (no quotes); bytes >= 0x80 pass through, so any
// prefix of the input escapes to a prefix of the output.
std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string json_quoted(std::string_view s) {
  return "\"" + json_escape(s) + "\"";
}

void dumps_into(const OrderedJson& v, std::string* out) {
  if (v.is_object()) {
    *out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) *out += ", ";
      first = false;
      *out += json_quoted(it.key());
      *out += ": ";
      dumps_into(it.value(), out);
    }
    *out += '}';
  } else if (v.is_array()) {
    *out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) *out += ", ";
      dumps_into(v[i], out);
    }
    *out += ']';
  } else if (v.is_string()) {
    *out += json_quoted(v.get_ref<const std::string&>());
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) {
      *out += d != d ? "NaN" : (d > 0 ? "Infinity" : "-Infinity");
    } else {
      std::string s = v.dump();
      // Python writes integral floats with ".0" (nlohmann does too, but be sure).
      if (s.find_first_of(".eE") == std::string::npos) s += ".0";
      *out += s;
    }
  } else {
    *out += v.dump();
  }
}

// ---------------------------------------------------------------------------------------------
// Incremental JSON scanning over raw text (no decoding unless asked).

enum class Scan { kComplete, kIncomplete, kInvalid };

// Scans a JSON string whose opening quote is at s[i]; on kComplete, *i is past the closing quote
// and *decoded (when not null) holds its value.
Scan scan_string(std::string_view s, size_t* i, std::string* decoded) {
  const size_t start = *i;
  size_t j = start + 1;
  while (j < s.size()) {
    if (s[j] == '\\') {
      j += 2;
      continue;
    }
    if (s[j] == '"') {
      *i = j + 1;
      if (decoded) {
        try {
          *decoded = OrderedJson::parse(s.substr(start, j + 1 - start)).get<std::string>();
        } catch (const std::exception&) {
          return Scan::kInvalid;
        }
      }
      return Scan::kComplete;
    }
    ++j;
  }
  return Scan::kIncomplete;
}

bool scalar_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
         c == '+' || c == '.';
}

// Skips the JSON value at s[*i] (no leading whitespace). Containers are matched by bracket depth
// (strings respected) without checking their inside; a scalar ends at the first byte that
// cannot continue it, or at the end of the text when `final`.
Scan skip_value(std::string_view s, size_t* i, bool final) {
  if (*i >= s.size()) return Scan::kIncomplete;
  const char c = s[*i];
  if (c == '"') return scan_string(s, i, nullptr);
  if (c == '{' || c == '[') {
    int depth = 0;
    size_t j = *i;
    while (j < s.size()) {
      const char d = s[j];
      if (d == '"') {
        Scan r = scan_string(s, &j, nullptr);
        if (r != Scan::kComplete) return r;
        continue;
      }
      if (d == '{' || d == '[') ++depth;
      if (d == '}' || d == ']') {
        if (--depth == 0) {
          *i = j + 1;
          return Scan::kComplete;
        }
      }
      ++j;
    }
    return Scan::kIncomplete;
  }
  if (!scalar_char(c)) return Scan::kInvalid;
  size_t j = *i;
  while (j < s.size() && scalar_char(s[j])) ++j;
  if (j == s.size() && !final) return Scan::kIncomplete;
  *i = j;
  return Scan::kComplete;
}

// A call written as a JSON object {"name": ..., "arguments"|"parameters": {...}, ...}.
struct ObjectCall {
  Scan state = Scan::kIncomplete;
  size_t end = 0;  // past the closing brace (kComplete)
  bool name_done = false;
  std::string name;
  bool has_args = false;
  bool args_done = false;
  size_t args_begin = 0, args_end = 0;  // the stable part of the arguments' text
};

// Scans the object at s[i] == '{'. `arg_keys` are the keys holding the arguments.
ObjectCall scan_call_object(std::string_view s, size_t i, bool final,
                            std::initializer_list<std::string_view> arg_keys) {
  ObjectCall r;
  size_t j = i + 1;
  for (;;) {
    j = skip_ws(s, j);
    if (j >= s.size()) return r;
    if (s[j] == '}') {
      r.state = Scan::kComplete;
      r.end = j + 1;
      return r;
    }
    if (s[j] == ',') {
      ++j;
      continue;
    }
    if (s[j] != '"') {
      r.state = Scan::kInvalid;
      return r;
    }
    std::string key;
    Scan k = scan_string(s, &j, &key);
    if (k != Scan::kComplete) {
      r.state = k;
      return r;
    }
    j = skip_ws(s, j);
    if (j >= s.size()) return r;
    if (s[j] != ':') {
      r.state = Scan::kInvalid;
      return r;
    }
    j = skip_ws(s, j + 1);
    if (j >= s.size()) return r;
    const bool is_args =
        std::find(arg_keys.begin(), arg_keys.end(), std::string_view(key)) != arg_keys.end();
    if (key == "name" && s[j] == '"') {
      std::string name;
      Scan n = scan_string(s, &j, &name);
      if (n != Scan::kComplete) {
        r.state = n;
        return r;
      }
      r.name = std::move(name);
      r.name_done = true;
      continue;
    }
    const size_t v = j;
    Scan sv = skip_value(s, &j, final);
    if (is_args && !r.has_args) {
      r.has_args = true;
      r.args_begin = v;
      if (sv == Scan::kComplete) {
        r.args_done = true;
        r.args_end = j;
      } else if (sv == Scan::kIncomplete) {
        // Containers and strings only grow at the end; a bare scalar may still change.
        const char c = s[v];
        r.args_end = (c == '{' || c == '[' || c == '"') ? s.size() : v;
        if (final) r.args_end = s.size();
      } else {
        r.args_end = v;
      }
    }
    if (sv != Scan::kComplete) {
      r.state = sv;
      return r;
    }
  }
}

// Fills a snapshot call from a scanned object.
ToolSnapshot::Call call_from_object(std::string_view s, const ObjectCall& o) {
  ToolSnapshot::Call c;
  c.name = o.name;
  c.name_done = o.name_done;
  if (o.has_args) {
    std::string_view a = s.substr(o.args_begin, o.args_end - o.args_begin);
    // Trailing whitespace of a complete value is not part of it (an incomplete one keeps it).
    c.arguments = std::string(a);
  } else if (o.state == Scan::kComplete) {
    c.arguments = "{}";
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// Formats.

// <tool_call>{"name": ..., "arguments": {...}}</tool_call>, repeatable (Hermes, Qwen2.5, QwQ).
class HermesFormat : public ToolFormat {
 public:
  ToolSnapshot parse(std::string_view s, bool final) const override {
    static constexpr std::string_view kOpen = "<tool_call>";
    ToolSnapshot snap;
    size_t start = s.find(kOpen);
    if (start == std::string_view::npos) {
      snap.content_len = final ? s.size() : s.size() - partial_marker(s, kOpen);
      return snap;
    }
    snap.content_len = start;
    size_t pos = start;
    while (pos != std::string_view::npos) {
      size_t j = skip_ws(s, pos + kOpen.size());
      size_t o_end = j;
      snap.calls.emplace_back();
      if (j >= s.size()) break;
      if (s[j] != '{') {
        snap.calls.pop_back();  // not a call: skip to the next marker
      } else {
        ObjectCall o = scan_call_object(s, j, final, {"arguments", "parameters"});
        snap.calls.back() = call_from_object(s, o);
        o_end = o.end;
        if (o.state != Scan::kComplete) {
          if (!o.name_done && o.state == Scan::kInvalid) snap.calls.pop_back();
          break;
        }
      }
      pos = s.find(kOpen, o_end);
    }
    return snap;
  }
};

// Llama 3.x / 4 JSON tool calls: optional <|python_tag|>, then {"name": ..., "parameters": {...}}
// objects separated by ";". Output that does not start that way is content.
class LlamaJsonFormat : public ToolFormat {
 public:
  bool marker_started() const override { return false; }
  ToolSnapshot parse(std::string_view s, bool final) const override {
    static constexpr std::string_view kTag = "<|python_tag|>";
    ToolSnapshot snap;
    size_t i = skip_ws(s, 0);
    if (i == s.size() || (!final && ends_inside(s, i, kTag))) {  // undecided
      if (final) snap.content_len = s.size();
      return snap;
    }
    if (starts_at(s, i, kTag)) {
      i = skip_ws(s, i + kTag.size());
    } else if (s[i] != '{') {
      snap.content_len = s.size();
      return snap;
    }
    for (;;) {
      while (i < s.size() && (is_ws(s[i]) || s[i] == ';')) ++i;
      if (i >= s.size() || s[i] != '{') break;
      ObjectCall o = scan_call_object(s, i, final, {"parameters", "arguments"});
      if (o.state == Scan::kInvalid && !o.name_done) break;
      snap.calls.push_back(call_from_object(s, o));
      if (o.state != Scan::kComplete) break;
      i = o.end;
    }
    return snap;
  }
};

// Mistral: [TOOL_CALLS] then either a JSON array of {"name", "arguments"} objects (v0.3
// tokenizers) or, from the v11 tokenizer on, NAME[ARGS]{...} (optionally NAME[CALL_ID]id[ARGS])
// per call, each call opened by [TOOL_CALLS].
class MistralFormat : public ToolFormat {
 public:
  std::string make_id() const override { return random_alnum(9); }  // Mistral wants 9 chars
  ToolSnapshot parse(std::string_view s, bool final) const override {
    static constexpr std::string_view kBot = "[TOOL_CALLS]", kArgs = "[ARGS]",
                                      kCallId = "[CALL_ID]";
    ToolSnapshot snap;
    size_t start = s.find(kBot);
    if (start == std::string_view::npos) {
      snap.content_len = final ? s.size() : s.size() - partial_marker(s, kBot);
      return snap;
    }
    snap.content_len = start;
    size_t i = skip_ws(s, start + kBot.size());
    if (i >= s.size()) {
      snap.calls.emplace_back();
      return snap;
    }
    if (s[i] == '[') {  // array form
      ++i;
      for (;;) {
        while (i < s.size() && (is_ws(s[i]) || s[i] == ',')) ++i;
        if (i >= s.size() || s[i] != '{') break;
        ObjectCall o = scan_call_object(s, i, final, {"arguments", "parameters"});
        if (o.state == Scan::kInvalid && !o.name_done) break;
        snap.calls.push_back(call_from_object(s, o));
        if (o.state != Scan::kComplete) break;
        i = o.end;
      }
    } else {  // NAME[ARGS]{...}[TOOL_CALLS]NAME[ARGS]{...}
      size_t pos = start;
      while (pos != std::string_view::npos) {
        size_t n = pos + kBot.size();
        snap.calls.emplace_back();
        ToolSnapshot::Call& c = snap.calls.back();
        size_t a = s.find(kArgs, n);
        size_t id = s.find(kCallId, n);
        size_t name_end = std::min(a, id);
        if (name_end == std::string_view::npos) {
          if (final) c.name = std::string(trim_view(s.substr(n))), c.name_done = !c.name.empty();
          break;
        }
        c.name = std::string(trim_view(s.substr(n, name_end - n)));
        c.name_done = true;
        if (a == std::string_view::npos) break;
        size_t v = skip_ws(s, a + kArgs.size());
        size_t next = s.find(kBot, v);
        if (v >= s.size()) break;
        size_t j = v;
        Scan sv = skip_value(s, &j, final || next != std::string_view::npos);
        if (sv == Scan::kComplete) {
          c.arguments = std::string(s.substr(v, j - v));
        } else if (sv == Scan::kIncomplete) {
          c.arguments = std::string(s.substr(v, (s[v] == '{' || s[v] == '[') ? s.size() - v : 0));
        }
        pos = next;
      }
    }
    return snap;
  }

 private:
  static std::string_view trim_view(std::string_view v) {
    size_t b = 0, e = v.size();
    while (b < e && is_ws(v[b])) ++b;
    while (e > b && is_ws(v[e - 1])) --e;
    return v.substr(b, e - b);
  }
};

// DeepSeek V3 (and R1-0528) and V3.1: special-token wrapped calls.
//   V3:   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{..}\n```
//         <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{..}<｜tool▁call▁end｜>...
class DeepSeekV3Format : public ToolFormat {
 public:
  explicit DeepSeekV3Format(bool v31) : v31_(v31) {}
  ToolSnapshot parse(std::string_view s, bool final) const override {
    static constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>",
                                      kCallBegin = "<｜tool▁call▁begin｜>", kSep = "<｜tool▁sep｜>",
                                      kCallEnd = "<｜tool▁call▁end｜>";
    ToolSnapshot snap;
    // Some outputs skip the outer marker: a lone call marker starts calls too.
    size_t start = std::min(s.find(kCallsBegin), s.find(kCallBegin));
    if (start == std::string_view::npos) {
      snap.content_len = final ? s.size() : s.size() - partial_any(s, {kCallsBegin, kCallBegin});
      return snap;
    }
    snap.content_len = start;
    size_t pos = s.find(kCallBegin, start);
    if (pos == std::string_view::npos) snap.calls.emplace_back();
    while (pos != std::string_view::npos) {
      snap.calls.emplace_back();
      ToolSnapshot::Call& c = snap.calls.back();
      size_t n = pos + kCallBegin.size();
      size_t sep = s.find(kSep, n);
      if (sep == std::string_view::npos) break;
      size_t end = s.find(kCallEnd, sep);
      std::string_view body =
          s.substr(0, end == std::string_view::npos ? s.size() : end);  // this call's text
      const bool closed = end != std::string_view::npos || final;
      if (v31_) {
        c.name = std::string(s.substr(n, sep - n));
        c.name_done = true;
        std::string_view args = body.substr(sep + kSep.size());
        if (!closed) args.remove_suffix(partial_marker(args, kCallEnd));
        c.arguments = trim_args(args, closed);
      } else {
        size_t a = sep + kSep.size();
        size_t nl = body.find('\n', a);
        if (nl == std::string_view::npos) {
          if (closed) c.name = std::string(body.substr(a)), c.name_done = !c.name.empty();
          if (end == std::string_view::npos) break;
        } else {
          c.name = std::string(body.substr(a, nl - a));
          c.name_done = true;
          // ```json\n{ARGS}\n```
          static constexpr std::string_view kFence = "```json\n", kClose = "\n```";
          size_t f = nl + 1;
          if (starts_at(body, f, kFence)) {
            f += kFence.size();
          } else if (!closed && ends_inside(body, f, kFence)) {
            f = body.size();
          }
          std::string_view args = body.substr(std::min(f, body.size()));
          if (!closed) args.remove_suffix(partial_marker(args, kCallEnd));
          size_t cut = closed ? args.rfind(kClose) : args.find(kClose);
          if (cut != std::string_view::npos)
            args = args.substr(0, cut);
          else if (!closed)
            args.remove_suffix(partial_marker(args, kClose));  // may be the closing fence
          c.arguments = trim_args(args, closed);
        }
      }
      if (end == std::string_view::npos) break;
      pos = s.find(kCallBegin, end);
    }
    return snap;
  }

 private:
  // Leading whitespace never belongs to the arguments; trailing only goes once the call closed.
  static std::string trim_args(std::string_view a, bool closed) {
    size_t b = 0;
    while (b < a.size() && is_ws(a[b])) ++b;
    a = a.substr(b);
    (void)closed;  // trailing whitespace is held back, then dropped when the call closes
    while (!a.empty() && is_ws(a.back())) a.remove_suffix(1);
    return std::string(a);
  }
  bool v31_;
};

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

// tool_choice "required": [{"name": ..., "parameters": {...}}, ...] from constrained decoding.
class RequiredJsonFormat : public ToolFormat {
 public:
  bool marker_started() const override { return false; }
  ToolSnapshot parse(std::string_view s, bool final) const override {
    ToolSnapshot snap;
    size_t i = skip_ws(s, 0);
    if (i >= s.size()) return snap;
    if (s[i] != '[') {  // not the constrained shape: plain content
      snap.content_len = s.size();
      return snap;
    }
    ++i;
    for (;;) {
      while (i < s.size() && (is_ws(s[i]) || s[i] == ',')) ++i;
      if (i >= s.size() || s[i] != '{') break;
      ObjectCall o = scan_call_object(s, i, final, {"parameters", "arguments"});
      snap.calls.push_back(call_from_object(s, o));
      if (o.state != Scan::kComplete) break;
      i = o.end;
    }
    return snap;
  }
};

// A named tool_choice: the output is the arguments object.
class NamedJsonFormat : public ToolFormat {
 public:
  explicit NamedJsonFormat(std::string name) : name_(std::move(name)) {}
  bool marker_started() const override { return false; }
  ToolSnapshot parse(std::string_view s, bool final) const override {
    ToolSnapshot snap;
    size_t i = skip_ws(s, 0);
    if (i >= s.size()) return snap;
    if (s[i] != '{') {  // not the constrained shape: plain content
      snap.content_len = s.size();
      return snap;
    }
    ToolSnapshot::Call c;
    c.name = name_;
    c.name_done = true;
    std::string_view a = s.substr(i);
    while (!a.empty() && is_ws(a.back())) a.remove_suffix(1);  // held back, then dropped
    c.arguments = std::string(a);
    snap.calls.push_back(std::move(c));
    return snap;
  }

 private:
  std::string name_;
};

const char* const kToolParserNames[] = {
    "deepseek_v3", "deepseek_v31", "deepseek_v32", "deepseek_v4", "hermes",
    "llama3_json", "llama4_json",  "mistral",      "qwen3_coder", "qwen3_xml"};

}  // namespace

std::string ToolFormat::make_id() const {
  return "chatcmpl-tool-" + random_hex(32);
}

std::string python_json_dumps(const OrderedJson& value) {
  std::string out;
  dumps_into(value, &out);
  return out;
}

ToolCallParser::ToolCallParser(std::unique_ptr<ToolFormat> format, bool parallel_tool_calls)
    : format_(std::move(format)), parallel_(parallel_tool_calls) {}

ToolCallParser::~ToolCallParser() = default;

OutputDelta ToolCallParser::feed(std::string_view delta_text, std::span<const int32_t>) {
  if (finished_) return {};
  text_.append(delta_text);
  return advance(false);
}

OutputDelta ToolCallParser::finish() {
  if (finished_) return {};
  OutputDelta d = advance(true);
  finished_ = true;
  return d;
}

OutputDelta ToolCallParser::advance(bool final) {
  OutputDelta d;
  std::string_view view(text_);
  ToolSnapshot snap = format_->parse(view.substr(base_), final);
  for (auto& c : snap.calls) c.name_done = c.name_done && !c.name.empty();  // nameless: no call
  // Not one readable call in the finished text: it was all content (as vLLM answers).
  if (final && std::none_of(snap.calls.begin(), snap.calls.end(),
                            [](const ToolSnapshot::Call& c) { return c.name_done; })) {
    snap.calls.clear();
    snap.content_len = view.size() - base_;
  }
  const size_t content_end = base_ + snap.content_len;
  if (content_end > content_.size()) {
    d.content = text_.substr(content_.size(), content_end - content_.size());
    content_ += d.content;
  }
  if (snap.calls.empty() && format_->marker_started()) base_ = content_end;
  size_t limit = parallel_ ? snap.calls.size() : std::min<size_t>(snap.calls.size(), 1);
  for (size_t i = 0; i < limit; ++i) {
    const ToolSnapshot::Call& c = snap.calls[i];
    if (!c.name_done) break;  // later calls wait for this one's name
    if (i >= calls_.size()) {
      ToolCall tc;
      tc.id = format_->make_id();
      tc.name = c.name;
      tc.arguments = c.arguments;
      ToolCallDelta td;
      td.index = static_cast<int>(i);
      td.first = true;
      td.id = tc.id;
      td.name = tc.name;
      td.arguments = tc.arguments;
      calls_.push_back(std::move(tc));
      d.tool_calls.push_back(std::move(td));
      continue;
    }
    ToolCall& tc = calls_[i];
    if (c.arguments.size() <= tc.arguments.size()) continue;
    if (c.arguments.compare(0, tc.arguments.size(), tc.arguments) != 0) {
      STRATA_LOG(WARNING) << "tool-call parser: arguments of call " << i
                          << " changed after being sent; keeping what was sent";
      continue;
    }
    ToolCallDelta td;
    td.index = static_cast<int>(i);
    td.arguments = c.arguments.substr(tc.arguments.size());
    tc.arguments = c.arguments;
    d.tool_calls.push_back(std::move(td));
  }
  return d;
}

std::vector<std::string> tool_parser_names() {
  return {std::begin(kToolParserNames), std::end(kToolParserNames)};
}

bool is_tool_parser_name(const std::string& name) {
  for (const char* n : kToolParserNames)
    if (name == n) return true;
  return false;
}

Result<std::unique_ptr<ToolCallParser>> make_tool_parser(const std::string& name,
                                                         const OrderedJson* tools,
                                                         bool parallel_tool_calls) {
  std::unique_ptr<ToolFormat> f;
  if (name == "hermes") {
    f = std::make_unique<HermesFormat>();
  } else if (name == "llama3_json" || name == "llama4_json") {
    f = std::make_unique<LlamaJsonFormat>();
  } else if (name == "mistral") {
    f = std::make_unique<MistralFormat>();
  } else if (name == "qwen3_xml" || name == "qwen3_coder") {
    f = std::make_unique<Qwen3XmlFormat>(tools);
  } else if (name == "deepseek_v3") {
    f = std::make_unique<DeepSeekV3Format>(false);
  } else if (name == "deepseek_v31") {
    f = std::make_unique<DeepSeekV3Format>(true);
  } else if (name == "deepseek_v32") {
    f = std::make_unique<DsmlFormat>(tools, "function_calls");
  } else if (name == "deepseek_v4") {
    f = std::make_unique<DsmlFormat>(tools, "tool_calls");
  } else {
    std::string known;
    for (const char* n : kToolParserNames) known += (known.empty() ? "" : ", ") + std::string(n);
    return invalid_argument("unknown tool-call parser '" + name + "'; known parsers: " + known);
  }
  return std::make_unique<ToolCallParser>(std::move(f), parallel_tool_calls);
}

std::unique_ptr<ToolCallParser> make_required_tool_parser(bool parallel_tool_calls) {
  return std::make_unique<ToolCallParser>(std::make_unique<RequiredJsonFormat>(),
                                          parallel_tool_calls);
}

std::unique_ptr<ToolCallParser> make_named_tool_parser(const std::string& name) {
  return std::make_unique<ToolCallParser>(std::make_unique<NamedJsonFormat>(name), false);
}

namespace {

OrderedJson parameters_schema(const OrderedJson& tool) {
  const OrderedJson& fn = tool["function"];
  auto p = fn.find("parameters");
  if (p != fn.end() && p->is_object() && !p->empty()) return *p;
  OrderedJson empty;
  empty["type"] = "object";
  empty["properties"] = OrderedJson::object();
  return empty;
}

}  // namespace

std::string required_tool_choice_schema(const OrderedJson& tools, bool parallel) {
  OrderedJson alternatives = OrderedJson::array();
  for (const auto& t : tools) {
    OrderedJson item;
    item["type"] = "object";
    item["properties"]["name"]["type"] = "string";
    item["properties"]["name"]["const"] = t["function"]["name"];
    item["properties"]["parameters"] = parameters_schema(t);
    item["required"] = OrderedJson::array({"name", "parameters"});
    alternatives.push_back(std::move(item));
  }
  OrderedJson schema;
  schema["type"] = "array";
  schema["minItems"] = 1;
  if (!parallel) schema["maxItems"] = 1;
  schema["items"]["type"] = "object";
  schema["items"]["anyOf"] = std::move(alternatives);
  return schema.dump();
}

std::string named_tool_choice_schema(const OrderedJson& tool) {
  return parameters_schema(tool).dump();
}

}  // namespace strata::server
