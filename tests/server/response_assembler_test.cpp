// Response shapes: completion and chat bodies and streams, usage, n > 1 indexing, logprobs in
// both endpoints' formats, echo, stop_reason, errors in streams.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/json.h"
#include "net/sse.h"
#include "server/response_assembler.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {
namespace {

using engine::OutputChunk;

std::shared_ptr<const Tokenizer> tiny_tokenizer() {
  auto t = Tokenizer::load(strata::testing::repo_path("models/strata-tiny"));
  EXPECT_TRUE(t.ok());
  return t.ok() ? *t : nullptr;
}

GenerationRequest request(ApiKind kind, int n = 1, int prompts = 1) {
  GenerationRequest r;
  r.kind = kind;
  r.params.n = n;
  for (int i = 0; i < prompts; ++i) r.prompts.push_back({{256, 104, 105}, "hi"});
  return r;
}

ResponseContext context() {
  return {"cmpl-1", 1700000000, "tiny", tiny_tokenizer(), "assistant"};
}

OutputChunk chunk(int index, std::vector<int32_t> ids, std::string text, int64_t total,
                  const char* finish = nullptr) {
  OutputChunk c;
  c.index = index;
  c.token_ids = std::move(ids);
  c.text = std::move(text);
  c.num_prompt_tokens = 3;
  c.num_output_tokens = total;
  if (finish) {
    c.finished = true;
    c.finish_reason = finish;
  }
  return c;
}

sampling::TokenLogprobs lp(int32_t id, float v, std::vector<std::pair<int32_t, float>> top) {
  sampling::TokenLogprobs t;
  t.chosen = {id, v, 1};
  int rank = 1;
  for (auto [tid, tv] : top) t.top.push_back({tid, tv, rank++});
  return t;
}

std::vector<Json> events(const std::string& sse) {
  std::vector<Json> out;
  net::SseParser p;
  p.feed(sse, [&](const net::SseEvent& e) {
    if (e.data == "[DONE]")
      out.push_back("[DONE]");
    else
      out.push_back(Json::parse(e.data));
  });
  return out;
}

TEST(ResponseAssembler, CompletionBody) {
  ResponseAssembler a(request(ApiKind::kCompletion), context());
  a.add(0, chunk(0, {32}, " ", 1));
  OutputChunk last = chunk(0, {97}, "a", 2, "stop");
  last.stop_reason = std::string("b");
  a.add(0, last);
  ASSERT_TRUE(a.all_finished());
  Json j = Json::parse(a.final_body());
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["text"], " a");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][0]["stop_reason"], "b");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 2);
  EXPECT_EQ(j["usage"]["total_tokens"], 5);
}

TEST(ResponseAssembler, ChoicesAreNumberedPromptMajor) {
  ResponseAssembler a(request(ApiKind::kCompletion, /*n=*/2, /*prompts=*/2), context());
  a.add(1, chunk(1, {100}, "d", 1, "length"));
  a.add(0, chunk(0, {97}, "a", 1, "length"));
  a.add(1, chunk(0, {99}, "c", 1, "length"));
  EXPECT_FALSE(a.all_finished());
  OutputChunk stop = chunk(1, {98}, "b", 1, "stop");
  stop.stop_reason = int32_t{257};
  a.add(0, stop);
  ASSERT_TRUE(a.all_finished());
  Json j = Json::parse(a.final_body());
  ASSERT_EQ(j["choices"].size(), 4u);
  const char* texts[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(j["choices"][i]["index"], i);
    EXPECT_EQ(j["choices"][i]["text"], texts[i]);
  }
  EXPECT_EQ(j["choices"][1]["stop_reason"], 257);
  EXPECT_TRUE(j["choices"][0]["stop_reason"].is_null());
  EXPECT_EQ(j["usage"]["prompt_tokens"], 6);  // both prompts, once each
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
}

