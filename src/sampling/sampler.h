// The batch sampler: for each row of logits, with that request's parameters and state, applies
// vLLM's pipeline and picks the next token.
//
//   raw logprobs (if requested) -> logit bias -> min_tokens -> penalties -> greedy argmax
//   (temperature < 1e-5) or temperature -> min_p -> top_k -> top_p -> draw
//
// Randomness: a seeded request owns its generator (make_generator()), so the same seed gives the
// same tokens whatever else is in the batch, in any row order, with or without threads. Unseeded
// requests draw from the sampler's own generator, in row order. Each random row consumes exactly
// one uniform per step; greedy rows consume none.
//
// Threads: with a pool, rows are split across its threads; each thread has its own scratch, and
// every row's random draw is made before the split, so results do not depend on the threads.
// No allocation per call once the scratch has grown to the vocabulary size (and the caller
// reuses its outputs).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "sampling/logits_processors.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"
#include "sampling/token_selector.h"

namespace strata::sampling {

struct SamplerConfig {
  int64_t vocab_size = 0;              // logits per row
  std::vector<int32_t> eos_token_ids;  // the model's EOS ids (masked by min_tokens unless
                                       // the request sets ignore_eos)
  uint64_t seed = 0;                   // the engine generator's seed (vLLM's --seed)
  ThreadPool* pool = nullptr;          // optional, not owned; must outlive the sampler
};

// One row of the batch. Everything is borrowed for the duration of sample().
struct SamplingRow {
  const SamplingParams* params = nullptr;     // validated
  std::span<const int32_t> prompt_token_ids;  // for the repetition penalty
  std::span<const int32_t> output_token_ids;  // tokens generated so far (penalties, min_tokens)
  Rng* generator = nullptr;  // the request's own generator (seeded requests); null: the engine's
  // Structured outputs: a vocab_size-bit mask (bit id % 64 of word id / 64) of the tokens allowed
  // at this step; every other logit is -inf before anything else (logprobs included, as vLLM's
  // grammar bitmask). Null: no constraint.
  const uint64_t* allowed_tokens = nullptr;
};

struct SampleOutput {
  int32_t token_id = -1;
  bool has_logprobs = false;  // true when params->logprobs is set
  TokenLogprobs logprobs;
};

// out[i] = allowed bit i set ? logits[i] : -inf, for i < vocab_size (the structured-output mask).
void apply_token_mask(const float* logits, const uint64_t* allowed, int64_t vocab_size, float* out);

// A seeded request's generator; std::nullopt when the request has no seed.
std::optional<Rng> make_generator(const SamplingParams& params);

class Sampler {
 public:
  explicit Sampler(SamplerConfig config);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  int64_t vocab_size() const { return config_.vocab_size; }

  // logits: [rows.size(), vocab_size] row-major, not modified. out.size() == rows.size().
  void sample(const float* logits, std::span<const SamplingRow> rows, std::span<SampleOutput> out);

  // Prompt logprobs: for each row i of logits [target_ids.size(), vocab_size] (the model's output
  // at prompt position i), the logprob and rank of target_ids[i] (the prompt token that follows)
  // and the num_top most likely tokens. As in vLLM the first prompt token has no entry (null in
  // the response); a prompt of P tokens needs the logits of positions 0..P-2.
  // Precondition: every target id is in [0, vocab_size) (validated at submit).
  void prompt_logprobs(const float* logits, std::span<const int32_t> target_ids, int num_top,
                       std::span<TokenLogprobs> out);

  Rng& engine_generator() { return engine_rng_; }

  // Speculative decoding with a sampled request: rejection sampling of point-mass drafts (the
  // n-gram proposer's), which keeps the target distribution exactly. logits: [drafts.size() + 1,
  // vocab_size], the rows of the request's last known token and of each draft; `row` gives the
  // parameters (no penalties, min_tokens, logprobs or mask: Engine only sends drafts for such
  // rows). Draft j is kept with probability p_j(draft j), where p_j is the distribution sample()
  // draws from at row j; the first rejected draft is replaced by a draw from p_j without it,
  // renormalized; if all are kept, a token is drawn from the last row. Writes t_0 .. t_m to
  // `out` (t_j = draft j for j < m). Uses the row's generator, else the sampler's.
  void verify_drafts(const float* logits, const SamplingRow& row, std::span<const int32_t> drafts,
                     std::vector<int32_t>* out);

 private:
  struct Scratch;
  void sample_row(const float* raw, const SamplingRow& row, double u, Scratch& s,
                  SampleOutput& out);
  // Runs fn(row, scratch) over [0, num_rows), split across the pool when there is one.
  template <typename Fn>
  void for_rows(int64_t num_rows, Fn&& fn);

  SamplerConfig config_;
  Rng engine_rng_;
  std::vector<std::unique_ptr<Scratch>> scratch_;  // one per pool thread
  std::vector<double> uniforms_;                   // per row, drawn before the parallel part
};

}  // namespace strata::sampling
