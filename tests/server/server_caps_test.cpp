// --max-connections: connections beyond the cap are answered 503 with Retry-After (an
// OpenAI-style error) and closed politely, counted in /metrics; a slot freed is taken again.
// Request caps over HTTP: stop lists and the fan-out get a 400 naming the field.
#include <gtest/gtest.h>

#include "server/openai_request.h"
#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerHarness;

// One request on an open keep-alive connection; returns the whole response.
std::string exchange(int fd, const std::string& path) {
  EXPECT_TRUE(testing::send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"));
  return testing::read_until(fd, [](const std::string& b) {
    size_t head = b.find("\r\n\r\n");
    if (head == std::string::npos) return false;
    size_t cl = b.find("Content-Length: ");
    if (cl == std::string::npos || cl > head) return true;
    return b.size() >= head + 4 + std::stoul(b.substr(cl + 16));
  });
}

double metric_in(const std::string& text, const std::string& name) {
  size_t p = text.find(name + "{");
  if (p == std::string::npos) return -1;
  size_t end = text.find('\n', p);
  std::string line = text.substr(p, end - p);
  return std::stod(line.substr(line.rfind(' ') + 1));
}

TEST(ServerCaps, ConnectionsBeyondMaxConnectionsGet503WithRetryAfter) {
  ServerConfig c = testing::local_server_config();
  c.max_connections = 2;
  ServerHarness h(testing::tiny_engine_config(), c);
  ASSERT_TRUE(h.ok());
  int a = testing::connect_raw(h.port()), b = testing::connect_raw(h.port());
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  // Both are served (and so counted) before the third arrives.
  ASSERT_EQ(exchange(a, "/health").rfind("HTTP/1.1 200", 0), 0u);
  ASSERT_EQ(exchange(b, "/health").rfind("HTTP/1.1 200", 0), 0u);
  int extra = testing::connect_raw(h.port());
  ASSERT_GE(extra, 0);
  // Sends its request at once, as clients do; the answer must not be lost to a reset.
  ASSERT_TRUE(testing::send_all(extra, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string got = testing::read_until(extra, [](const std::string&) { return false; });
  ::close(extra);
  EXPECT_EQ(got.rfind("HTTP/1.1 503", 0), 0u) << got;
  EXPECT_NE(got.find("Retry-After: 1\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  Json err = testing::parse(got.substr(got.find("\r\n\r\n") + 4));
  EXPECT_EQ(err["error"]["type"], "ServiceUnavailableError");
  EXPECT_EQ(err["error"]["code"], 503);
  EXPECT_NE(err["error"]["message"].get<std::string>().find("too many open connections (2)"),
            std::string::npos);
  std::string m = exchange(a, "/metrics");
  EXPECT_EQ(metric_in(m, "strata:http_connections_rejected_total"), 1);
  EXPECT_EQ(metric_in(m, "strata:http_connections"), 2);
  // A slot freed (seen through the other connection) is taken by the next client.
  ::close(a);
  ASSERT_TRUE(testing::wait_for(
      [&] { return metric_in(exchange(b, "/metrics"), "strata:http_connections") == 1; }));
  EXPECT_EQ(h.get("/health").status, 200);
  ::close(b);
}

TEST(ServerCaps, StopListsAndFanOutAreCappedWithTheFieldNamed) {
  ServerHarness h(testing::tiny_engine_config(), testing::local_server_config());
  ASSERT_TRUE(h.ok());
  std::string stops = "[";
  for (size_t i = 0; i <= kMaxStopStrings; ++i)
    stops += (i ? ", \"s" : "\"s") + std::to_string(i) + "\"";
  stops += "]";
  auto r = h.post("/v1/completions", R"({"prompt": "hello", "stop": )" + stops + "}");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(testing::parse(r.body)["error"]["param"], "stop");
  // The tiny engine runs at most 256 sequences at once (--max-num-seqs): 300 prompts cannot be.
  std::string prompts = "[";
  for (int i = 0; i < 300; ++i) prompts += (i ? ", \"p\"" : "\"p\"");
  prompts += "]";
  r = h.post("/v1/completions", R"({"prompt": )" + prompts + "}");
  EXPECT_EQ(r.status, 400);
  Json e = testing::parse(r.body);
  EXPECT_EQ(e["error"]["param"], "prompt");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("300 prompts x n=1"), std::string::npos);
  r = h.post("/v1/chat/completions",
             R"({"messages": [{"role": "user", "content": "hi"}], "n": 100000})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(testing::parse(r.body)["error"]["param"], "n");
}

}  // namespace
}  // namespace strata::server
