// Speculative decoding: `--speculative-config` (vLLM's JSON keys) and the n-gram proposer
// (prompt lookup). The scheduler asks the proposer for draft tokens for a decoding request, runs
// them with its last token in one entry (StepPlan::spec_token_ids_of), and the worker keeps the
// longest prefix of drafts that greedy decoding of the target model would have produced, plus
// the model's own next token: the output is token for token that of plain decoding.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::sched {

struct SpeculativeConfig {
  std::string method;  // "" (off) or "ngram"
  int64_t num_speculative_tokens = 0;
  int64_t prompt_lookup_min = 0;  // n-gram window, in tokens
  int64_t prompt_lookup_max = 0;
  bool enabled() const { return !method.empty() && num_speculative_tokens > 0; }
};

// Parses --speculative-config: a JSON object with "method" ("ngram"; vLLM's "[ngram]" too),
// "num_speculative_tokens" (1..16) and for ngram "prompt_lookup_max" / "prompt_lookup_min"
// (1..64; one given sets the other, neither gives 5 and 2). Methods Strata lacks ("draft_model",
// "mtp", "eagle", ...) and unknown keys are refused with a message; an empty string is "off".
Result<SpeculativeConfig> parse_speculative_config(const std::string& json);

// Prompt lookup: the longest n in [min_n, max_n] for which the last n tokens occurred earlier in
// `tokens`, the most recent such occurrence; appends to `out` the `k` tokens that followed it
// (repeating them with the period the match implies when they run into the end: a sequence caught
// in a cycle is proposed more of the cycle) and returns k. 0 when nothing matches.
int64_t propose_ngram(std::span<const int32_t> tokens, int64_t min_n, int64_t max_n, int64_t k,
                      std::vector<int32_t>* out);

}  // namespace strata::sched