TEST(ResponseAssembler, CompletionStreamWithUsage) {
  GenerationRequest r = request(ApiKind::kCompletion);
  r.stream = true;
  r.include_usage = true;
  ResponseAssembler a(r, context());
  std::string sse = a.stream_begin();
  EXPECT_EQ(sse, "");
  sse += a.stream_chunk(0, chunk(0, {120}, "x", 1));
  sse += a.stream_chunk(0, chunk(0, {121}, "y", 2, "length"));
  sse += a.stream_end();
  auto ev = events(sse);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0]["object"], "text_completion");
  EXPECT_EQ(ev[0]["choices"][0]["text"], "x");
  EXPECT_TRUE(ev[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(ev[0].contains("usage"));
  EXPECT_TRUE(ev[0]["usage"].is_null());
  EXPECT_EQ(ev[1]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(ev[2]["choices"].empty());
  EXPECT_EQ(ev[2]["usage"]["completion_tokens"], 2);
  EXPECT_EQ(ev[2]["usage"]["total_tokens"], 5);
  EXPECT_EQ(ev[3], "[DONE]");
}

TEST(ResponseAssembler, StreamWithoutUsageHasNoUsageField) {
  GenerationRequest r = request(ApiKind::kCompletion);
  r.stream = true;
  ResponseAssembler a(r, context());
  std::string sse = a.stream_chunk(0, chunk(0, {120}, "x", 1, "length"));
  sse += a.stream_end();
  auto ev = events(sse);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_FALSE(ev[0].contains("usage"));
  EXPECT_EQ(ev[1], "[DONE]");
}

TEST(ResponseAssembler, ContinuousUsageStats) {
  GenerationRequest r = request(ApiKind::kCompletion);
  r.stream = true;
  r.include_usage = true;
  r.continuous_usage_stats = true;
  ResponseAssembler a(r, context());
  auto ev = events(a.stream_chunk(0, chunk(0, {120}, "x", 1)));
  EXPECT_EQ(ev[0]["usage"]["completion_tokens"], 1);
}

TEST(ResponseAssembler, ChatStreamStartsWithTheRole) {
  GenerationRequest r = request(ApiKind::kChat, /*n=*/2);
  r.stream = true;
  ResponseContext ctx = context();
  ctx.id = "chatcmpl-1";
  ResponseAssembler a(r, ctx);
  std::string sse = a.stream_begin();
  sse += a.stream_chunk(0, chunk(1, {104}, "h", 1));
  sse += a.stream_chunk(0, chunk(0, {105}, "i", 1, "length"));
  sse += a.stream_chunk(0, chunk(1, {257}, "", 2, "stop"));
  sse += a.stream_end();
  auto ev = events(sse);
  ASSERT_EQ(ev.size(), 6u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ev[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(ev[i]["id"], "chatcmpl-1");
    EXPECT_EQ(ev[i]["choices"][0]["index"], i);
    EXPECT_EQ(ev[i]["choices"][0]["delta"]["role"], "assistant");
    EXPECT_EQ(ev[i]["choices"][0]["delta"]["content"], "");
  }
  EXPECT_EQ(ev[2]["choices"][0]["index"], 1);
  EXPECT_EQ(ev[2]["choices"][0]["delta"]["content"], "h");
  EXPECT_FALSE(ev[2]["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(ev[3]["choices"][0]["delta"]["content"], "i");
  EXPECT_EQ(ev[3]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(ev[4]["choices"][0]["delta"].empty());  // the finishing chunk had no text
  EXPECT_EQ(ev[4]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(ev[5], "[DONE]");
}

TEST(ResponseAssembler, ChatBody) {
  GenerationRequest r = request(ApiKind::kChat);
  ResponseAssembler a(r, context());
  a.add(0, chunk(0, {104, 105}, "hi", 2, "stop"));
  Json j = Json::parse(a.final_body());
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hi");
  EXPECT_TRUE(j["choices"][0]["message"]["tool_calls"].empty());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 2);
}

TEST(ResponseAssembler, CompletionLogprobs) {
  GenerationRequest r = request(ApiKind::kCompletion);
  r.logprobs = 2;
  ResponseAssembler a(r, context());
  OutputChunk c1 = chunk(0, {104}, "h", 1);
  c1.logprobs.push_back(lp(104, -0.5f, {{105, -0.2f}, {104, -0.5f}}));
  OutputChunk c2 = chunk(0, {105}, "i", 2, "length");
  c2.logprobs.push_back(lp(105, -std::numeric_limits<float>::infinity(), {{97, -1.f}, {98, -2.f}}));
  a.add(0, c1);
  a.add(0, c2);
  Json j = Json::parse(a.final_body());
  const Json& l = j["choices"][0]["logprobs"];
  EXPECT_EQ(l["tokens"], Json({"h", "i"}));
  EXPECT_EQ(l["text_offset"], Json({0, 1}));
  EXPECT_DOUBLE_EQ(l["token_logprobs"][0].get<double>(), -0.5);
  EXPECT_DOUBLE_EQ(l["token_logprobs"][1].get<double>(), -9999.0);  // -inf
  // The chosen token first, then the alternatives: at most logprobs + 1 entries.
  EXPECT_EQ(l["top_logprobs"][0].size(), 2u);
  EXPECT_DOUBLE_EQ(l["top_logprobs"][0]["i"].get<double>(), -0.2);
  EXPECT_EQ(l["top_logprobs"][1].size(), 3u);
  EXPECT_DOUBLE_EQ(l["top_logprobs"][1]["a"].get<double>(), -1.0);
}

TEST(ResponseAssembler, EchoWithLogprobsStartsWithThePrompt) {
  GenerationRequest r = request(ApiKind::kCompletion, /*n=*/2);
  r.echo = true;
  r.logprobs = 0;
  r.params.prompt_logprobs = 0;
  r.stream = true;
  ResponseAssembler a(r, context());
  // Choice 1 arrives before choice 0, whose first chunk carries the prompt logprobs.
  OutputChunk c1 = chunk(1, {120}, "x", 1, "length");
  c1.logprobs.push_back(lp(120, -1.f, {}));
  EXPECT_EQ(a.stream_chunk(0, c1), "");
  OutputChunk c0 = chunk(0, {121}, "y", 1, "length");
  c0.logprobs.push_back(lp(121, -2.f, {}));
  c0.prompt_logprobs = {std::nullopt, lp(104, -3.f, {}), lp(105, -4.f, {})};
  std::string sse = a.stream_chunk(0, c0);
  sse += a.stream_end();
  auto ev = events(sse);
  ASSERT_EQ(ev.size(), 3u) << sse;
  for (int k = 0; k < 2; ++k) {
    const Json& ch = ev[k]["choices"][0];
    EXPECT_EQ(ch["index"], k);
    EXPECT_EQ(ch["text"], std::string("hi") + (k == 0 ? "y" : "x"));
    const Json& l = ch["logprobs"];
    EXPECT_EQ(l["tokens"], Json({"<|bos|>", "h", "i", k == 0 ? "y" : "x"}));
    EXPECT_TRUE(l["token_logprobs"][0].is_null());
    EXPECT_TRUE(l["top_logprobs"][0].is_null());
    EXPECT_DOUBLE_EQ(l["token_logprobs"][1].get<double>(), -3.0);
    EXPECT_EQ(l["text_offset"], Json({0, 7, 8, 9}));
  }
}

TEST(ResponseAssembler, ChatLogprobs) {
  GenerationRequest r = request(ApiKind::kChat);
  r.logprobs = 1;
  ResponseAssembler a(r, context());
  OutputChunk c = chunk(0, {104}, "h", 1, "length");
  c.logprobs.push_back(lp(104, -0.5f, {{105, -0.25f}, {104, -0.5f}}));
  a.add(0, c);
  Json j = Json::parse(a.final_body());
  const Json& e = j["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(e["token"], "h");
  EXPECT_DOUBLE_EQ(e["logprob"].get<double>(), -0.5);
  EXPECT_EQ(e["bytes"], Json({104}));
  ASSERT_EQ(e["top_logprobs"].size(), 1u);
  EXPECT_EQ(e["top_logprobs"][0]["token"], "i");
  EXPECT_EQ(e["top_logprobs"][0]["bytes"], Json({105}));
}

TEST(ResponseAssembler, TokensAsTokenIds) {
  GenerationRequest r = request(ApiKind::kCompletion);
  r.logprobs = 0;
  r.return_tokens_as_token_ids = true;
  ResponseAssembler a(r, context());
  OutputChunk c = chunk(0, {104}, "h", 1, "length");
  c.logprobs.push_back(lp(104, -0.5f, {}));
  a.add(0, c);
  Json j = Json::parse(a.final_body());
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"], Json({"token_id:104"}));
}

TEST(ResponseAssembler, ChatEcho) {
  GenerationRequest r = request(ApiKind::kChat);
  r.echo_text = "Once";
  ResponseAssembler a(r, context());
  a.add(0, chunk(0, {32}, " more", 1, "length"));
  EXPECT_EQ(Json::parse(a.final_body())["choices"][0]["message"]["content"], "Once more");
}

TEST(ResponseAssembler, StreamErrorEvent) {
  auto ev = events(ResponseAssembler::stream_error({503, "shutting down", ""}));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0]["error"]["message"], "shutting down");
  EXPECT_EQ(ev[0]["error"]["type"], "ServiceUnavailableError");
  EXPECT_EQ(ev[0]["error"]["code"], 503);
  EXPECT_TRUE(ev[0]["error"]["param"].is_null());
  EXPECT_EQ(ev[1], "[DONE]");
}

}  // namespace
}  // namespace strata::server
