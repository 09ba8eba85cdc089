#include "sched/scheduler_config.h"

#include <gtest/gtest.h>

#include "kv/cache_config.h"

namespace strata::sched {
namespace {

Result<SchedulerConfig> parse(std::vector<std::string> argv) {
  OptionSet o;
  add_scheduler_options(o);
  auto args = o.parse(argv);
  if (!args.ok()) return args.status();
  return scheduler_config_from_args(*args);
}

TEST(SchedulerConfigTest, DefaultsMatchVllm) {
  auto c = parse({});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->max_num_seqs, 256);
  EXPECT_EQ(c->max_num_batched_tokens, 2048);
  EXPECT_EQ(c->max_model_len, 0);  // from the model
  EXPECT_EQ(c->policy, SchedulingPolicy::kFcfs);
  EXPECT_EQ(c->long_prefill_token_threshold, 0);
  EXPECT_EQ(c->max_num_partial_prefills, 1);
  EXPECT_EQ(c->max_long_partial_prefills, 1);
  EXPECT_FALSE(c->validate().ok());  // max_model_len still to resolve
  ASSERT_TRUE(c->resolve_max_model_len(4096).ok());
  EXPECT_EQ(c->max_model_len, 4096);
  EXPECT_TRUE(c->validate().ok());
  EXPECT_EQ(c->effective_long_prefill_token_threshold(), 0);
}

TEST(SchedulerConfigTest, ParsesEveryOption) {
  auto c = parse({"--max-num-seqs", "8", "--max-num-batched-tokens=512", "--max-model-len", "4k",
                  "--scheduling-policy", "priority", "--long-prefill-token-threshold", "64",
                  "--max-num-partial-prefills", "3", "--max-long-partial-prefills", "2"});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->max_num_seqs, 8);
  EXPECT_EQ(c->max_num_batched_tokens, 512);
  EXPECT_EQ(c->max_model_len, 4000);
  EXPECT_EQ(c->policy, SchedulingPolicy::kPriority);
  EXPECT_EQ(c->effective_long_prefill_token_threshold(), 64);
  EXPECT_EQ(c->max_num_partial_prefills, 3);
  EXPECT_EQ(c->max_long_partial_prefills, 2);
  EXPECT_TRUE(c->validate().ok());
  // A model shorter than the request is refused.
  EXPECT_FALSE(c->resolve_max_model_len(2048).ok());
  EXPECT_TRUE(c->resolve_max_model_len(8192).ok());
}

TEST(SchedulerConfigTest, ModelLenSuffixes) {
  EXPECT_EQ(*parse_model_len("4096"), 4096);
  EXPECT_EQ(*parse_model_len("4K"), 4096);
  EXPECT_EQ(*parse_model_len("1m"), 1000000);
  EXPECT_EQ(*parse_model_len("1M"), 1048576);
  EXPECT_EQ(*parse_model_len("25.6k"), 25600);
  EXPECT_FALSE(parse_model_len("0").ok());
  EXPECT_FALSE(parse_model_len("4x").ok());
  EXPECT_FALSE(parse_model_len("1.5").ok());
  EXPECT_FALSE(parse_model_len("").ok());
}

TEST(SchedulerConfigTest, DerivedLongPrefillThreshold) {
  SchedulerConfig c{.max_model_len = 10000, .max_num_partial_prefills = 2};
  EXPECT_EQ(c.effective_long_prefill_token_threshold(), 400);  // 4% of max_model_len
}

TEST(SchedulerConfigTest, ErrorsNameTheOption) {
  auto expect_error = [](std::vector<std::string> argv, const std::string& what) {
    auto c = parse(argv);
    ASSERT_FALSE(c.ok()) << argv[0];
    EXPECT_NE(c.status().message().find(what), std::string::npos) << c.status().message();
  };
  expect_error({"--max-num-seqs", "0"}, "--max-num-seqs must be at least 1");
  expect_error({"--max-num-batched-tokens", "0"}, "--max-num-batched-tokens");
  expect_error({"--max-model-len", "-5"}, "--max-model-len");
  expect_error({"--scheduling-policy", "lifo"}, "--scheduling-policy must be fcfs or priority");
  expect_error({"--long-prefill-token-threshold", "-1"}, "--long-prefill-token-threshold");
  expect_error({"--max-num-partial-prefills", "0"}, "--max-num-partial-prefills");
  expect_error({"--max-long-partial-prefills", "2"}, "--max-long-partial-prefills must be between");
  expect_error({"--speculative-config", "ngram"}, "--speculative-config must be a JSON object");
  expect_error({"--speculative-config", R"({"method": "eagle", "num_speculative_tokens": 2})"},
               "not built yet");
}

TEST(SchedulerConfigTest, SpeculativeConfigFlag) {
  auto off = parse({});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->speculative.enabled());
  auto on = parse({"--speculative-config",
                   R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4})"});
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  EXPECT_TRUE(on->speculative.enabled());
  EXPECT_EQ(on->speculative.num_speculative_tokens, 3);
  EXPECT_EQ(on->speculative.prompt_lookup_max, 4);
  EXPECT_EQ(on->speculative.prompt_lookup_min, 4);
}

TEST(SchedulerConfigTest, OptionsCoexistWithTheCacheOptions) {
  OptionSet o;
  add_scheduler_options(o);
  kv::add_cache_options(o);
  auto args = o.parse({"--block-size", "32", "--max-num-seqs", "4"});
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(kv::cache_config_from_args(*args)->block_size, 32);
  EXPECT_EQ(scheduler_config_from_args(*args)->max_num_seqs, 4);
  EXPECT_NE(o.help_text().find("--enable-prefix-caching, --no-enable-prefix-caching"),
            std::string::npos);
}

}  // namespace
}  // namespace strata::sched
