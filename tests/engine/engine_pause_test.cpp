// Pausing requests (Engine::pause_request): a paused request gets no steps and keeps its KV,
// others run meanwhile, and it resumes with the output it would have had. (EngineClient::pause
// is exercised end to end by tests/server/server_backpressure_test.cpp.)
#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace strata {
namespace {

using testing::collect;
using testing::greedy_request;

engine::EngineConfig tiny_config() {
  auto c = testing::engine_config(testing::repo_path("models/strata-tiny"), "dummy", 8 << 20);
  c.scheduler.max_model_len = 1024;
  c.seed = 3;
  return c;
}

std::vector<int32_t> prompt(int n, int seed) {
  std::vector<int32_t> p = {256};
  for (int i = 1; i < n; ++i) p.push_back(static_cast<int32_t>((i * 31 + seed * 7) % 256));
  return p;
}

// Tokens of each choice taken from `s` so far (non-blocking).
void take(engine::RequestStream& s, std::vector<std::vector<int32_t>>* tokens, bool* done) {
  for (auto& c : s.drain(done))
    (*tokens)[c.index].insert((*tokens)[c.index].end(), c.token_ids.begin(), c.token_ids.end());
}

TEST(EnginePause, APausedRequestWaitsWithItsKvAndResumesWithTheSameOutput) {
  auto created = engine::Engine::create(tiny_config());
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  engine::Engine& e = **created;
  auto a = std::make_shared<engine::RequestStream>("a", 2);
  auto b = std::make_shared<engine::RequestStream>("b", 1);
  auto ra = greedy_request("a", prompt(40, 1), 30);
  ra.params.n = 2;
  ASSERT_TRUE(e.add_request(ra, a).ok());
  ASSERT_TRUE(e.add_request(greedy_request("b", prompt(20, 2), 12), b).ok());
  std::vector<std::vector<int32_t>> ta(2), tb(1);
  bool a_done = false, b_done = false;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(e.step().ok());
  take(*a, &ta, &a_done);
  ASSERT_FALSE(ta[0].empty());
  const size_t before = ta[0].size() + ta[1].size();

  e.pause_request("a");
  EXPECT_EQ(e.stats().num_paused, 2);  // both choices
  while (!b_done) {
    ASSERT_TRUE(e.step().ok());
    take(*b, &tb, &b_done);
  }
  EXPECT_EQ(tb[0].size(), 12u);
  take(*a, &ta, &a_done);
  EXPECT_EQ(ta[0].size() + ta[1].size(), before) << "a paused request produced tokens";
  EXPECT_FALSE(a_done);
  EXPECT_TRUE(e.has_unfinished_requests());
  EXPECT_FALSE(e.has_runnable_requests());
  EXPECT_GT(e.stats().kv_blocks_referenced, 0) << "a paused request keeps its KV";
  EXPECT_EQ(e.stats().num_preemptions, 0);

  e.resume_request("a");
  EXPECT_EQ(e.stats().num_paused, 0);
  while (!a_done) {
    ASSERT_TRUE(e.step().ok());
    take(*a, &ta, &a_done);
  }
  EXPECT_EQ(e.stats().kv_blocks_referenced, 0);

  // The same request never paused.
  auto fresh = engine::Engine::create(tiny_config());
  ASSERT_TRUE(fresh.ok());
  auto a2 = std::make_shared<engine::RequestStream>("a", 2);
  ASSERT_TRUE((*fresh)->add_request(ra, a2).ok());
  std::vector<std::vector<int32_t>> ref(2);
  bool ref_done = false;
  while (!ref_done) {
    ASSERT_TRUE((*fresh)->step().ok());
    take(*a2, &ref, &ref_done);
  }
  EXPECT_EQ(ta, ref);
  EXPECT_EQ(ta[0].size(), 30u);
}

TEST(EnginePause, AbortingAPausedRequestFreesItsKv) {
  auto created = engine::Engine::create(tiny_config());
  ASSERT_TRUE(created.ok());
  engine::Engine& e = **created;
  auto a = std::make_shared<engine::RequestStream>("a", 1);
  ASSERT_TRUE(e.add_request(greedy_request("a", prompt(64, 3), 100), a).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(e.step().ok());
  e.pause_request("a");
  ASSERT_TRUE(e.step().ok());
  EXPECT_GT(e.stats().kv_blocks_referenced, 0);
  e.abort_request("a");
  EXPECT_EQ(e.stats().kv_blocks_referenced, 0);
  EXPECT_EQ(e.stats().num_paused, 0);
  EXPECT_FALSE(e.has_unfinished_requests());
  auto out = collect(*a);
  EXPECT_EQ(out[0].finish_reason, "abort");
}

}  // namespace
}  // namespace strata
