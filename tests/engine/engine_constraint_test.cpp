// Structured outputs in the engine, on stories260K's real weights and tokenizer: every choice's
// text is a sentence of its grammar (greedy, temperature 1, n > 1, seeds), the request ends on
// EOS once the grammar is done, and unconstrained requests in the same batch are unchanged.
#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "grammar/grammar.h"
#include "grammar/vocabulary.h"

namespace strata {
namespace {

class EngineConstraint : public ::testing::Test {
 protected:
  void SetUp() override {
    STRATA_REQUIRE_SHARED("models/stories260K-hf");
    auto cfg = testing::engine_config(testing::shared_data_path("models/stories260K-hf"), "auto",
                                      32 << 20);
    auto c = engine::EngineClient::create(cfg);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    client_ = std::move(*c);
    const auto& info = client_->info();
    vocab_ = grammar::make_token_vocabulary(*info.tokenizer, info.vocab_size, info.eos_token_ids);
  }

  std::shared_ptr<const grammar::CompiledGrammar> compile(const std::string& ebnf) {
    auto g = grammar::Grammar::parse_ebnf(ebnf);
    EXPECT_TRUE(g.ok()) << g.status().message();
    grammar_ = *g;
    return grammar::CompiledGrammar::compile(*g, vocab_);
  }

  engine::EngineRequest request(const std::string& id, const std::string& prompt,
                                std::shared_ptr<const grammar::CompiledGrammar> constraint,
                                float temperature, int n = 1, std::optional<int64_t> seed = {}) {
    engine::EngineRequest r;
    r.request_id = id;
    r.prompt_token_ids = *client_->info().tokenizer->encode(prompt);
    r.params.temperature = temperature;
    r.params.max_tokens = 200;
    r.params.n = n;
    r.params.seed = seed;
    r.constraint = std::move(constraint);
    return r;
  }

  std::unique_ptr<engine::EngineClient> client_;
  std::shared_ptr<const grammar::TokenVocabulary> vocab_;
  std::shared_ptr<const grammar::Grammar> grammar_;
};

// A small JSON-like language the model never writes by itself.
constexpr const char* kRecord = R"(
  root  ::= "{\"name\": \"" [A-Za-z ]{1,12} "\", \"age\": " [1-9] [0-9]? ", \"tags\": [" tags "]}"
  tags  ::= ( tag ( ", " tag ){0,3} )?
  tag   ::= "\"" [a-z]{1,6} "\""
)";

TEST_F(EngineConstraint, GreedyAndSampledOutputsAreSentencesOfTheGrammar) {
  auto g = compile(kRecord);
  for (float temperature : {0.0f, 1.0f}) {
    for (int i = 0; i < 3; ++i) {
      auto s =
          client_->submit(request("r" + std::to_string(i), "Once upon a time", g, temperature, 1,
                                  temperature > 0 ? std::optional<int64_t>(i) : std::nullopt));
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      auto out = testing::collect(**s);
      EXPECT_TRUE(grammar_->accepts(out[0].text)) << out[0].text;
      EXPECT_EQ(out[0].finish_reason, "stop") << out[0].text;
    }
  }
}

TEST_F(EngineConstraint, ChoicesAndSeedsKeepWorking) {
  auto g = compile(kRecord);
  auto first = testing::collect(**client_->submit(request("n1", "Lily", g, 1.0f, 4, 42)));
  auto again = testing::collect(**client_->submit(request("n2", "Lily", g, 1.0f, 4, 42)));
  ASSERT_EQ(first.size(), 4u);
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_TRUE(grammar_->accepts(first[i].text)) << first[i].text;
    EXPECT_EQ(first[i].tokens, again[i].tokens) << "same seed, same output";
  }
}

TEST_F(EngineConstraint, UnconstrainedRequestsInTheBatchAreUnchanged) {
  auto g = compile(R"(root ::= ("yes" | "no") "!")");
  auto alone = testing::collect(**client_->submit(request("u0", "The cat sat", nullptr, 0.0f)));
  std::vector<engine::EngineRequest> batch;
  batch.push_back(request("c1", "The dog", g, 0.0f));
  batch.push_back(request("u1", "The cat sat", nullptr, 0.0f));
  batch.push_back(request("c2", "Tom said", g, 1.0f, 1, 3));
  auto streams = testing::submit_together(*client_, std::move(batch));
  ASSERT_EQ(streams.size(), 3u);
  auto c1 = testing::collect(*streams[0]);
  auto u1 = testing::collect(*streams[1]);
  auto c2 = testing::collect(*streams[2]);
  EXPECT_EQ(u1[0].tokens, alone[0].tokens);
  for (const auto* c : {&c1, &c2}) {
    EXPECT_TRUE((*c)[0].text == "yes!" || (*c)[0].text == "no!") << (*c)[0].text;
    EXPECT_EQ((*c)[0].finish_reason, "stop");
  }
}

TEST_F(EngineConstraint, LogprobsSeeTheMask) {
  auto g = compile(R"(root ::= "yes" | "no")");
  auto r = request("lp", "Once", g, 1.0f, 1, 9);
  r.params.logprobs = 5;
  auto out = testing::collect(**client_->submit(std::move(r)));
  ASSERT_FALSE(out[0].logprobs.empty());
  // Only grammar tokens have finite logprobs at the first step.
  for (const auto& alt : out[0].logprobs[0].top) {
    if (alt.logprob > -1e30f) {
      std::string b = client_->info().tokenizer->token_bytes(alt.token_id);
      EXPECT_TRUE(grammar_->accepts_prefix(b)) << "'" << b << "'";
    }
  }
}

}  // namespace
}  // namespace strata
