// The server over loopback HTTP, in process, on the tiny dummy model: routes, shapes, streaming,
// n > 1, stop strings, logprobs, auth, limits, disconnects (seen through /metrics), timeouts and
// graceful shutdown.
#include <gtest/gtest.h>

#include "core/clock.h"
#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerHarness;

class ServerHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    h_ = new ServerHarness(testing::tiny_engine_config(), testing::local_server_config());
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(h_->ok()); }
  static ServerHarness* h_;
};
ServerHarness* ServerHttp::h_ = nullptr;

// Greedy text of the dummy model for `prompt` (ids), `max_tokens` tokens.
Json complete(ServerHarness& h, const std::string& extra) {
  auto r = h.post("/v1/completions", R"({"prompt": [256, 72, 105], "temperature": 0,
                                         "ignore_eos": true)" +
                                         extra + "}");
  EXPECT_EQ(r.status, 200) << r.body;
  return testing::parse(r.body);
}

TEST_F(ServerHttp, HealthVersionModels) {
  EXPECT_EQ(h_->get("/health").status, 200);
  Json v = testing::parse(h_->get("/version").body);
  EXPECT_EQ(v["version"], "test");
  Json m = testing::parse(h_->get("/v1/models").body);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  const Json& d = m["data"][0];
  EXPECT_EQ(d["object"], "model");
  EXPECT_EQ(d["owned_by"], "strata");
  EXPECT_EQ(d["max_model_len"], 512);
  EXPECT_EQ(d["root"], d["id"]);
  EXPECT_NE(d["root"].get<std::string>().find("strata-tiny"), std::string::npos);
  std::string id = d["id"];
  auto one = h_->get("/v1/models/" + id);
  EXPECT_EQ(one.status, 200);
  EXPECT_EQ(testing::parse(one.body)["id"], id);
  EXPECT_EQ(h_->get("/v1/models/nope").status, 404);
}

TEST_F(ServerHttp, UnknownRouteAndWrongMethod) {
  auto r = h_->get("/v1/nothing");
  EXPECT_EQ(r.status, 404);
  Json e = testing::parse(r.body);
  EXPECT_EQ(e["error"]["code"], 404);
  EXPECT_EQ(e["error"]["type"], "NotFoundError");
  r = h_->get("/v1/completions");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers.get_or("Allow", ""), "POST");
  EXPECT_EQ(testing::parse(r.body)["error"]["type"], "MethodNotAllowedError");
  EXPECT_EQ(h_->post("/v1/models", "{}").status, 405);
}

