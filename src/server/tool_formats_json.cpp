// The JSON tool-call formats: hermes, llama3_json/llama4_json, mistral, deepseek_v3/v31, and the
// JSON that constrained decoding produces under tool_choice "required" or a named tool. They
// report the model's arguments text as written.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/json.h"
#include "server/tool_formats.h"

namespace strata::server::tool_formats {
namespace {

std::string random_alnum(int n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* kChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string s;
  for (int i = 0; i < n; ++i) s += kChars[rng() % 62];
  return s;
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

}  // namespace

std::unique_ptr<ToolFormat> make_hermes_format() {
  return std::make_unique<HermesFormat>();
}

std::unique_ptr<ToolFormat> make_llama_json_format() {
  return std::make_unique<LlamaJsonFormat>();
}

std::unique_ptr<ToolFormat> make_mistral_format() {
  return std::make_unique<MistralFormat>();
}

std::unique_ptr<ToolFormat> make_deepseek_v3_format(bool v31) {
  return std::make_unique<DeepSeekV3Format>(v31);
}

std::unique_ptr<ToolFormat> make_required_json_format() {
  return std::make_unique<RequiredJsonFormat>();
}

std::unique_ptr<ToolFormat> make_named_json_format(std::string name) {
  return std::make_unique<NamedJsonFormat>(std::move(name));
}

}  // namespace strata::server::tool_formats
