// Python's json.dumps for interpreter values (transformers' tojson filter).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace strata::jinja {

namespace {

void append_json_string(std::string* out, std::string_view s, bool ensure_ascii) {
  out->push_back('"');
  char buf[16];
  for (size_t pos = 0; pos < s.size();) {
    size_t start = pos;
    uint32_t cp = unicode::decode(s, &pos);
    switch (cp) {
      case '"':
        *out += "\\\"";
        continue;
      case '\\':
        *out += "\\\\";
        continue;
      case '\n':
        *out += "\\n";
        continue;
      case '\r':
        *out += "\\r";
        continue;
      case '\t':
        *out += "\\t";
        continue;
      case '\b':
        *out += "\\b";
        continue;
      case '\f':
        *out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      *out += buf;
    } else if (ensure_ascii && cp >= 0x80) {
      if (cp >= 0x10000) {
        uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      }
      *out += buf;
    } else {
      out->append(s.data() + start, pos - start);
    }
  }
  out->push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

// A dict key as json.dumps converts it.
std::string key_text(const Value& k) {
  if (k.is_string()) return k.str();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_int()) return std::to_string(k.as_int());
  if (k.is_float()) return json_float(k.as_double());
  if (k.is_none()) return "null";
  throw_runtime("keys must be str, int, float, bool or None, not " + k.type_name());
}

class JsonWriter {
 public:
  JsonWriter(Interp& interp, const JsonOptions& options) : interp_(interp), o_(options) {
    if (o_.has_indent) {
      indent_unit_ = !o_.indent_text.empty() || o_.indent < 0
                         ? o_.indent_text
                         : std::string(static_cast<size_t>(o_.indent), ' ');
    }
  }

  void write(const Value& v, int level) {
    interp_.check_size(out.size());
    switch (v.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return;
      case Value::Kind::kBool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out += std::to_string(v.as_int());
        return;
      case Value::Kind::kFloat:
        out += json_float(v.as_double());
        return;
      case Value::Kind::kString:
        append_json_string(&out, v.str(), o_.ensure_ascii);
        return;
      case Value::Kind::kList:
      case Value::Kind::kTuple: {
        const List& items = v.items();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out.push_back('[');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += o_.item_separator;
          newline(level + 1);
          write(items[i], level + 1);
        }
        newline(level);
        out.push_back(']');
        return;
      }
      case Value::Kind::kDict: {
        const auto& entries = v.dict().entries();
        if (entries.empty()) {
          out += "{}";
          return;
        }
        std::vector<const Dict::Entry*> order;
        for (const auto& e : entries) order.push_back(&e);
        if (o_.sort_keys) {
          std::stable_sort(order.begin(), order.end(),
                           [](const Dict::Entry* a, const Dict::Entry* b) {
                             return compare_values(a->first, b->first) < 0;
                           });
        }
        out.push_back('{');
        for (size_t i = 0; i < order.size(); ++i) {
          if (i) out += o_.item_separator;
          newline(level + 1);
          append_json_string(&out, key_text(order[i]->first), o_.ensure_ascii);
          out += o_.key_separator;
          write(order[i]->second, level + 1);
        }
        newline(level);
        out.push_back('}');
        return;
      }
      default:
        throw_runtime("Object of type " + v.type_name() + " is not JSON serializable");
    }
  }

  std::string out;

 private:
  void newline(int level) {
    if (!o_.has_indent) return;
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += indent_unit_;
  }

  Interp& interp_;
  const JsonOptions& o_;
  std::string indent_unit_;
};

}  // namespace

std::string to_json(Interp& interp, const Value& value, const JsonOptions& options) {
  JsonWriter w(interp, options);
  w.write(value, 0);
  interp.check_size(w.out.size());
  return std::move(w.out);
}

}  // namespace strata::jinja
