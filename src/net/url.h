// Parsing of http:// URLs ("http://host:port/path?query"). https is recognised and refused with a
// clear message: Strata's client speaks plain HTTP only.
#pragma once

#include <string>

#include "core/status.h"

namespace strata::net {

struct Url {
  std::string host;  // "127.0.0.1", "localhost", "::1" (no brackets)
  int port = 80;
  std::string target = "/";  // path and query: "/v1/models"

  // "host:port" with brackets around IPv6 literals, for Host headers and messages.
  std::string authority() const;
  std::string to_string() const { return "http://" + authority() + target; }
};

// Accepts "http://host[:port][/path]"; a missing scheme means http. Errors name the URL.
Result<Url> parse_url(const std::string& text);

// Joins a base URL ("http://h:8000" or "http://h:8000/") and a path ("/v1/models").
std::string join_url(const std::string& base, const std::string& path);

}  // namespace strata::net
