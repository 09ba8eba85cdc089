#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "sampling/reference_sampler.h"

namespace strata::sampling {
namespace {

constexpr int64_t kVocab = 64;

// Deterministic pseudo-logits for (request, step): a smooth distribution with a clear head.
std::vector<float> step_logits(int request, int step, int64_t vocab = kVocab) {
  Rng rng(1000 * request + step);
  std::vector<float> x(vocab);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  return x;
}

struct Req {
  SamplingParams params;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;
  std::optional<Rng> generator;
  int id = 0;
};

Req make_req(int id, SamplingParams p) {
  Req r;
  r.id = id;
  r.params = std::move(p);
  r.prompt = {1, 2, 3};
  r.generator = make_generator(r.params);
  return r;
}

// Runs `steps` steps over `order` (indices into reqs, one row each) and appends tokens.
void run_steps(Sampler& sampler, std::vector<Req>& reqs, const std::vector<int>& order, int steps) {
  for (int step = 0; step < steps; ++step) {
    std::vector<float> logits;
    std::vector<SamplingRow> rows;
    for (int i : order) {
      Req& r = reqs[i];
      const auto x = step_logits(r.id, static_cast<int>(r.output.size()));
      logits.insert(logits.end(), x.begin(), x.end());
      rows.push_back({&r.params, r.prompt, r.output, r.generator ? &*r.generator : nullptr});
    }
    std::vector<SampleOutput> out(rows.size());
    sampler.sample(logits.data(), rows, out);
    for (size_t k = 0; k < order.size(); ++k) reqs[order[k]].output.push_back(out[k].token_id);
  }
}

SamplingParams random_params(std::optional<int64_t> seed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.95f;
  p.seed = seed;
  return p;
}

TEST(SamplerTest, GreedyPicksArgmaxWithTiesToLowestId) {
  Sampler sampler({.vocab_size = 5});
  SamplingParams p;
  p.temperature = 0.0f;
  const std::vector<float> x = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  SamplingRow row{&p};
  SampleOutput out;
  sampler.sample(x.data(), {&row, 1}, {&out, 1});
  EXPECT_EQ(out.token_id, 1);
  EXPECT_FALSE(out.has_logprobs);
}

TEST(SamplerTest, TokenMaskRestrictsTheRowAndItsLogprobs) {
  constexpr int64_t kV = 130;  // three mask words, the last partial
  Sampler sampler({.vocab_size = kV});
  const auto x = step_logits(5, 0, kV);
  std::vector<uint64_t> mask(3, 0);
  const std::vector<int32_t> allowed = {3, 64, 77, 129};
  for (int32_t id : allowed) mask[id / 64] |= uint64_t{1} << (id % 64);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.logprobs = 5;
  SamplingParams random = random_params(17);
  random.logprobs = 5;
  for (const SamplingParams* p : {&greedy, &random}) {
    Rng gen(17);
    SamplingRow masked{p, {}, {}, &gen};
    masked.allowed_tokens = mask.data();
    SampleOutput out;
    sampler.sample(x.data(), {&masked, 1}, {&out, 1});
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), out.token_id), allowed.end());
    if (p == &greedy) {
      int32_t best = allowed[0];
      for (int32_t id : allowed) best = x[id] > x[best] ? id : best;
      EXPECT_EQ(out.token_id, best);
    }
    // Logprobs are those of the masked row: the allowed tokens share all the probability.
    int finite = 0;
    for (const auto& alt : out.logprobs.top) finite += std::isfinite(alt.logprob) ? 1 : 0;
    EXPECT_EQ(finite, 4);
    double total = 0;
    for (const auto& alt : out.logprobs.top)
      total += std::isfinite(alt.logprob) ? std::exp(alt.logprob) : 0.0;
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
  // The same row unmasked is the plain argmax.
  SamplingRow plain{&greedy};
  SampleOutput out;
  sampler.sample(x.data(), {&plain, 1}, {&out, 1});
  EXPECT_EQ(out.token_id, std::max_element(x.begin(), x.end()) - x.begin());
}

TEST(SamplerTest, GreedyUsesProcessedLogits) {
  Sampler sampler({.vocab_size = 4, .eos_token_ids = {3}});
  const std::vector<float> x = {1.0f, 2.0f, 0.0f, 5.0f};
  SampleOutput out;

  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;  // EOS (3) is masked: one output so far
  std::vector<int32_t> output = {0};
  SamplingRow row{&p, {}, output};
  sampler.sample(x.data(), {&row, 1}, {&out, 1});
  EXPECT_EQ(out.token_id, 1);
  output.push_back(0);  // min_tokens reached: EOS is allowed again
  row.output_token_ids = output;
  sampler.sample(x.data(), {&row, 1}, {&out, 1});
  EXPECT_EQ(out.token_id, 3);

  // Repetition penalty 3 on a repeated 3: 5 / 3 = 1.67 < 2 -> token 1.
  SamplingParams q;
  q.temperature = 0.0f;
  q.repetition_penalty = 3.0f;
  std::vector<int32_t> prompt = {3};
  SamplingRow row2{&q, prompt, {}};
  sampler.sample(x.data(), {&row2, 1}, {&out, 1});
  EXPECT_EQ(out.token_id, 1);

  // Logit bias lifts token 2 above everything.
  SamplingParams b;
  b.temperature = 0.0f;
  b.logit_bias = {{2, 6.0f}};
  SamplingRow row3{&b};
  sampler.sample(x.data(), {&row3, 1}, {&out, 1});
  EXPECT_EQ(out.token_id, 2);
}

