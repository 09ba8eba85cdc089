#include "sampling/sampler.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/check.h"

namespace strata::sampling {

struct Sampler::Scratch {
  std::vector<float> masked;  // [vocab] a row with the disallowed tokens at -inf
  std::vector<float> logits;  // [vocab] processed copy of a row
  PenaltyScratch penalty;
  TokenSelector selector;
  LogprobsComputer logprobs;
  std::vector<std::pair<int32_t, double>> dist;  // verify_drafts()
};

void apply_token_mask(const float* logits, const uint64_t* allowed, int64_t vocab_size,
                      float* out) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t base = 0; base < vocab_size; base += 64) {
    const uint64_t bits = allowed[base / 64];
    const int64_t n = std::min<int64_t>(64, vocab_size - base);
    if (bits == 0) {
      std::fill(out + base, out + base + n, kNegInf);
    } else if (bits == ~uint64_t{0}) {
      std::memcpy(out + base, logits + base, sizeof(float) * n);
    } else {
      for (int64_t j = 0; j < n; ++j) out[base + j] = (bits >> j) & 1 ? logits[base + j] : kNegInf;
    }
  }
}

std::optional<Rng> make_generator(const SamplingParams& params) {
  if (!params.seed) return std::nullopt;
  return Rng(static_cast<uint64_t>(*params.seed));
}

Sampler::Sampler(SamplerConfig config) : config_(std::move(config)), engine_rng_(config_.seed) {
  STRATA_CHECK_GT(config_.vocab_size, 0);
  const int threads = config_.pool != nullptr ? config_.pool->size() : 1;
  // Every thread's scratch is grown to its worst case now: which thread samples which row
  // changes from step to step, so growing on first use would allocate well after warm-up.
  for (int t = 0; t < threads; ++t) {
    auto s = std::make_unique<Scratch>();
    s->logits.reserve(config_.vocab_size);
    s->masked.reserve(config_.vocab_size);
    s->penalty.prepare(config_.vocab_size);
    s->selector.reserve(config_.vocab_size);
    s->logprobs.reserve(config_.vocab_size, kDefaultMaxLogprobs);
    scratch_.push_back(std::move(s));
  }
}

Sampler::~Sampler() = default;

template <typename Fn>
void Sampler::for_rows(int64_t num_rows, Fn&& fn) {
  if (config_.pool == nullptr || config_.pool->size() == 1 || num_rows <= 1) {
    for (int64_t r = 0; r < num_rows; ++r) fn(r, *scratch_[0]);
    return;
  }
  // Rows are claimed in chunks by whichever thread is free; each thread uses its own scratch.
  config_.pool->parallel_for(num_rows, 1, [&](int64_t r0, int64_t r1) {
    Scratch& s = *scratch_[ThreadPool::current_thread_index()];
    for (int64_t r = r0; r < r1; ++r) fn(r, s);
  });
}

void Sampler::sample(const float* logits, std::span<const SamplingRow> rows,
                     std::span<SampleOutput> out) {
  STRATA_CHECK_EQ(rows.size(), out.size());
  const int64_t num_rows = static_cast<int64_t>(rows.size());
  // Draw every row's uniform first, in row order, so threads never share a generator.
  uniforms_.resize(num_rows);
  for (int64_t r = 0; r < num_rows; ++r) {
    const SamplingRow& row = rows[r];
    STRATA_CHECK(row.params != nullptr) << "row " << r << " has no sampling params";
    if (row.params->is_greedy()) {
      uniforms_[r] = 0.0;
    } else {
      uniforms_[r] = row.generator != nullptr ? row.generator->uniform() : engine_rng_.uniform();
    }
  }
  const int64_t vocab = config_.vocab_size;
  for_rows(num_rows, [&](int64_t r, Scratch& s) {
    sample_row(logits + r * vocab, rows[r], uniforms_[r], s, out[r]);
  });
}

