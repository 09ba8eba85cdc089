#include "net/url.h"

#include "core/strings.h"

namespace strata::net {

std::string Url::authority() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

Result<Url> parse_url(const std::string& text) {
  std::string rest = std::string(trim(text));
  std::string lower = to_lower(rest);
  if (starts_with(lower, "https://")) {
    return unimplemented("URL '" + text +
                         "' uses https, which Strata's HTTP client does not support; use "
                         "http:// (put a TLS proxy in front if the server needs TLS)");
  }
  if (starts_with(lower, "http://")) {
    rest = rest.substr(7);
  } else if (lower.find("://") != std::string::npos) {
    return invalid_argument("URL '" + text + "' has an unsupported scheme; use http://HOST:PORT");
  }
  Url url;
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  url.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (size_t at = authority.rfind('@'); at != std::string::npos)
    authority = authority.substr(at + 1);
  if (authority.empty()) return invalid_argument("URL '" + text + "' has no host");
  std::string port_text;
  if (authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string::npos) return invalid_argument("URL '" + text + "': missing ']'");
    url.host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return invalid_argument("URL '" + text + "': bad port");
      port_text = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    if (colon != std::string::npos) {
      url.host = authority.substr(0, colon);
      port_text = authority.substr(colon + 1);
    } else {
      url.host = authority;
    }
  }
  if (url.host.empty()) return invalid_argument("URL '" + text + "' has no host");
  if (!port_text.empty()) {
    int port = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9' || port > 65535) {
        return invalid_argument("URL '" + text + "': port '" + port_text + "' is not a number");
      }
      port = port * 10 + (c - '0');
    }
    if (port <= 0 || port > 65535) {
      return invalid_argument("URL '" + text + "': port must be in 1..65535");
    }
    url.port = port;
  }
  return url;
}

std::string join_url(const std::string& base, const std::string& path) {
  std::string b = base;
  while (!b.empty() && b.back() == '/') b.pop_back();
  if (path.empty()) return b;
  return path.front() == '/' ? b + path : b + "/" + path;
}

}  // namespace strata::net
