// HTTP/1.1 messages: headers (case-insensitive names, order kept), requests and responses, and
// status reason phrases. Plain values; no I/O here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::net {

// Header fields in arrival order. Names compare case-insensitively; values are stored without
// surrounding whitespace.
class HttpHeaders {
 public:
  void add(std::string name, std::string value);
  // Replaces every field named `name` by one field.
  void set(const std::string& name, std::string value);
  void remove(std::string_view name);
  // The first value named `name`, or nullopt.
  std::optional<std::string_view> get(std::string_view name) const;
  std::string get_or(std::string_view name, std::string_view fallback) const;
  bool has(std::string_view name) const { return get(name).has_value(); }
  // True when a comma-separated list header (Connection, Transfer-Encoding) holds `token`.
  bool has_token(std::string_view name, std::string_view token) const;
  size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }
  void clear() { fields_.clear(); }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

bool iequals(std::string_view a, std::string_view b);

struct HttpRequest {
  std::string method;     // "GET", "POST", ...
  std::string target;     // request-target as sent: "/v1/completions?x=1"
  std::string path;       // target without the query: "/v1/completions"
  std::string query;      // after '?', without it; empty when none
  int version_minor = 1;  // HTTP/1.<minor>
  HttpHeaders headers;
  std::string body;  // decoded (de-chunked)

  // HTTP/1.1 keeps the connection unless "Connection: close"; HTTP/1.0 only with keep-alive.
  bool keep_alive() const;
};

struct HttpResponse {
  int status = 200;
  std::string reason;  // empty: the standard phrase for `status`
  HttpHeaders headers;
  std::string body;

  static HttpResponse text(int status, std::string body,
                           std::string content_type = "text/plain; charset=utf-8");
  static HttpResponse json(int status, std::string body);
};

// "OK", "Not Found", ...; "Unknown" for codes without a standard phrase.
const char* http_reason_phrase(int status);

// Serialises a status line plus headers (a blank line ends them). Adds nothing by itself.
std::string serialize_response_head(int status, std::string_view reason, const HttpHeaders& headers,
                                    int version_minor = 1);

}  // namespace strata::net
