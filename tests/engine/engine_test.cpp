// Engine behaviour on the repository's tiny model (dummy weights, byte-level tokenizer).
#include <gtest/gtest.h>

#include <cmath>

#include "core/clock.h"
#include "engine_test_util.h"

namespace strata {
namespace {

using testing::collect;
using testing::greedy_request;

engine::EngineConfig tiny_config(int64_t kv_bytes = 8 << 20) {
  auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy", kv_bytes);
  c.scheduler.max_model_len = 1024;
  c.seed = 3;
  return c;
}

std::unique_ptr<engine::EngineClient> make_client(const engine::EngineConfig& c) {
  auto client = engine::EngineClient::create(c);
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  return client.ok() ? std::move(client).value() : nullptr;
}

std::vector<int32_t> prompt(int n, int seed) {
  std::vector<int32_t> p = {256};
  for (int i = 1; i < n; ++i) p.push_back(static_cast<int32_t>((i * 31 + seed * 7) % 256));
  return p;
}

TEST(EngineTest, RejectsImpossibleRequestsWithClearErrors) {
  auto client = make_client(tiny_config());
  ASSERT_TRUE(client);
  auto too_long = client->submit(greedy_request("a", prompt(1024, 1), 4));
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(too_long.status().message().find("maximum context length is 1024"), std::string::npos);
  auto bad_token = client->submit(greedy_request("b", {1, 5000}, 4));
  ASSERT_FALSE(bad_token.ok());
  EXPECT_NE(bad_token.status().message().find("5000"), std::string::npos);
  auto r = greedy_request("c", prompt(8, 1), 4);
  r.params.top_p = 0;
  auto bad_param = client->submit(r);
  ASSERT_FALSE(bad_param.ok());
  EXPECT_NE(bad_param.status().message().find("top_p"), std::string::npos);
  auto empty = client->submit(greedy_request("d", {}, 4));
  EXPECT_FALSE(empty.ok());
  // The engine still serves normal requests.
  auto ok = client->submit(greedy_request("e", prompt(8, 1), 4));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(collect(**ok)[0].tokens.size(), 4u);
}

TEST(EngineTest, AbortFreesBlocksAtOnce) {
  auto client = make_client(tiny_config());
  ASSERT_TRUE(client);
  // One step (the prefill and first token), then the engine holds: the request is running with
  // its KV blocks whatever the machine's speed.
  client->set_step_limit(1);
  auto s = client->submit(greedy_request("long", prompt(64, 2), 900));
  ASSERT_TRUE(s.ok());
  auto first = (*s)->next();  // generation has started
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->token_ids.size(), 1u);
  // Stats are published after each step: wait for the one that produced the first token.
  ASSERT_TRUE(testing::wait_until([&] { return client->stats().kv_blocks_referenced > 0; }));
  EXPECT_EQ(client->stats().num_running, 1);
  client->abort("long");
  auto rest = collect(**s);
  EXPECT_EQ(rest[0].finish_reason, "abort");
  EXPECT_TRUE(rest[0].tokens.empty());
  ASSERT_TRUE(testing::wait_until([&] { return client->stats().kv_blocks_referenced == 0; }));
  EXPECT_EQ(client->stats().requests_finished_abort, 1);
  EXPECT_EQ(client->stats().num_running, 0);
  EXPECT_EQ(client->num_unfinished(), 0);
  EXPECT_EQ(client->steps_run(), 1);  // freed by the abort itself, with no further step
}

TEST(EngineTest, StepLimitHoldsRequestsUntilRaised) {
  auto client = make_client(tiny_config());
  ASSERT_TRUE(client);
  client->set_step_limit(0);
  auto s = client->submit(greedy_request("held", prompt(8, 3), 10));
  ASSERT_TRUE(s.ok());
  // Taken by the engine (queued in the scheduler) but not run.
  ASSERT_TRUE(testing::wait_until([&] { return client->stats().num_waiting == 1; }));
  EXPECT_EQ(client->steps_run(), 0);
  EXPECT_EQ(client->num_unfinished(), 1);
  bool done = true;
  EXPECT_TRUE((*s)->drain(&done).empty());
  EXPECT_FALSE(done);
  // Three steps: the prefill's token and two decode tokens, then held again.
  client->set_step_limit(3);
  std::vector<int32_t> tokens;
  while (tokens.size() < 3) {
    auto c = (*s)->next();
    ASSERT_TRUE(c.has_value());
    ASSERT_FALSE(c->finished);
    tokens.insert(tokens.end(), c->token_ids.begin(), c->token_ids.end());
  }
  EXPECT_EQ(tokens.size(), 3u);
  ASSERT_TRUE(testing::wait_until([&] { return client->stats().num_steps == 3; }));
  EXPECT_EQ(client->steps_run(), 3);
  EXPECT_EQ(client->stats().num_running, 1);
  EXPECT_EQ(client->stats().generation_tokens, 3);
  // Unlimited: the rest of the request runs, and its output is the same as without the hold.
  client->set_step_limit(-1);
  auto rest = collect(**s)[0];
  tokens.insert(tokens.end(), rest.tokens.begin(), rest.tokens.end());
  EXPECT_EQ(rest.finish_reason, "length");
  auto free_run = collect(**client->submit(greedy_request("free", prompt(8, 3), 10)))[0];
  EXPECT_EQ(tokens, free_run.tokens);
  // Stats are published after each step, a moment after its chunks.
  ASSERT_TRUE(testing::wait_until([&] { return client->stats().requests_finished_length == 2; }));
  EXPECT_EQ(client->steps_run(), 20);  // one step per token, one request at a time
}

TEST(EngineTest, ShutdownWhileHeldAbortsAfterTheGracePeriod) {
  auto client = make_client(tiny_config());
  ASSERT_TRUE(client);
  client->set_step_limit(1);
  auto s = client->submit(greedy_request("held", prompt(8, 3), 50));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->next().has_value());
  const double t0 = now_seconds();
  client->shutdown(0.2, unavailable("going away"));
  EXPECT_GE(now_seconds() - t0, 0.2);  // the held request had the whole grace period
  auto out = collect(**s)[0];
  EXPECT_EQ(out.finish_reason, "abort");
  EXPECT_NE(out.error.message().find("going away"), std::string::npos) << out.error.to_string();
  EXPECT_EQ(client->steps_run(), 1);
  EXPECT_EQ(client->num_unfinished(), 0);
}

