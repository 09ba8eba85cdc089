#include "net/http_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace strata::net {
namespace {

// Feeds `bytes` in pieces of `step` bytes; returns the parser's state after the first message.
HttpRequestParser parse_request(const std::string& bytes, size_t step = 0, HttpLimits limits = {}) {
  HttpRequestParser p(limits);
  if (step == 0) step = bytes.size();
  size_t pos = 0;
  while (pos < bytes.size() && !p.complete() && !p.failed()) {
    std::string_view piece(bytes.data() + pos, std::min(step, bytes.size() - pos));
    size_t used = p.feed(piece);
    pos += used;
    if (used < piece.size() && !p.complete() && !p.failed()) {
      ADD_FAILURE() << "parser stopped consuming mid-message";
      break;
    }
  }
  return p;
}

TEST(HttpRequestParser, SimpleGet) {
  auto p = parse_request("GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nX-Test:  value  \r\n\r\n");
  ASSERT_TRUE(p.complete());
  EXPECT_EQ(p.request().method, "GET");
  EXPECT_EQ(p.request().target, "/v1/models?x=1");
  EXPECT_EQ(p.request().path, "/v1/models");
  EXPECT_EQ(p.request().query, "x=1");
  EXPECT_EQ(p.request().version_minor, 1);
  EXPECT_EQ(p.request().headers.get_or("x-test", ""), "value");
  EXPECT_TRUE(p.request().keep_alive());
  EXPECT_TRUE(p.request().body.empty());
}

TEST(HttpRequestParser, ContentLengthBodyAtEverySplit) {
  std::string msg =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world";
  for (size_t step = 1; step <= msg.size(); ++step) {
    auto p = parse_request(msg, step);
    ASSERT_TRUE(p.complete()) << "step " << step;
    EXPECT_EQ(p.request().body, "hello world") << "step " << step;
  }
}

TEST(HttpRequestParser, ChunkedBodyAtEverySplit) {
  std::string msg =
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n";
  for (size_t step = 1; step <= msg.size(); ++step) {
    auto p = parse_request(msg, step);
    ASSERT_TRUE(p.complete()) << "step " << step << " " << p.error_message();
    EXPECT_EQ(p.request().body, "hello 0123456789") << "step " << step;
  }
}

TEST(HttpRequestParser, BareLineFeedsAndLeadingBlankLines) {
  auto p = parse_request("\r\n\nGET / HTTP/1.0\nConnection: keep-alive\n\n");
  ASSERT_TRUE(p.complete()) << p.error_message();
  EXPECT_EQ(p.request().version_minor, 0);
  EXPECT_TRUE(p.request().keep_alive());
  auto q = parse_request("GET / HTTP/1.0\r\n\r\n");
  EXPECT_FALSE(q.request().keep_alive());
  auto r = parse_request("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n");
  EXPECT_FALSE(r.request().keep_alive());
}

TEST(HttpRequestParser, StopsAtEndOfMessageForPipelining) {
  std::string two = "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
  HttpRequestParser p;
  size_t used = p.feed(two);
  ASSERT_TRUE(p.complete());
  EXPECT_EQ(p.request().path, "/a");
  p.reset();
  used += p.feed(std::string_view(two).substr(used));
  ASSERT_TRUE(p.complete());
  EXPECT_EQ(p.request().path, "/b");
  EXPECT_EQ(used, two.size());
}

TEST(HttpRequestParser, ExpectContinue) {
  HttpRequestParser p;
  p.feed("POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  EXPECT_TRUE(p.headers_complete());
  EXPECT_FALSE(p.complete());
  EXPECT_TRUE(p.expects_continue());
  p.feed("abc");
  EXPECT_TRUE(p.complete());
  EXPECT_EQ(p.request().body, "abc");
}

struct BadCase {
  const char* name;
  std::string bytes;
  int status;
};

TEST(HttpRequestParser, MalformedInputGetsTheRightStatus) {
  std::vector<BadCase> cases = {
      {"no version", "GET /\r\n\r\n", 400},
      {"two spaces", "GET  / HTTP/1.1\r\n\r\n", 400},
      {"bad method", "G(T / HTTP/1.1\r\n\r\n", 400},
      {"control char in target", "GET /\x01 HTTP/1.1\r\n\r\n", 400},
      {"http/2", "GET / HTTP/2.0\r\n\r\n", 505},
      {"garbage version", "GET / HTTQ/1.1\r\n\r\n", 400},
      {"header without colon", "GET / HTTP/1.1\r\nHost\r\n\r\n", 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400},
      {"obs-fold", "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", 400},
      {"NUL in value", std::string("GET / HTTP/1.1\r\nA: b\0c\r\n\r\n", 26), 400},
      {"bare CR", "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", 400},
      {"bad content-length", "POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400},
      {"negative content-length", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"conflicting content-length",
       "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {"te and cl", "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
       400},
      {"gzip te", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"huge chunk size",
       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", 400},
      {"missing chunk CRLF", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
       400},
  };
  for (const auto& c : cases) {
    auto p = parse_request(c.bytes);
    EXPECT_TRUE(p.failed()) << c.name;
    EXPECT_EQ(p.error_status(), c.status) << c.name << ": " << p.error_message();
    EXPECT_FALSE(p.error_message().empty()) << c.name;
  }
}

TEST(HttpRequestParser, SizeLimits) {
  HttpLimits limits;
  limits.max_header_bytes = 100;
  limits.max_body_bytes = 10;
  limits.max_headers = 3;
  auto big_cl = parse_request("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 0, limits);
  EXPECT_EQ(big_cl.error_status(), 413);
  EXPECT_FALSE(big_cl.headers_complete());  // refused before any body byte
  auto ok_cl = parse_request("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", 0, limits);
  EXPECT_TRUE(ok_cl.complete());
  auto big_chunked = parse_request(
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\nabcdef\r\n", 0,
      limits);
  EXPECT_EQ(big_chunked.error_status(), 413);
  auto big_head =
      parse_request("GET / HTTP/1.1\r\nA: " + std::string(200, 'x') + "\r\n\r\n", 7, limits);
  EXPECT_EQ(big_head.error_status(), 431);
  auto many = parse_request("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", 0, limits);
  EXPECT_EQ(many.error_status(), 431);
}

TEST(HttpRequestParser, RandomBytesNeverCrash) {
  uint64_t state = 12345;
  const std::string alphabet =
      "GET POST / HTTP/1.1\r\n:abc0123456789Content-Length chunked\x00\xff";
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s;
    int len = static_cast<int>((state >> 33) % 200);
    for (int i = 0; i < len; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      s += alphabet[(state >> 33) % alphabet.size()];
    }
    HttpRequestParser p;
    p.feed(s);
    if (p.failed()) {
      EXPECT_GE(p.error_status(), 400);
    }
  }
}

HttpResponseParser parse_response(const std::string& bytes, std::string* body, size_t step,
                                  bool eof = false) {
  HttpResponseParser p;
  size_t pos = 0;
  while (pos < bytes.size() && !p.complete() && !p.failed()) {
    pos += p.feed(std::string_view(bytes).substr(pos, step), body);
  }
  if (eof) p.on_eof();
  return p;
}

TEST(HttpResponseParser, LengthChunkedAndUntilClose) {
  for (size_t step : {1u, 3u, 1000u}) {
    std::string body;
    auto a = parse_response("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", &body, step);
    ASSERT_TRUE(a.complete());
    EXPECT_EQ(a.status(), 200);
    EXPECT_EQ(a.reason(), "OK");
    EXPECT_EQ(body, "hello");
    EXPECT_TRUE(a.keep_alive());

    body.clear();
    auto b = parse_response(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
        "3\r\nabc\r\n0\r\n\r\n",
        &body, step);
    ASSERT_TRUE(b.complete()) << b.error();
    EXPECT_EQ(b.status(), 404);
    EXPECT_EQ(body, "abc");

    body.clear();
    auto c = parse_response("HTTP/1.0 200 OK\r\n\r\nuntil close", &body, step, /*eof=*/true);
    ASSERT_TRUE(c.complete());
    EXPECT_FALSE(c.keep_alive());
    EXPECT_EQ(body, "until close");
  }
}

TEST(HttpResponseParser, TruncatedBodyIsAnError) {
  std::string body;
  auto p = parse_response("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", &body, 100, true);
  EXPECT_TRUE(p.failed());
  EXPECT_FALSE(p.complete());
  auto q = parse_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
                          &body, 100, true);
  EXPECT_TRUE(q.failed());
  auto r = parse_response("", &body, 100, true);
  EXPECT_TRUE(r.failed());
  auto s = parse_response("SSH-2.0-OpenSSH\r\n\r\n", &body, 100);
  EXPECT_TRUE(s.failed());
}

TEST(HttpResponseParser, NoBodyFor204AndHead) {
  std::string body;
  auto p = parse_response("HTTP/1.1 204 No Content\r\n\r\n", &body, 100);
  EXPECT_TRUE(p.complete());
  HttpResponseParser h;
  h.set_head_request(true);
  h.feed("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", &body);
  EXPECT_TRUE(h.complete());
  EXPECT_TRUE(body.empty());
}

}  // namespace
}  // namespace strata::net
