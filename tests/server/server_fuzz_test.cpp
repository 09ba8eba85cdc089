// Hundreds of malformed requests against a running server: every one gets a clear OpenAI-style
// error (never a 5xx, never a crash), and afterwards a normal request still answers exactly as
// before.
#include <gtest/gtest.h>

#include "core/rng.h"
#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerHarness;

// Checks one error response: a 4xx status and {"error": {message, type, param, code}}.
void expect_client_error(const net::ClientResponse& r, const std::string& what) {
  EXPECT_GE(r.status, 400) << what;
  EXPECT_LT(r.status, 500) << what << " -> " << r.body;
  auto j = parse_json(r.body, "error");
  ASSERT_TRUE(j.ok()) << what << " -> " << r.body;
  ASSERT_TRUE(j->contains("error")) << r.body;
  const Json& e = (*j)["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
  EXPECT_TRUE(e["type"].is_string()) << r.body;
  EXPECT_TRUE(e.contains("param")) << r.body;
  EXPECT_EQ(e["code"], r.status) << r.body;
}

TEST(ServerFuzz, MalformedRequestsGetErrorsAndTheServerKeepsServing) {
  ServerHarness h(testing::tiny_engine_config(), testing::local_server_config());
  ASSERT_TRUE(h.ok());
  const std::string good =
      R"({"prompt": [256, 72, 105], "max_tokens": 6, "temperature": 0, "ignore_eos": true})";
  auto ref = h.post("/v1/completions", good);
  ASSERT_EQ(ref.status, 200);
  const std::string expected = testing::parse(ref.body)["choices"][0]["text"];
  int sent = 0;

  // 1. Every truncation of a valid body.
  for (size_t n = 0; n < good.size(); ++n) {
    expect_client_error(h.post("/v1/completions", good.substr(0, n)), good.substr(0, n));
    ++sent;
  }
  // 2. Every field with values of the wrong type or out of range.
  const char* fields[] = {"prompt",
                          "max_tokens",
                          "temperature",
                          "top_p",
                          "top_k",
                          "min_p",
                          "n",
                          "stop",
                          "stop_token_ids",
                          "seed",
                          "logprobs",
                          "echo",
                          "stream",
                          "stream_options",
                          "presence_penalty",
                          "frequency_penalty",
                          "repetition_penalty",
                          "logit_bias",
                          "min_tokens",
                          "best_of",
                          "ignore_eos",
                          "model",
                          "priority",
                          "response_format",
                          "suffix",
                          "skip_special_tokens",
                          "prompt_logprobs"};
  const char* bad_values[] = {"\"x\"", "-7",   "1e300",       "{\"a\": 1}", "[[]]",
                              "true",  "[-1]", "\"\\u0000\"", "-1e300"};
  for (const char* f : fields) {
    for (const char* v : bad_values) {
      std::string body =
          std::string(R"({"prompt": [256, 72], "max_tokens": 2, ")") + f + "\": " + v + "}";
      if (std::string(f) == "prompt" || std::string(f) == "max_tokens")
        body = std::string("{\"") + f + "\": " + v + "}";
      auto r = h.post("/v1/completions", body);
      ++sent;
      if (r.status == 200) continue;  // some values are valid for some fields (seed: -7)
      expect_client_error(r, body);
    }
  }
  // 3. Random bytes, and invalid UTF-8 inside strings.
  Rng rng(42);
  for (int i = 0; i < 60; ++i) {
    std::string body(1 + rng.next_u64() % 200, '\0');
    for (auto& c : body) c = static_cast<char>(rng.next_u64() & 0xFF);
    expect_client_error(h.post("/v1/completions", body), "random bytes");
    ++sent;
  }
  for (const char* s : {"\xff", "\xc0\xaf", "\xed\xa0\x80", "a\xe2\x82", "\xf8\x88\x80\x80\x80"}) {
    expect_client_error(h.post("/v1/completions", std::string("{\"prompt\": \"") + s + "\"}"),
                        "invalid UTF-8");
    expect_client_error(h.post("/tokenize", std::string("{\"prompt\": \"") + s + "\"}"),
                        "invalid UTF-8 tokenize");
    sent += 2;
  }
  // Chat: every field of a chat request with values of the wrong type.
  const char* chat_fields[] = {"messages",
                               "max_completion_tokens",
                               "logprobs",
                               "top_logprobs",
                               "tools",
                               "tool_choice",
                               "add_generation_prompt",
                               "continue_final_message",
                               "chat_template_kwargs",
                               "documents",
                               "echo",
                               "n",
                               "stop"};
  for (const char* f : chat_fields) {
    for (const char* v : bad_values) {
      std::string body = std::string(R"({"messages": [{"role": "user", "content": "x"}],
                                         "max_tokens": 2, ")") +
                         f + "\": " + v + "}";
      if (std::string(f) == "messages") body = std::string("{\"messages\": ") + v + "}";
      auto r = h.post("/v1/chat/completions", body);
      ++sent;
      if (r.status == 200) continue;
      expect_client_error(r, body);
    }
  }
  // 4. Deep nesting, huge arrays of bad ids, wrong endpoints' bodies.
  expect_client_error(h.post("/v1/completions", std::string(100000, '[')), "deep nesting");
  expect_client_error(h.post("/v1/completions", "{\"prompt\": " + std::string(5000, '[') +
                                                    std::string(5000, ']') + "}"),
                      "nested prompt");
  expect_client_error(h.post("/detokenize", R"({"tokens": [1, "a"]})"), "detokenize");
  expect_client_error(h.post("/tokenize", R"({"prompt": 5})"), "tokenize");
  expect_client_error(h.post("/v1/chat/completions", R"({"messages": "hi"})"), "chat");
  expect_client_error(h.post("/v1/chat/completions", R"({"messages": [{"content": "x"}]})"),
                      "chat role");
  expect_client_error(h.post("/v1/chat/completions", R"({"prompt": "x"})"), "chat no messages");
  sent += 7;
  // 5. Broken HTTP on raw sockets: each gets the status HTTP prescribes (4xx; 501 for a transfer
  // coding, 505 for an HTTP version the server does not implement) with an OpenAI-style body,
  // and the connection is closed. Bytes that never form a request line (a TLS ClientHello with
  // no line end) get no reply: the connection is just closed at the client's end of input.
  struct RawCase {
    std::string bytes;
    std::string status;  // "" = closed without a reply
  };
  const RawCase raw[] = {
      {"GARBAGE\r\n\r\n", "400"},
      {"POST /v1/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n", "400"},
      {"POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: "
       "6\r\n\r\nhello",
       "400"},
      {"POST /v1/completions HTTP/9.9\r\n\r\n", "505"},
      {"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "501"},
      {"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "400"},
      {"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", ""},
  };
  for (const RawCase& c : raw) {
    int fd = testing::connect_raw(h.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(testing::send_all(fd, c.bytes));
    ::shutdown(fd, SHUT_WR);
    // Until the server closes (the receive timeout is only a safety net).
    std::string got = testing::read_until(fd, [](const std::string&) { return false; });
    ::close(fd);
    if (c.status.empty()) {
      EXPECT_EQ(got, "") << c.bytes;
    } else {
      EXPECT_EQ(got.rfind("HTTP/1.1 " + c.status + " ", 0), 0u) << c.bytes << " -> " << got;
      const size_t body = got.find("\r\n\r\n");
      ASSERT_NE(body, std::string::npos) << got;
      auto j = parse_json(got.substr(body + 4), "error body");
      ASSERT_TRUE(j.ok()) << c.bytes << " -> " << got;
      EXPECT_EQ((*j)["error"]["code"], std::stoi(c.status)) << got;
      EXPECT_TRUE((*j)["error"]["message"].is_string()) << got;
      EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
    }
    ++sent;
  }
  // A client that disconnects halfway through its body.
  for (int i = 0; i < 20; ++i) {
    int fd = testing::connect_raw(h.port());
    testing::send_all(fd, "POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro");
    ::close(fd);
    ++sent;
  }
  EXPECT_GE(sent, 400);

  // The server still answers, and exactly as before.
  auto after = h.post("/v1/completions", good);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(testing::parse(after.body)["choices"][0]["text"], expected);
  EXPECT_EQ(h.get("/health").status, 200);
  // The engine's stats snapshot trails the last response by at most one step.
  EXPECT_TRUE(testing::wait_for(
      [&] { return h.metric("strata:kv_cache_blocks", "state=\"referenced\"") == 0; }));
}

}  // namespace
}  // namespace strata::server