TEST(EngineTest, SeededSamplingIsReproducibleAloneOrInABatch) {
  auto client = make_client(tiny_config());
  ASSERT_TRUE(client);
  auto seeded = [](const std::string& id) {
    auto r = greedy_request(id, prompt(20, 4), 24);
    r.params.temperature = 1.0f;
    r.params.top_p = 0.9f;
    r.params.seed = 1234;
    return r;
  };
  auto alone = collect(**client->submit(seeded("alone")))[0].tokens;
  // Submitted together, so the seeded request surely shares its steps with the others.
  std::vector<engine::EngineRequest> batch;
  for (int i = 0; i < 5; ++i) {
    auto r = greedy_request("o" + std::to_string(i), prompt(10 + i * 7, i), 30);
    r.params.temperature = 0.8f;
    batch.push_back(r);
  }
  batch.push_back(seeded("batched"));
  auto streams = testing::submit_together(*client, std::move(batch));
  ASSERT_EQ(streams.size(), 6u);
  auto batched = collect(*streams.back())[0].tokens;
  for (auto& o : streams) collect(*o);
  EXPECT_EQ(alone, batched);
  EXPECT_EQ(alone.size(), 24u);
}

TEST(EngineTest, NGreaterThanOneGivesNChoices) {
  auto client = make_client(tiny_config());
  ASSERT_TRUE(client);
  auto r = greedy_request("n", prompt(40, 5), 12);
  r.params.n = 3;
  r.params.temperature = 1.0f;
  r.params.seed = 9;
  auto out = collect(**client->submit(r));
  ASSERT_EQ(out.size(), 3u);
  for (const auto& c : out) {
    EXPECT_EQ(c.tokens.size(), 12u);
    EXPECT_EQ(c.finish_reason, "length");
  }
  EXPECT_TRUE(out[0].tokens != out[1].tokens || out[1].tokens != out[2].tokens)
      << "children of a seeded n>1 request get different seeds";
}

TEST(EngineTest, StopStringsTruncateTheOutputEvenAcrossChunks) {
  auto client = make_client(tiny_config());
  ASSERT_TRUE(client);
  auto base = collect(**client->submit(greedy_request("base", prompt(12, 6), 40)))[0];
  ASSERT_GE(base.text.size(), 8u);
  // A stop string made of the text's bytes 3..5 (spans several tokens: one byte per token).
  std::string stop = base.text.substr(3, 3);
  auto r = greedy_request("stop", prompt(12, 6), 40);
  r.params.stop = {stop};
  auto out = collect(**client->submit(r))[0];
  EXPECT_EQ(out.finish_reason, "stop");
  EXPECT_EQ(out.text, base.text.substr(0, base.text.find(stop)));
  EXPECT_EQ(out.text.find(stop), std::string::npos);
  r.request_id = "stop-incl";
  r.params.include_stop_str_in_output = true;
  auto incl = collect(**client->submit(r))[0];
  EXPECT_EQ(incl.text, base.text.substr(0, base.text.find(stop) + stop.size()));
}