TEST(SamplerTest, SeededRequestIsIndependentOfBatchOrderAndThreads) {
  const int kSteps = 30;
  // Alone.
  std::vector<Req> alone = {make_req(7, random_params(1234))};
  Sampler s1({.vocab_size = kVocab, .seed = 0});
  run_steps(s1, alone, {0}, kSteps);

  // With unseeded and other seeded neighbours, in the middle of the batch.
  std::vector<Req> mixed = {make_req(1, random_params(std::nullopt)),
                            make_req(7, random_params(1234)), make_req(2, random_params(99)),
                            make_req(3, random_params(std::nullopt))};
  Sampler s2({.vocab_size = kVocab, .seed = 5});
  run_steps(s2, mixed, {0, 1, 2, 3}, kSteps);

  // Last in a reversed batch, split over two threads.
  ThreadPool pool(2);
  std::vector<Req> reversed = {make_req(3, random_params(std::nullopt)),
                               make_req(2, random_params(99)), make_req(7, random_params(1234))};
  Sampler s3({.vocab_size = kVocab, .seed = 77, .pool = &pool});
  run_steps(s3, reversed, {1, 0, 2}, kSteps);

  EXPECT_EQ(alone[0].output, mixed[1].output);
  EXPECT_EQ(alone[0].output, reversed[2].output);
  EXPECT_EQ(mixed[2].output, reversed[1].output);  // the other seeded request too

  // A different seed gives a different sequence (30 draws from a spread-out distribution).
  std::vector<Req> other = {make_req(7, random_params(4321))};
  Sampler s4({.vocab_size = kVocab});
  run_steps(s4, other, {0}, kSteps);
  EXPECT_NE(alone[0].output, other[0].output);
}

