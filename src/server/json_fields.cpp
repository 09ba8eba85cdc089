#include "server/json_fields.h"

#include <algorithm>
#include <cmath>

#include "core/json.h"

namespace strata::server {

std::string json_type_name(const OrderedJson& v) {
  switch (v.type()) {
    case OrderedJson::value_t::null:
      return "null";
    case OrderedJson::value_t::boolean:
      return "a boolean";
    case OrderedJson::value_t::number_integer:
    case OrderedJson::value_t::number_unsigned:
      return "an integer";
    case OrderedJson::value_t::number_float:
      return "a number";
    case OrderedJson::value_t::string:
      return "a string";
    case OrderedJson::value_t::array:
      return "an array";
    case OrderedJson::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

std::string json_brief(const OrderedJson& v) {
  if (v.is_number() || v.is_boolean() || v.is_null()) return v.dump();
  if (v.is_string() && v.get_ref<const std::string&>().size() <= 40)
    return v.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
  return json_type_name(v);
}

int json_nesting_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

bool json_to_int(const OrderedJson& v, int64_t min, int64_t max, int64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    *out = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < -9.2e18 || d > 9.2e18) return false;
    *out = static_cast<int64_t>(d);
  } else {
    return false;
  }
  return *out >= min && *out <= max;
}

bool JsonFields::has(const char* name) const {
  return raw(name) != nullptr;
}

const OrderedJson* JsonFields::raw(const char* name) const {
  auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

void JsonFields::fail(const std::string& param, const std::string& message) {
  if (failed_) return;
  failed_ = true;
  error_.status = 400;
  error_.param = param;
  error_.message = message;
}

std::optional<bool> JsonFields::boolean(const char* name) {
  const OrderedJson* v = raw(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    fail(name, std::string(name) + " must be a boolean, got " + json_type_name(*v));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<int64_t> JsonFields::integer(const char* name, int64_t min, int64_t max) {
  const OrderedJson* v = raw(name);
  if (v == nullptr) return std::nullopt;
  int64_t x = 0;
  if (!v->is_number() || v->is_boolean()) {
    fail(name, std::string(name) + " must be an integer, got " + json_type_name(*v));
    return std::nullopt;
  }
  if (!json_to_int(*v, min, max, &x)) {
    fail(name, std::string(name) + " must be an integer in [" + std::to_string(min) + ", " +
                   std::to_string(max) + "], got " + json_brief(*v));
    return std::nullopt;
  }
  return x;
}

std::optional<double> JsonFields::number(const char* name) {
  const OrderedJson* v = raw(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    fail(name, std::string(name) + " must be a number, got " + json_type_name(*v));
    return std::nullopt;
  }
  double d = v->get<double>();
  if (!std::isfinite(d) || std::fabs(d) > 3.4e38) {
    fail(name, std::string(name) + " must be a finite number, got " + json_brief(*v));
    return std::nullopt;
  }
  return d;
}

std::optional<std::string> JsonFields::string(const char* name) {
  const OrderedJson* v = raw(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    fail(name, std::string(name) + " must be a string, got " + json_type_name(*v));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> JsonFields::strings(const char* name) {
  const OrderedJson* v = raw(name);
  if (v == nullptr) return std::nullopt;
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) {
    fail(name,
         std::string(name) + " must be a string or an array of strings, got " + json_type_name(*v));
    return std::nullopt;
  }
  for (const auto& item : *v) {
    if (!item.is_string()) {
      fail(name, std::string(name) + " must be a string or an array of strings; an item is " +
                     json_type_name(item));
      return std::nullopt;
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::optional<std::vector<int64_t>> JsonFields::integers(const char* name, int64_t min,
                                                         int64_t max) {
  const OrderedJson* v = raw(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) {
    fail(name, std::string(name) + " must be an array of integers, got " + json_type_name(*v));
    return std::nullopt;
  }
  std::vector<int64_t> out;
  out.reserve(v->size());
  for (const auto& item : *v) {
    int64_t x = 0;
    if (!json_to_int(item, min, max, &x) || item.is_boolean()) {
      fail(name, std::string(name) + " must be an array of integers in [" + std::to_string(min) +
                     ", " + std::to_string(max) + "]; got the item " + json_brief(item));
      return std::nullopt;
    }
    out.push_back(x);
  }
  return out;
}

const OrderedJson* JsonFields::object(const char* name) {
  const OrderedJson* v = raw(name);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    fail(name, std::string(name) + " must be an object, got " + json_type_name(*v));
    return nullptr;
  }
  return v;
}

}  // namespace strata::server