TEST(EngineTest, LogprobsAndPromptLogprobs) {
  auto client = make_client(tiny_config());
  ASSERT_TRUE(client);
  auto r = greedy_request("lp", prompt(16, 7), 5);
  r.params.logprobs = 3;
  r.params.prompt_logprobs = 2;
  auto out = collect(**client->submit(r))[0];
  ASSERT_EQ(out.logprobs.size(), 5u);
  for (size_t i = 0; i < out.logprobs.size(); ++i) {
    const auto& lp = out.logprobs[i];
    EXPECT_EQ(lp.chosen.token_id, out.tokens[i]);
    EXPECT_EQ(lp.chosen.rank, 1) << "greedy picks the top token";
    EXPECT_LE(lp.chosen.logprob, 0.0f);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].token_id, lp.chosen.token_id);
    EXPECT_FLOAT_EQ(lp.top[0].logprob, lp.chosen.logprob);
  }
  ASSERT_EQ(out.prompt_logprobs.size(), 16u);
  EXPECT_FALSE(out.prompt_logprobs[0].has_value());
  for (size_t i = 1; i < 16; ++i) {
    ASSERT_TRUE(out.prompt_logprobs[i].has_value()) << i;
    EXPECT_EQ(out.prompt_logprobs[i]->chosen.token_id, prompt(16, 7)[i]);
    EXPECT_LE(out.prompt_logprobs[i]->chosen.logprob, 0.0f);
    EXPECT_EQ(out.prompt_logprobs[i]->top.size(), 2u);
  }
  // The same prompt again (prompt logprobs never come from the prefix cache): same values.
  r.request_id = "lp2";
  auto again = collect(**client->submit(r))[0];
  ASSERT_EQ(again.prompt_logprobs.size(), 16u);
  EXPECT_EQ(again.prompt_logprobs[9]->chosen.logprob, out.prompt_logprobs[9]->chosen.logprob);
}

TEST(EngineTest, GreedyOutputIndependentOfBatchingChunkingAndPreemption) {
  // Reference: each prompt alone with a roomy configuration.
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(prompt(20 + 37 * i, i));
  std::vector<std::vector<int32_t>> expected;
  {
    auto client = make_client(tiny_config());
    ASSERT_TRUE(client);
    for (size_t i = 0; i < prompts.size(); ++i)
      expected.push_back(
          collect(**client->submit(greedy_request(std::to_string(i), prompts[i], 40)))[0].tokens);
  }
  // All at once, budget 24 tokens per step, block size 8, a pool small enough to preempt.
  auto cfg = tiny_config(0);
  cfg.cache.block_size = 8;
  const int64_t per_token = 4 /*layers*/ * 2 * 4 /*kv heads*/ * 32 /*head dim*/ * 2 /*bf16*/;
  cfg.cache.kv_cache_memory_bytes = per_token * 400;
  cfg.scheduler.max_num_batched_tokens = 24;
  cfg.scheduler.max_model_len = 400;
  auto client = make_client(cfg);
  ASSERT_TRUE(client);
  std::vector<engine::EngineRequest> batch;
  for (size_t i = 0; i < prompts.size(); ++i)
    batch.push_back(greedy_request("b" + std::to_string(i), prompts[i], 40));
  auto streams = testing::submit_together(*client, std::move(batch));
  ASSERT_EQ(streams.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(collect(*streams[i])[0].tokens, expected[i]) << "prompt " << i;
  ASSERT_TRUE(testing::wait_idle(*client));
  EXPECT_EQ(client->stats().requests_finished_length, 6);
  EXPECT_GT(client->stats().num_preemptions, 0);
}

TEST(EngineTest, RefusesToStartWhenMaxModelLenCannotFit) {
  auto cfg = tiny_config(0);
  cfg.cache.kv_cache_memory_bytes = 1 << 16;  // a few dozen tokens
  auto client = engine::EngineClient::create(cfg);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("max_model_len 1024 needs"), std::string::npos)
      << client.status().message();
}

}  // namespace
}  // namespace strata
