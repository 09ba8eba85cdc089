// Speculative decoding: `--speculative-config` (vLLM's JSON keys) and the n-gram proposer
// (prompt lookup). The scheduler gives a decoding request draft tokens, run with its last token in
// one entry (StepPlan::spec_token_ids_of), and the worker keeps the longest prefix of drafts that
// greedy decoding of the target model would have produced, plus the model's own next token: the
// output is token for token that of plain decoding. With "ngram" the scheduler proposes the
// drafts itself; with "draft_model" it reserves their places (kNoToken) and the worker fills them
// from a smaller model run beside the target (engine/draft_proposer.h) before the forward pass.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata::sched {

struct SpeculativeConfig {
  std::string method;  // "" (off), "ngram" or "draft_model"
  int64_t num_speculative_tokens = 0;
  int64_t prompt_lookup_min = 0;  // ngram: the window, in tokens
  int64_t prompt_lookup_max = 0;
  std::string draft_model;         // draft_model: its folder or GGUF file
  std::string draft_quantization;  // its --quantization ("" infers it from the checkpoint)
  std::string draft_hf_overrides;  // JSON merged into its config (e.g. fewer layers)
  // No drafts in a step where this many requests or more run (0: always draft).
  int64_t disable_by_batch_size = 0;
  bool enabled() const { return !method.empty() && num_speculative_tokens > 0; }
  bool uses_draft_model() const { return enabled() && method == "draft_model"; }
};

// Parses --speculative-config: a JSON object with "method" ("ngram", vLLM's "[ngram]" too, or
// "draft_model", which a "model" key alone also means), "num_speculative_tokens" (1..16),
// "disable_by_batch_size", for ngram "prompt_lookup_max" / "prompt_lookup_min" (1..64; one given
// sets the other, neither gives 5 and 2), and for draft_model "model", "quantization",
// "hf_overrides" (a Strata extension: e.g. {"num_hidden_layers": 4} drafts with the first four
// layers of a checkpoint) and "draft_tensor_parallel_size" (1). Methods Strata lacks ("mtp",
// "eagle", ...) and unknown keys are refused with a message; an empty string is "off".
Result<SpeculativeConfig> parse_speculative_config(const std::string& json);

// Prompt lookup: the longest n in [min_n, max_n] for which the last n tokens occurred earlier in
// `tokens`, the most recent such occurrence; appends to `out` the `k` tokens that followed it
// (repeating them with the period the match implies when they run into the end: a sequence caught
// in a cycle is proposed more of the cycle) and returns k. 0 when nothing matches.
int64_t propose_ngram(std::span<const int32_t> tokens, int64_t min_n, int64_t max_n, int64_t k,
                      std::vector<int32_t>* out);

}  // namespace strata::sched
