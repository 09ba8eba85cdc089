// Typed, non-throwing access to the fields of a JSON request object. A getter returns nullopt
// when the field is absent or null, and records the first error (wrong type, out of range) with
// the field's name as `param`; check failed() after a group of reads.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"

namespace strata::server {

class JsonFields {
 public:
  // `object` must be a JSON object and outlive this reader.
  explicit JsonFields(const nlohmann::ordered_json& object) : obj_(object) {}

  // Present and not null.
  bool has(const char* name) const;
  // The raw value (nullptr when absent or null).
  const nlohmann::ordered_json* raw(const char* name) const;

  std::optional<bool> boolean(const char* name);
  // An integer in [min, max]; integral floats (2.0) are accepted, 2.5 is an error.
  std::optional<int64_t> integer(const char* name, int64_t min, int64_t max);
  std::optional<double> number(const char* name);
  std::optional<std::string> string(const char* name);
  // A string or an array of strings (OpenAI's `stop`).
  std::optional<std::vector<std::string>> strings(const char* name);
  // An array of integers in [min, max].
  std::optional<std::vector<int64_t>> integers(const char* name, int64_t min, int64_t max);
  // An object (returned raw).
  const nlohmann::ordered_json* object(const char* name);

  void fail(const std::string& param, const std::string& message);
  bool failed() const { return failed_; }
  const ApiError& error() const { return error_; }

 private:
  const nlohmann::ordered_json& obj_;
  bool failed_ = false;
  ApiError error_;
};

// "an integer", "a string", ...: the JSON type of `v` for error messages.
std::string json_type_name(const nlohmann::ordered_json& v);
// A short description of `v` for error messages: the value itself when it is a number, boolean
// or short string, else its type (never a deep or long dump).
std::string json_brief(const nlohmann::ordered_json& v);
// The deepest nesting of arrays and objects in JSON text (brackets inside strings ignored).
int json_nesting_depth(const std::string& text);
// Reads an integer from a JSON value (integral floats accepted); false when not one or outside
// [min, max].
bool json_to_int(const nlohmann::ordered_json& v, int64_t min, int64_t max, int64_t* out);

}  // namespace strata::server