TEST_F(ServerHttp, CompletionIsDeterministicAtTemperatureZero) {
  Json a = complete(*h_, R"(, "max_tokens": 12)");
  Json b = complete(*h_, R"(, "max_tokens": 12, "n": 2)");
  EXPECT_EQ(a["object"], "text_completion");
  EXPECT_EQ(a["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(a["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(a["usage"]["completion_tokens"], 12);
  ASSERT_EQ(b["choices"].size(), 2u);
  EXPECT_EQ(b["choices"][0]["text"], a["choices"][0]["text"]);
  EXPECT_EQ(b["choices"][1]["text"], a["choices"][0]["text"]);
  EXPECT_EQ(b["choices"][1]["index"], 1);
  EXPECT_EQ(b["usage"]["completion_tokens"], 24);
  EXPECT_NE(a["id"], b["id"]);
  EXPECT_EQ(a["id"].get<std::string>().rfind("cmpl-", 0), 0u);
}

TEST_F(ServerHttp, StreamEqualsBodyAndEndsWithDone) {
  Json a = complete(*h_, R"(, "max_tokens": 10)");
  auto r = h_->post("/v1/completions", R"({"prompt": [256, 72, 105], "temperature": 0,
      "ignore_eos": true, "max_tokens": 10, "stream": true,
      "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.get_or("Content-Type", "").rfind("text/event-stream", 0), 0u);
  auto data = testing::sse_data(r.body);
  ASSERT_GE(data.size(), 3u);
  EXPECT_EQ(data.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 2 < data.size(); ++i) {
    Json c = testing::parse(data[i]);
    EXPECT_TRUE(c["usage"].is_null());
    text += c["choices"][0]["text"].get<std::string>();
  }
  Json usage = testing::parse(data[data.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 10);
  EXPECT_EQ(text, a["choices"][0]["text"]);
}

TEST_F(ServerHttp, BatchOfPromptsNumbersChoices) {
  auto r = h_->post("/v1/completions",
                    R"({"prompt": [[256, 72], [256, 73, 74]], "n": 2, "max_tokens": 3,
                        "temperature": 0, "ignore_eos": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = testing::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
  EXPECT_EQ(j["choices"][0]["text"], j["choices"][1]["text"]);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
}

TEST_F(ServerHttp, StopStringsNeverLeak) {
  std::string full = complete(*h_, R"(, "max_tokens": 40)")["choices"][0]["text"];
  ASSERT_GE(full.size(), 12u);
  // A stop string from the middle of the greedy text: each byte is its own token here, so it
  // always spans several streamed chunks.
  size_t at = 5;
  while (at < full.size() && (static_cast<unsigned char>(full[at]) & 0xC0) == 0x80) ++at;
  std::string stop = full.substr(at, 3);
  size_t first = full.find(stop);
  Json sj = stop;
  Json b = complete(*h_, R"(, "max_tokens": 40, "stop": [)" + sj.dump() + "]");
  EXPECT_EQ(b["choices"][0]["text"], full.substr(0, first));
  EXPECT_EQ(b["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(b["choices"][0]["stop_reason"], stop);
  auto r = h_->post("/v1/completions", R"({"prompt": [256, 72, 105], "temperature": 0,
      "ignore_eos": true, "max_tokens": 40, "stream": true, "stop": )" +
                                           sj.dump() + "}");
  std::string text;
  std::string finish;
  for (const auto& d : testing::sse_data(r.body)) {
    if (d == "[DONE]") break;
    Json c = testing::parse(d);
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, full.substr(0, first));
  EXPECT_EQ(finish, "stop");
}

TEST_F(ServerHttp, CompletionLogprobsAndEcho) {
  Json j = complete(*h_, R"(, "max_tokens": 4, "logprobs": 2, "echo": true)");
  const Json& c = j["choices"][0];
  const Json& lp = c["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 7u);  // 3 prompt + 4 generated
  EXPECT_EQ(lp["tokens"][0], "<|bos|>");
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (int i = 1; i < 7; ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    EXPECT_LE(lp["top_logprobs"][i].size(), 3u);
  }
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(c["text"].get<std::string>().rfind("<|bos|>Hi", 0), 0u);
  // Greedy: each generated token is the most likely one.
  for (int i = 3; i < 7; ++i) {
    double chosen = lp["token_logprobs"][i];
    for (auto& [tok, v] : lp["top_logprobs"][i].items()) EXPECT_LE(v.get<double>(), chosen + 1e-6);
  }
}

TEST_F(ServerHttp, ChatBodyAndStreamAgree) {
  const std::string msgs = R"("messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8,
                              "temperature": 0, "ignore_eos": true)";
  auto r = h_->post("/v1/chat/completions", "{" + msgs + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = testing::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  // "<|user|>Hi<|eos|><|assistant|>" is 5 tokens (no BOS: the template is the whole prompt).
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  r = h_->post("/v1/chat/completions",
               "{" + msgs + R"(, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.status, 200);
  std::string content;
  int with_role = 0;
  auto data = testing::sse_data(r.body);
  ASSERT_EQ(data.back(), "[DONE]");
  for (size_t i = 0; i + 2 < data.size(); ++i) {
    Json c = testing::parse(data[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    const Json& d = c["choices"][0]["delta"];
    with_role += d.contains("role");
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(with_role, 1);
  EXPECT_EQ(content, j["choices"][0]["message"]["content"]);
  EXPECT_EQ(testing::parse(data[data.size() - 2])["usage"]["completion_tokens"], 8);
}

TEST_F(ServerHttp, TokenizeDetokenize) {
  auto r = h_->post("/tokenize", R"({"prompt": "Hi there", "return_token_strs": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json t = testing::parse(r.body);
  EXPECT_EQ(t["count"], 9);
  EXPECT_EQ(t["max_model_len"], 512);
  EXPECT_EQ(t["tokens"][0], 256);
  EXPECT_EQ(t["token_strs"].size(), 9u);
  Json ids = t["tokens"];
  ids.erase(ids.begin());
  r = h_->post("/detokenize", R"({"tokens": )" + ids.dump() + "}");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(testing::parse(r.body)["prompt"], "Hi there");
  r = h_->post("/detokenize", R"({"tokens": [99999]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(testing::parse(r.body)["error"]["param"], "tokens");
}

// llama-server's request shape, which llama.cpp-era tools send: {"content"}, no special tokens
// unless add_special, pieces on request; /detokenize answers its "content" field too.
TEST_F(ServerHttp, TokenizeLlamaCppShape) {
  auto r = h_->post("/tokenize", R"({"content": "Hi there"})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json t = testing::parse(r.body);
  ASSERT_EQ(t["tokens"].size(), 8u) << r.body;
  EXPECT_NE(t["tokens"][0], 256);
  EXPECT_FALSE(t.contains("count"));
  r = h_->post("/tokenize", R"({"content": "Hi there", "add_special": true, "with_pieces": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json p = testing::parse(r.body);
  ASSERT_EQ(p["tokens"].size(), 9u) << r.body;
  EXPECT_EQ(p["tokens"][0]["id"], 256);
  std::string text;
  for (size_t i = 1; i < p["tokens"].size(); ++i) {
    EXPECT_EQ(p["tokens"][i]["id"], t["tokens"][i - 1]);
    text += p["tokens"][i]["piece"].get<std::string>();
  }
  EXPECT_EQ(text, "Hi there");
  r = h_->post("/detokenize", R"({"tokens": )" + t["tokens"].dump() + "}");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(testing::parse(r.body)["content"], "Hi there");
  r = h_->post("/tokenize", R"({"content": 5})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(testing::parse(r.body)["error"]["param"], "content");
}

TEST_F(ServerHttp, EngineValidationErrors) {
  struct Case {
    std::string body;
    std::string param;
    std::string text;
  };
  std::vector<Case> cases = {
      {R"({"prompt": "x", "temperature": -1})", "temperature", "temperature"},
      {R"({"prompt": "x", "top_p": 0})", "top_p", "top_p"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "max_tokens"},
      {R"({"prompt": "x", "logprobs": 21})", "logprobs", "logprobs"},
      {R"({"prompt": [256, 100000]})", "prompt", "outside the vocabulary"},
      {R"({"prompt": "x", "model": "other"})", "model", "does not exist"},
      {R"({"prompt": "x", "priority": 1})", "priority", "--scheduling-policy priority"},
      {R"({"prompt": ")" + std::string(600, 'a') + R"("})", "prompt",
       "maximum context length is 512 tokens"},
      {R"({"prompt": "x", "max_tokens": 600})", "prompt", "maximum context length"},
  };
  for (const auto& c : cases) {
    auto r = h_->post("/v1/completions", c.body);
    Json e = testing::parse(r.body);
    EXPECT_EQ(r.status, c.param == "model" ? 404 : 400) << c.body.substr(0, 80);
    EXPECT_EQ(e["error"]["param"], c.param) << r.body;
    EXPECT_NE(e["error"]["message"].get<std::string>().find(c.text), std::string::npos) << r.body;
    EXPECT_EQ(e["error"]["code"], r.status);
  }
}

TEST_F(ServerHttp, DisconnectAbortsAndFreesKvBlocks) {
  ASSERT_TRUE(testing::wait_for([&] { return h_->client().num_unfinished() == 0; }));
  const double aborted_before =
      h_->metric("vllm:request_success_total", "finished_reason=\"abort\"");
  // One step (the prefill and first token), then the engine holds: the request stays running,
  // with its KV blocks, until the client goes away.
  testing::StepHold hold(h_->client(), 1);
  const int64_t steps_before = h_->client().steps_run();
  int fd = testing::connect_raw(h_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(testing::send_all(
      fd, testing::http_post_text("/v1/completions",
                                  R"({"prompt": [256, 72], "max_tokens": 480, "stream": true,
                                      "ignore_eos": true, "temperature": 0})")));
  std::string got = testing::read_until(
      fd, [](const std::string& b) { return b.find("data: {") != std::string::npos; });
  ASSERT_NE(got.find("200"), std::string::npos) << got;
  // The engine publishes its stats after each step, a moment after the chunks.
  ASSERT_TRUE(testing::wait_for([&] {
    return h_->metric("vllm:num_requests_running") == 1 &&
           h_->metric("strata:kv_cache_blocks", "state=\"referenced\"") > 0;
  }));
  ::close(fd);
  ASSERT_TRUE(testing::wait_for([&] {
    return h_->metric("vllm:num_requests_running") == 0 &&
           h_->metric("strata:kv_cache_blocks", "state=\"referenced\"") == 0;
  }));
  // Freed by the abort itself: the engine is still held and ran no step after the first.
  EXPECT_EQ(h_->client().steps_run(), steps_before + 1);
  EXPECT_EQ(h_->metric("vllm:request_success_total", "finished_reason=\"abort\""),
            aborted_before + 1);
  // The pool is whole again: every block is free or cached-free.
  EXPECT_EQ(h_->metric("strata:kv_cache_blocks", "state=\"free\"") +
                h_->metric("strata:kv_cache_blocks", "state=\"cached_free\""),
            h_->metric("strata:kv_cache_blocks_total"));
}

TEST_F(ServerHttp, MetricsCountRequests) {
  const double ttft_before = h_->metric("vllm:time_to_first_token_seconds_count");
  const double e2e_before = h_->metric("vllm:e2e_request_latency_seconds_count");
  complete(*h_, R"(, "max_tokens": 5)");
  EXPECT_EQ(h_->metric("vllm:time_to_first_token_seconds_count"), ttft_before + 1);
  EXPECT_EQ(h_->metric("vllm:e2e_request_latency_seconds_count"), e2e_before + 1);
  EXPECT_GE(h_->metric("vllm:inter_token_latency_seconds_count"), 4);
  // Engine counters are published after each step, a moment after the response.
  EXPECT_TRUE(testing::wait_for([&] { return h_->metric("vllm:generation_tokens_total") >= 5; }));
  auto r = h_->get("/metrics");
  EXPECT_EQ(r.headers.get_or("Content-Type", "").rfind("text/plain; version=0.0.4", 0), 0u);
}

// Servers with their own configuration.

TEST(ServerHttpConfig, ApiKey) {
  ServerConfig c = testing::local_server_config();
  c.api_key = "sekret";
  ServerHarness h(testing::tiny_engine_config(), c);
  ASSERT_TRUE(h.ok());
  const std::string body = R"({"prompt": [256, 72], "max_tokens": 2})";
  auto r = h.post("/v1/completions", body);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(testing::parse(r.body)["error"]["type"], "AuthenticationError");
  EXPECT_EQ(h.post("/v1/completions", body, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(h.post("/v1/completions", body, {{"Authorization", "Bearer sekre"}}).status, 401);
  EXPECT_EQ(h.post("/v1/completions", body, {{"Authorization", "sekret"}}).status, 401);
  EXPECT_EQ(h.post("/v1/completions", body, {{"Authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(h.request("GET", "/v1/models").status, 401);
  EXPECT_EQ(h.get("/health").status, 200);  // only /v1 routes need the key
  EXPECT_EQ(h.get("/metrics").status, 200);
}

// --tokenizer-mode deepseek_v4 on the tiny model: /tokenize with messages gives the ids of the
// encoder's prompt string (tokenized without added special tokens), chat completions run on it,
// and a malformed tool call in the history is a 400.
TEST(ServerHttpConfig, DeepseekV4TokenizerMode) {
  ServerConfig c = testing::local_server_config();
  c.tokenizer_mode = "deepseek_v4";
  ServerHarness h(testing::tiny_engine_config(), c);
  ASSERT_TRUE(h.ok());
  const std::string messages =
      R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
          {"role": "user", "content": "More"}])";
  auto r = h.post("/tokenize", R"({"messages": )" + messages + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string prompt =
      "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>Yo<｜end▁of▁sentence｜>"
      "<｜User｜>More<｜Assistant｜><think>";
  Json want_body;
  want_body["prompt"] = prompt;
  want_body["add_special_tokens"] = false;
  auto want = h.post("/tokenize", want_body.dump());
  ASSERT_EQ(want.status, 200) << want.body;
  EXPECT_EQ(testing::parse(r.body)["tokens"], testing::parse(want.body)["tokens"]);
  EXPECT_GT(testing::parse(r.body)["count"].get<int>(), 10);

  r = h.post("/v1/chat/completions",
             R"({"messages": )" + messages + R"(, "max_tokens": 2, "temperature": 0})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json body = testing::parse(r.body);
  EXPECT_EQ(body["usage"]["prompt_tokens"], testing::parse(want.body)["count"]);

  r = h.post("/v1/chat/completions",
             R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]})");
  EXPECT_EQ(r.status, 400) << r.body;
  Json err = testing::parse(r.body)["error"];
  EXPECT_EQ(err["param"], "messages");
  EXPECT_NE(err["message"].get<std::string>().find("tool_calls[0]"), std::string::npos) << r.body;
}

TEST(ServerHttpConfig, BodyOverTheLimitIs413) {
  ServerConfig c = testing::local_server_config();
  c.max_request_body_bytes = 4096;
  ServerHarness h(testing::tiny_engine_config(), c);
  ASSERT_TRUE(h.ok());
  auto r = h.post("/v1/completions", R"({"prompt": ")" + std::string(5000, 'a') + R"("})");
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(testing::parse(r.body)["error"]["code"], 413);
  EXPECT_EQ(h.post("/v1/completions", R"({"prompt": [256, 72], "max_tokens": 2})").status, 200);
}

TEST(ServerHttpConfig, QueueFullIs503WithRetryAfter) {
  ServerConfig c = testing::local_server_config();
  c.max_queued_requests = 1;
  engine::EngineConfig e = testing::tiny_engine_config();
  e.scheduler.max_num_seqs = 1;
  ServerHarness h(e, c);
  ASSERT_TRUE(h.ok());
  // The engine runs one step and holds: request a runs (its first token), b waits behind it.
  testing::StepHold hold(h.client(), 1);
  const std::string long_body =
      R"({"prompt": [256, 72], "max_tokens": 400, "stream": true, "ignore_eos": true})";
  int a = testing::connect_raw(h.port());
  ASSERT_TRUE(testing::send_all(a, testing::http_post_text("/v1/completions", long_body)));
  ASSERT_TRUE(testing::wait_for([&] { return h.metric("vllm:num_requests_running") == 1; }));
  int b = testing::connect_raw(h.port());
  ASSERT_TRUE(testing::send_all(b, testing::http_post_text("/v1/completions", long_body)));
  ASSERT_TRUE(testing::wait_for(
      [&] { return h.client().num_unfinished() == 2 && h.client().stats().num_waiting == 1; }));
  auto r = h.post("/v1/completions", R"({"prompt": [256, 72], "max_tokens": 2})");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers.get_or("Retry-After", ""), "1");
  const std::string message = testing::parse(r.body)["error"]["message"];
  EXPECT_NE(message.find("--max-queued-requests"), std::string::npos) << message;
  EXPECT_NE(message.find("1 requests are waiting"), std::string::npos) << message;
  EXPECT_EQ(h.metric("strata:requests_rejected_total", "reason=\"queue_full\""), 1);
  ::close(a);
  ::close(b);
  // Both aborts are taken while the engine is still held.
  ASSERT_TRUE(testing::wait_for([&] { return h.client().num_unfinished() == 0; }));
  hold.release();
  EXPECT_EQ(h.post("/v1/completions", R"({"prompt": [256, 72], "max_tokens": 2})").status, 200);
  EXPECT_EQ(h.metric("strata:requests_rejected_total", "reason=\"queue_full\""), 1);
}

TEST(ServerHttpConfig, RequestTimeout) {
  ServerConfig c = testing::local_server_config();
  c.request_timeout = 0.2;
  ServerHarness h(testing::tiny_engine_config(), c);
  ASSERT_TRUE(h.ok());
  // One step, then the engine holds: the request runs (and holds KV blocks) past the timeout.
  testing::StepHold hold(h.client(), 1);
  const double t0 = now_seconds();
  auto r =
      h.post("/v1/completions", R"({"prompt": [256, 72], "max_tokens": 480, "ignore_eos": true})");
  EXPECT_EQ(r.status, 408);
  EXPECT_GE(now_seconds() - t0, 0.2);
  EXPECT_NE(testing::parse(r.body)["error"]["message"].get<std::string>().find("--request-timeout"),
            std::string::npos);
  ASSERT_TRUE(testing::wait_for([&] { return h.client().num_unfinished() == 0; }));
  EXPECT_TRUE(testing::wait_for(
      [&] { return h.metric("strata:kv_cache_blocks", "state=\"referenced\"") == 0; }));
  EXPECT_EQ(h.metric("vllm:request_success_total", "finished_reason=\"abort\""), 1);
  EXPECT_LE(h.client().steps_run(), 1);  // aborted while held
}

TEST(ServerHttpConfig, ShutdownAbortsStreamsWithAnErrorEvent) {
  ServerConfig c = testing::local_server_config();
  c.shutdown_timeout = 0.2;
  ServerHarness h(testing::tiny_engine_config(), c);
  ASSERT_TRUE(h.ok());
  // One step (the first token), then the engine holds: the stream outlives the drain period.
  testing::StepHold hold(h.client(), 1);
  int fd = testing::connect_raw(h.port());
  ASSERT_TRUE(testing::send_all(
      fd, testing::http_post_text("/v1/completions",
                                  R"({"prompt": [256, 72], "max_tokens": 480, "stream": true,
                                      "ignore_eos": true})")));
  std::string first = testing::read_until(
      fd, [](const std::string& b) { return b.find("data: {") != std::string::npos; });
  ASSERT_NE(first.find("data: {"), std::string::npos) << first;
  const double t0 = now_seconds();
  h.shutdown();
  std::string rest = testing::read_until(
      fd, [](const std::string& b) { return b.find("[DONE]") != std::string::npos; });
  ::close(fd);
  EXPECT_GE(now_seconds() - t0, 0.2);  // aborted at the end of the drain period, not before
  EXPECT_NE(rest.find("\"error\""), std::string::npos) << rest;
  EXPECT_NE(rest.find("shutting down"), std::string::npos) << rest;
  EXPECT_NE(rest.find("aborted after 1 generated tokens"), std::string::npos) << rest;
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos);
  EXPECT_TRUE(h.wait_shutdown(120));
  EXPECT_LT(testing::connect_raw(h.port()), 0);  // no longer accepting
}

TEST(ServerHttpConfig, ShutdownLetsShortRequestsFinish) {
  ServerConfig c = testing::local_server_config();
  c.shutdown_timeout = 600;
  ServerHarness h(testing::tiny_engine_config(), c);
  ASSERT_TRUE(h.ok());
  // Held after one step, so the request is surely still running when the shutdown starts.
  testing::StepHold hold(h.client(), 1);
  int fd = testing::connect_raw(h.port());
  ASSERT_TRUE(testing::send_all(
      fd, testing::http_post_text("/v1/completions",
                                  R"({"prompt": [256, 72], "max_tokens": 40, "stream": true,
                                      "ignore_eos": true})")));
  testing::read_until(fd,
                      [](const std::string& b) { return b.find("data: {") != std::string::npos; });
  h.shutdown();
  // Once the server refuses new connections the shutdown has begun: let the request go.
  ASSERT_TRUE(testing::wait_for([&] {
    int probe = testing::connect_raw(h.port());
    if (probe >= 0) ::close(probe);
    return probe < 0;
  }));
  hold.release();
  std::string rest = testing::read_until(
      fd, [](const std::string& b) { return b.find("[DONE]") != std::string::npos; });
  ::close(fd);
  EXPECT_EQ(rest.find("\"error\""), std::string::npos) << rest;
  EXPECT_NE(rest.find("\"finish_reason\":\"length\""), std::string::npos) << rest;
  EXPECT_TRUE(h.wait_shutdown(120));
}

// Tools and reasoning through the whole server. The dummy model cannot call tools, so what is
// checked is the plumbing: 400s for what vLLM refuses, tools accepted with the flags, and the
// reasoning parser moving the (same greedy) output into reasoning, streamed and not.
const char* kChatTools = R"("tools": [{"type": "function", "function": {"name": "f",
  "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}])";

TEST_F(ServerHttp, AutoToolChoiceNeedsTheServerFlags) {
  auto r = h_->post(
      "/v1/chat/completions",
      std::string(R"({"messages": [{"role": "user", "content": "Hi"}], )") + kChatTools + "}");
  ASSERT_EQ(r.status, 400) << r.body;
  Json e = testing::parse(r.body)["error"];
  EXPECT_EQ(e["param"], "tool_choice");
  EXPECT_NE(e["message"].get<std::string>().find(
                "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser"),
            std::string::npos)
      << r.body;
  r = h_->post(
      "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function"}]})");
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(testing::parse(r.body)["error"]["param"], "tools");
}

TEST(ServerHttpTools, ParsersRunOnTheOutput) {
  const std::string chat = R"("messages": [{"role": "user", "content": "Hi"}], "max_tokens": 12,
                              "temperature": 0, "ignore_eos": true)";
  std::string plain;
  {
    ServerHarness h(testing::tiny_engine_config(), testing::local_server_config());
    ASSERT_TRUE(h.ok());
    auto r = h.post("/v1/chat/completions", "{" + chat + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    plain = testing::parse(r.body)["choices"][0]["message"]["content"];
  }
  ASSERT_FALSE(plain.empty());
  ServerConfig c = testing::local_server_config();
  c.enable_auto_tool_choice = true;
  c.tool_call_parser = "hermes";
  c.reasoning_parser = "deepseek_r1";  // all text before </think> is reasoning
  ServerHarness h(testing::tiny_engine_config(), c);
  ASSERT_TRUE(h.ok());
  for (const std::string& extra : {std::string(""), std::string(", ") + kChatTools}) {
    auto r = h.post("/v1/chat/completions", "{" + chat + extra + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    Json j = testing::parse(r.body);
    const Json& m = j["choices"][0]["message"];
    EXPECT_EQ(m["reasoning"], plain) << extra;
    EXPECT_EQ(m["reasoning_content"], plain);
    EXPECT_TRUE(m["content"].is_null()) << r.body;
    EXPECT_TRUE(m["tool_calls"].empty());
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
    r = h.post("/v1/chat/completions", "{" + chat + extra + R"(, "stream": true})");
    ASSERT_EQ(r.status, 200);
    auto data = testing::sse_data(r.body);
    ASSERT_EQ(data.back(), "[DONE]");
    std::string reasoning, reasoning_content, content, finish;
    for (size_t i = 0; i + 1 < data.size(); ++i) {
      Json ch = testing::parse(data[i])["choices"][0];
      const Json& d = ch["delta"];
      if (d.contains("reasoning")) reasoning += d["reasoning"].get<std::string>();
      if (d.contains("reasoning_content"))
        reasoning_content += d["reasoning_content"].get<std::string>();
      if (d.contains("content")) content += d["content"].get<std::string>();
      EXPECT_FALSE(d.contains("tool_calls"));
      if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
    }
    EXPECT_EQ(reasoning, plain) << extra;
    EXPECT_EQ(reasoning_content, plain);
    EXPECT_EQ(content, "");  // only the opening role chunk's empty content
    EXPECT_EQ(finish, "length");
  }
}

}  // namespace
}  // namespace strata::server
