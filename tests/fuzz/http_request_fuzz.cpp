// HTTP/1.x parsers (net/http_parser.h). The input is a byte stream from a client (requests,
// possibly pipelined) and also, as a second use of the same bytes, from a server (responses).
// Promises checked: no crash; every call makes progress or ends the message; a failure carries a
// status the server can answer with and a message; and the outcome (every message's method,
// target, headers and body, or the error) is the same whether the bytes arrive at once or split
// into pieces of any size, as the parser's contract says.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_targets.h"
#include "net/http_parser.h"

namespace strata::fuzz {
namespace {

// Splits `data` into pieces whose sizes follow a small generator seeded by `seed`; seed 0 gives
// the whole input as one piece.
std::vector<std::string_view> split(std::string_view data, uint8_t seed) {
  std::vector<std::string_view> pieces;
  if (seed == 0) {
    pieces.push_back(data);
    return pieces;
  }
  uint32_t state = seed;
  while (!data.empty()) {
    state = state * 1103515245u + 12345u;
    size_t n = 1 + (state >> 16) % (1 + seed % 37);
    n = std::min(n, data.size());
    pieces.push_back(data.substr(0, n));
    data.remove_prefix(n);
  }
  return pieces;
}

std::string describe_request(const net::HttpRequest& r, bool expects_continue) {
  std::string s = "REQ " + r.method + " " + r.target + " path=" + r.path + " query=" + r.query +
                  " 1." + std::to_string(r.version_minor) +
                  (expects_continue ? " expect-100" : "") + (r.keep_alive() ? " keep" : " close");
  for (const auto& [n, v] : r.headers.fields()) s += "\n" + n + ": " + v;
  s += "\nbody[" + std::to_string(r.body.size()) + "]=" + r.body;
  return s;
}

// Runs the request parser over the pieces as a server connection does: after a complete request,
// reset() and feed the rest; stop at the first error.
std::vector<std::string> parse_requests(const std::vector<std::string_view>& pieces) {
  net::HttpLimits limits;
  limits.max_header_bytes = 2048;  // small limits so that the fuzzer reaches them
  limits.max_headers = 16;
  limits.max_body_bytes = 4096;
  net::HttpRequestParser p(limits);
  std::vector<std::string> out;
  for (std::string_view piece : pieces) {
    while (!piece.empty()) {
      size_t n = p.feed(piece);
      STRATA_FUZZ_CHECK(n <= piece.size()) << "feed used " << n << " of " << piece.size();
      piece.remove_prefix(n);
      if (p.failed()) {
        int st = p.error_status();
        STRATA_FUZZ_CHECK(st == 400 || st == 413 || st == 431 || st == 501 || st == 505)
            << "status " << st;
        STRATA_FUZZ_CHECK(!p.error_message().empty());
        out.push_back("ERR " + std::to_string(st) + " " + p.error_message());
        return out;
      }
      if (p.complete()) {
        out.push_back(describe_request(p.request(), p.expects_continue()));
        p.reset();
        continue;
      }
      STRATA_FUZZ_CHECK(piece.empty()) << "feed stopped early without finishing a request";
    }
  }
  out.push_back(p.headers_complete() ? "PARTIAL body" : "PARTIAL head");
  return out;
}

std::vector<std::string> parse_responses(const std::vector<std::string_view>& pieces) {
  net::HttpLimits limits;
  limits.max_header_bytes = 2048;
  limits.max_headers = 16;
  limits.max_body_bytes = 4096;
  net::HttpResponseParser p(limits);
  std::vector<std::string> out;
  std::string body;
  auto finish = [&] {
    std::string s = "RESP " + std::to_string(p.status()) + " 1." +
                    std::to_string(p.version_minor()) + " " + p.reason() +
                    (p.keep_alive() ? " keep" : " close");
    for (const auto& [n, v] : p.headers().fields()) s += "\n" + n + ": " + v;
    s += "\nbody[" + std::to_string(body.size()) + "]=" + body;
    out.push_back(std::move(s));
    body.clear();
  };
  for (std::string_view piece : pieces) {
    while (!piece.empty()) {
      size_t n = p.feed(piece, &body);
      STRATA_FUZZ_CHECK(n <= piece.size());
      piece.remove_prefix(n);
      if (p.failed()) {
        STRATA_FUZZ_CHECK(!p.error().empty());
        out.push_back("ERR " + p.error());
        return out;
      }
      if (p.complete()) {
        finish();
        // A response read until the connection closed has no successor.
        if (!p.keep_alive()) return out;
        p.reset();
        continue;
      }
      STRATA_FUZZ_CHECK(piece.empty()) << "feed stopped early without finishing a response";
    }
  }
  p.on_eof();
  if (p.failed()) {
    out.push_back("EOF-ERR " + p.error());
  } else {
    STRATA_FUZZ_CHECK(p.complete());
    finish();
  }
  return out;
}

}  // namespace

int http_request(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  uint8_t seed = data[0];
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::string_view> whole = split(bytes, 0);
  std::vector<std::string_view> pieces = split(bytes, seed == 0 ? 1 : seed);

  std::vector<std::string> a = parse_requests(whole), b = parse_requests(pieces);
  STRATA_FUZZ_CHECK(a == b) << "requests parse differently when split: " << a.back() << " vs "
                            << b.back();
  std::vector<std::string> c = parse_responses(whole), d = parse_responses(pieces);
  STRATA_FUZZ_CHECK(c == d) << "responses parse differently when split: " << c.back() << " vs "
                            << d.back();
  return 0;
}

}  // namespace strata::fuzz
