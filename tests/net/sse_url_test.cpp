#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/sse.h"
#include "net/url.h"

namespace strata::net {
namespace {

std::vector<SseEvent> parse_all(const std::string& text, size_t step, bool finish = true) {
  SseParser p;
  std::vector<SseEvent> out;
  auto sink = [&](const SseEvent& e) { out.push_back(e); };
  for (size_t pos = 0; pos < text.size(); pos += step) {
    p.feed(std::string_view(text).substr(pos, step), sink);
  }
  if (finish) p.finish(sink);
  return out;
}

TEST(SseParser, EventsCommentsAndLineEndsAtEverySplit) {
  std::string text =
      ": ping\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: update\ndata: line1\ndata:line2\n\n"
      "data: cr\r\rdata: [DONE]\n\n";
  for (size_t step = 1; step <= text.size(); ++step) {
    auto ev = parse_all(text, step);
    ASSERT_EQ(ev.size(), 4u) << "step " << step;
    EXPECT_EQ(ev[0].data, "{\"a\":1}");
    EXPECT_EQ(ev[1].event, "update");
    EXPECT_EQ(ev[1].data, "line1\nline2");
    EXPECT_EQ(ev[2].data, "cr");
    EXPECT_EQ(ev[3].data, "[DONE]");
    EXPECT_EQ(ev[3].event, "");
  }
}

TEST(SseParser, FinishFlushesAnUnterminatedEvent) {
  auto ev = parse_all("data: {\"x\":2}", 4);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "{\"x\":2}");
  EXPECT_TRUE(parse_all("data: x", 3, /*finish=*/false).empty());
}

TEST(SseFormat, RoundTrips) {
  std::string s = sse_format("a\nb") + sse_format("{}", "done");
  EXPECT_EQ(s, "data: a\ndata: b\n\nevent: done\ndata: {}\n\n");
  auto ev = parse_all(s, 1);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].data, "a\nb");
  EXPECT_EQ(ev[1].event, "done");
}

TEST(Url, Parses) {
  auto u = parse_url("http://127.0.0.1:8000/v1/models?x=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->target, "/v1/models?x=1");
  auto v = parse_url("localhost");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->port, 80);
  EXPECT_EQ(v->target, "/");
  auto w = parse_url("http://[::1]:9000");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->host, "::1");
  EXPECT_EQ(w->authority(), "[::1]:9000");
  EXPECT_FALSE(parse_url("https://x").ok());
  EXPECT_NE(parse_url("https://x").status().message().find("https"), std::string::npos);
  EXPECT_FALSE(parse_url("http://h:99999").ok());
  EXPECT_FALSE(parse_url("http://h:abc").ok());
  EXPECT_FALSE(parse_url("ftp://h").ok());
  EXPECT_FALSE(parse_url("http://").ok());
  EXPECT_EQ(join_url("http://h:1/", "/v1/x"), "http://h:1/v1/x");
  EXPECT_EQ(join_url("http://h:1", "v1"), "http://h:1/v1");
}

}  // namespace
}  // namespace strata::net
