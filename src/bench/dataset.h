// Benchmark datasets with vLLM's names and semantics:
//   random             prompts with an exact token count (input length sampled uniformly in
//                      [floor(I*(1-r)), ceil(I*(1+r))] minus the special tokens the server adds,
//                      plus an optional shared random prefix), output length likewise;
//   sharegpt           first human turn of each conversation (JSON list of {"conversations":
//                      [{"from", "value"}, ...]}), output length from the reply or a fixed value;
//   prefix-repetition  P-token prefixes shared by groups of prompts, each with an S-token suffix.
// Prompts are built with a PromptTokenizer so their token counts are exact: token-id sequences
// when the vocabulary is known (local tokenizer), words otherwise (server tokenizer), then
// decoded, re-encoded and trimmed or extended until the count matches (at most 10 rounds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/prompt_tokenizer.h"
#include "core/rng.h"
#include "core/status.h"

namespace strata::bench {

struct SampleRequest {
  std::string prompt;
  int64_t prompt_len = 0;           // tokens, as the server will count them
  int64_t expected_output_len = 0;  // max_tokens to ask for
};

struct RandomDatasetOptions {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0.0;
  int64_t prefix_len = 0;
  uint64_t seed = 0;
};

struct ShareGptOptions {
  std::string path;
  int64_t num_prompts = 1000;
  std::optional<int64_t> output_len;  // --sharegpt-output-len
  uint64_t seed = 0;
  bool no_oversample = false;
};
// Output length used for conversations that carry no reply when --sharegpt-output-len is unset.
constexpr int64_t kShareGptDefaultOutputLen = 128;

struct PrefixRepetitionOptions {
  int64_t num_prompts = 1000;
  int64_t prefix_len = 256;
  int64_t suffix_len = 256;
  int64_t num_prefixes = 10;
  int64_t output_len = 128;
  uint64_t seed = 0;
  // false (vLLM's order): the prompts shuffled. true: prefix 0, 1, ..., n-1, 0, 1, ... (each
  // prefix comes back after all the others: the order that defeats an LRU cache smaller than
  // the working set, for KV tier benchmarks).
  bool round_robin = false;
};

struct Dataset {
  std::vector<SampleRequest> requests;
  std::vector<std::string> notes;  // warnings worth printing (token mismatches, oversampling)
};

Result<Dataset> sample_random(PromptTokenizer& tok, const RandomDatasetOptions& o);
Result<Dataset> sample_sharegpt(PromptTokenizer& tok, const ShareGptOptions& o);
Result<Dataset> sample_prefix_repetition(PromptTokenizer& tok, const PrefixRepetitionOptions& o);

// One prompt being fitted to an exact token count.
struct FitCandidate {
  int64_t target = 0;
  std::string text;
  TokenIds ids;  // when vocab_size() > 0 and text is empty: decoded first
};
// Makes every candidate's text encode to exactly `target` tokens (ids end up holding them),
// extending short ones with random `allowed` ids (or words when `allowed` is empty). Returns the
// summed difference (actual - target) over candidates that did not converge.
Result<int64_t> fit_to_token_counts(PromptTokenizer& tok, std::vector<FitCandidate>* candidates,
                                    const std::vector<int32_t>& allowed, Rng* rng);

// Ids random prompts are drawn from: the vocabulary minus special tokens and pieces that do not
// decode to plain text on their own (byte-fallback halves of characters, control characters).
// Empty when the vocabulary is unknown.
Result<std::vector<int32_t>> allowed_prompt_ids(PromptTokenizer& tok);

// `n` random words from a small built-in English list, each preceded by a space.
std::string random_words(int64_t n, Rng* rng);

}  // namespace strata::bench