TEST(SamplerTest, UnseededRowsFollowTheEngineSeed) {
  auto run = [](uint64_t engine_seed) {
    std::vector<Req> reqs = {make_req(1, random_params(std::nullopt)),
                             make_req(2, random_params(std::nullopt))};
    Sampler s({.vocab_size = kVocab, .seed = engine_seed});
    run_steps(s, reqs, {0, 1}, 20);
    return reqs[0].output;
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

TEST(SamplerTest, EachRandomRowConsumesOneDrawGreedyNone) {
  SamplingParams p = random_params(8);
  SamplingParams g;
  g.temperature = 0.0f;
  g.seed = 8;
  Rng gen = *make_generator(p), gen_greedy = *make_generator(g);
  Rng expect_gen = gen, expect_greedy = gen_greedy;
  expect_gen.uniform();
  std::vector<float> x = step_logits(1, 0);
  const std::vector<float> second = step_logits(2, 0);
  x.insert(x.end(), second.begin(), second.end());
  Sampler s({.vocab_size = kVocab});
  SamplingRow rows[2] = {{&p, {}, {}, &gen}, {&g, {}, {}, &gen_greedy}};
  SampleOutput out[2];
  s.sample(x.data(), rows, out);
  EXPECT_EQ(gen.next_u64(), expect_gen.next_u64());
  EXPECT_EQ(gen_greedy.next_u64(), expect_greedy.next_u64());
}

// The whole pipeline against the plain reference: processors, filters and the draw, with the
// uniform the sampler consumed, on a large vocabulary, with and without threads.
TEST(SamplerTest, MatchesReferencePipeline) {
  const int64_t vocab = 32000;
  const std::vector<int32_t> eos = {2};
  Rng rng(31);
  std::vector<SamplingParams> params(6);
  params[0].temperature = 0.8f;
  params[1].temperature = 0.0f;
  params[1].repetition_penalty = 1.3f;
  params[2].top_k = 40;
  params[2].presence_penalty = 0.7f;
  params[2].frequency_penalty = 0.3f;
  params[3].top_p = 0.9f;
  params[3].min_tokens = 5;
  params[3].stop_token_ids = {9};
  params[4].min_p = 0.02f;
  params[4].logit_bias = {{5, 3.0f}, {6, -100.0f}};
  params[5].temperature = 1.2f;
  params[5].top_k = 100;
  params[5].top_p = 0.8f;
  params[5].min_p = 0.01f;
  params[5].repetition_penalty = 0.8f;
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].seed = 100 + static_cast<int64_t>(i);
    params[i].logprobs = 3;
  }
  std::vector<std::vector<int32_t>> prompts(params.size()), outputs(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    for (int k = 0; k < 50; ++k) prompts[i].push_back(static_cast<int32_t>(rng.below(vocab)));
    for (int k = 0; k < 3; ++k) outputs[i].push_back(static_cast<int32_t>(rng.below(vocab)));
  }
  std::vector<float> logits(params.size() * vocab);
  for (auto& v : logits) v = static_cast<float>(rng.normal() * 2.5);

  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    Sampler sampler({.vocab_size = vocab, .eos_token_ids = eos, .pool = p});
    std::vector<Rng> gens, ref_gens;
    for (const auto& sp : params) gens.push_back(*make_generator(sp));
    ref_gens = gens;
    std::vector<SamplingRow> rows;
    for (size_t i = 0; i < params.size(); ++i) {
      rows.push_back({&params[i], prompts[i], outputs[i], &gens[i]});
    }
    const std::vector<float> before = logits;
    std::vector<SampleOutput> out(rows.size());
    sampler.sample(logits.data(), rows, out);
    EXPECT_EQ(logits, before) << "the sampler must not modify its input";
    for (size_t i = 0; i < params.size(); ++i) {
      std::span<const float> raw(logits.data() + i * vocab, vocab);
      const auto processed = reference::process_logits(raw, params[i], eos, prompts[i], outputs[i]);
      int32_t expected;
      if (params[i].is_greedy()) {
        expected = reference::argmax(processed);
      } else {
        const FilterParams f{params[i].temperature, params[i].top_k, params[i].top_p,
                             params[i].min_p};
        expected = reference::pick(reference::probabilities(processed, f), ref_gens[i].uniform());
      }
      EXPECT_EQ(out[i].token_id, expected) << "row " << i;
      // Logprobs are raw: computed before bias, penalties and temperature.
      const TokenLogprobs ref = reference::logprobs(raw, out[i].token_id, 3);
      ASSERT_TRUE(out[i].has_logprobs);
      EXPECT_NEAR(out[i].logprobs.chosen.logprob, ref.chosen.logprob, 2e-5);
      EXPECT_EQ(out[i].logprobs.chosen.rank, ref.chosen.rank);
      ASSERT_EQ(out[i].logprobs.top.size(), 3u);
      for (int j = 0; j < 3; ++j) EXPECT_EQ(out[i].logprobs.top[j].token_id, ref.top[j].token_id);
    }
  }
}

TEST(SamplerTest, LogprobsAreRawEvenWhenBiasDecides) {
  Sampler sampler({.vocab_size = 4});
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 0.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{0, 50.0f}};
  p.logprobs = 1;
  SamplingRow row{&p};
  SampleOutput out;
  sampler.sample(x.data(), {&row, 1}, {&out, 1});
  EXPECT_EQ(out.token_id, 0);
  EXPECT_NEAR(out.logprobs.chosen.logprob, 1.0 - 3.4401896985611953, 1e-6);
  EXPECT_EQ(out.logprobs.chosen.rank, 3);
  ASSERT_EQ(out.logprobs.top.size(), 1u);
  EXPECT_EQ(out.logprobs.top[0].token_id, 2);
}

TEST(SamplerTest, PromptLogprobsPerPosition) {
  ThreadPool pool(2);
  Sampler sampler({.vocab_size = 4, .pool = &pool});
  // Three positions; the targets are the prompt tokens that follow each one.
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, 0.0f,   // position 0
                                     0.0f, 0.0f, 0.0f, 0.0f,   // position 1: uniform
                                     5.0f, 1.0f, 1.0f, 1.0f};  // position 2
  const std::vector<int32_t> targets = {2, 3, 1};
  std::vector<TokenLogprobs> out(3);
  sampler.prompt_logprobs(logits.data(), targets, 2, out);
  EXPECT_NEAR(out[0].chosen.logprob, 3.0 - 3.4401896985611953, 1e-6);
  EXPECT_EQ(out[0].chosen.rank, 1);
  EXPECT_NEAR(out[1].chosen.logprob, std::log(0.25), 1e-6);
  EXPECT_EQ(out[1].chosen.rank, 4);
  EXPECT_EQ(out[1].top[0].token_id, 0);
  EXPECT_EQ(out[1].top[1].token_id, 1);
  EXPECT_NEAR(out[2].chosen.logprob, 1.0 - std::log(std::exp(5.0) + 3 * std::exp(1.0)), 1e-5);
  EXPECT_EQ(out[2].chosen.rank, 4);
}

}  // namespace
}  // namespace strata::sampling