void Sampler::sample_row(const float* raw, const SamplingRow& row, double u, Scratch& s,
                         SampleOutput& out) {
  const SamplingParams& p = *row.params;
  const int64_t vocab = config_.vocab_size;
  const int64_t num_output = static_cast<int64_t>(row.output_token_ids.size());

  if (row.allowed_tokens != nullptr) {
    s.masked.resize(vocab);
    apply_token_mask(raw, row.allowed_tokens, vocab, s.masked.data());
    raw = s.masked.data();
  }
  // Processors edit a copy; rows that need none are read in place.
  const float* x = raw;
  const bool bias = !p.logit_bias.empty();
  const bool min_tokens = min_tokens_active(p, config_.eos_token_ids, num_output);
  const bool penalties = p.uses_penalties();
  if (bias || min_tokens || penalties) {
    s.logits.resize(vocab);
    std::memcpy(s.logits.data(), raw, sizeof(float) * vocab);
    std::span<float> row_logits(s.logits);
    if (bias) apply_logit_bias(row_logits, p.logit_bias);
    if (min_tokens) apply_min_tokens(row_logits, p, config_.eos_token_ids, num_output);
    if (penalties) {
      apply_penalties(row_logits, p, row.prompt_token_ids, row.output_token_ids, s.penalty);
    }
    x = s.logits.data();
  }

  if (p.is_greedy()) {
    out.token_id = argmax(x, vocab);
  } else {
    const FilterParams f{
        .temperature = p.temperature, .top_k = p.top_k, .top_p = p.top_p, .min_p = p.min_p};
    out.token_id = s.selector.sample(x, vocab, f, u);
  }

  out.has_logprobs = p.logprobs.has_value();
  if (out.has_logprobs) {
    s.logprobs.compute(raw, vocab, out.token_id, *p.logprobs, &out.logprobs);
  } else {
    out.logprobs.top.clear();
  }
}

void Sampler::verify_drafts(const float* logits, const SamplingRow& row,
                            std::span<const int32_t> drafts, std::vector<int32_t>* out) {
  const SamplingParams& p = *row.params;
  STRATA_CHECK(!p.is_greedy() && !p.uses_penalties() && row.allowed_tokens == nullptr)
      << "verify_drafts() is for sampled rows without penalties or masks";
  Scratch& s = *scratch_[0];
  Rng& rng = row.generator != nullptr ? *row.generator : engine_rng_;
  const int64_t vocab = config_.vocab_size;
  const FilterParams f{
      .temperature = p.temperature, .top_k = p.top_k, .top_p = p.top_p, .min_p = p.min_p};
  auto processed = [&](const float* raw) {
    if (p.logit_bias.empty()) return raw;
    s.logits.resize(vocab);
    std::memcpy(s.logits.data(), raw, sizeof(float) * vocab);
    apply_logit_bias(std::span<float>(s.logits), p.logit_bias);
    return static_cast<const float*>(s.logits.data());
  };
  out->clear();
  for (size_t j = 0; j < drafts.size(); ++j) {
    s.selector.distribution(processed(logits + static_cast<int64_t>(j) * vocab), vocab, f, &s.dist);
    const int32_t d = drafts[j];
    auto it = std::lower_bound(s.dist.begin(), s.dist.end(), std::make_pair(d, -1.0));
    const double pd = it != s.dist.end() && it->first == d ? it->second : 0.0;
    if (rng.uniform() < pd) {
      out->push_back(d);
      continue;
    }
    // The residual max(p - q, 0) of a point mass q at d: p without d, renormalized.
    const double target = rng.uniform() * (1.0 - pd);
    double acc = 0;
    int32_t pick = -1;
    for (const auto& [id, prob] : s.dist) {
      if (id == d || prob <= 0) continue;
      pick = id;  // the last candidate stands in when rounding leaves target unreached
      acc += prob;
      if (acc > target) break;
    }
    out->push_back(pick >= 0 ? pick : d);  // pd == 1 cannot be rejected; pick is set otherwise
    return;
  }
  out->push_back(s.selector.sample(processed(logits + static_cast<int64_t>(drafts.size()) * vocab),
                                   vocab, f, rng.uniform()));
}

void Sampler::prompt_logprobs(const float* logits, std::span<const int32_t> target_ids, int num_top,
                              std::span<TokenLogprobs> out) {
  STRATA_CHECK_EQ(target_ids.size(), out.size());
  const int64_t vocab = config_.vocab_size;
  for (int32_t id : target_ids) {
    STRATA_CHECK(id >= 0 && id < vocab) << "prompt token id " << id << " outside the vocabulary";
  }
  for_rows(static_cast<int64_t>(target_ids.size()), [&](int64_t r, Scratch& s) {
    s.logprobs.compute(logits + r * vocab, vocab, target_ids[r], num_top, &out[r]);
  });
}

}  // namespace strata::sampling
