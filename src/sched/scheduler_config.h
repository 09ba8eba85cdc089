// Scheduler configuration: `--max-num-seqs`, `--max-num-batched-tokens`, `--max-model-len`,
// `--scheduling-policy`, `--long-prefill-token-threshold`, `--max-num-partial-prefills`,
// `--max-long-partial-prefills` (vLLM's names and defaults), declared once here.
#pragma once

#include <cstdint>
#include <string>

#include "core/options.h"
#include "core/status.h"
#include "sched/request.h"
#include "sched/spec_decode.h"

namespace strata::sched {

struct SchedulerConfig {
  int64_t max_num_seqs = 256;             // running requests at most
  int64_t max_num_batched_tokens = 2048;  // tokens per step (prompt chunks + decodes)
  int64_t max_model_len = 0;              // 0 = not resolved yet: take the model's
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // > 0: no request runs more than this many tokens in one step, and prefills with more than
  // this many tokens left count as "long". 0: no cap (but see effective_...()).
  int64_t long_prefill_token_threshold = 0;
  int64_t max_num_partial_prefills = 1;   // requests whose prefill spans steps, at most
  int64_t max_long_partial_prefills = 1;  // of which long ones, at most
  // > 0: while some request is decoding, a step runs at most this many prompt tokens (all
  // prefills together), so decodes are not held up behind big prefill steps and prompts that
  // arrive together get their first tokens one after another instead of all at the end of one
  // long step. A lone prompt still uses the whole max_num_batched_tokens. 0: no cap.
  int64_t max_prefill_tokens_with_decode = 0;
  // Speculative decoding (sched/spec_decode.h): draft tokens for requests that allow it
  // (RequestSpec::speculate), at most max_draft_tokens_per_step in one step (logits rows).
  SpeculativeConfig speculative;
  int64_t max_draft_tokens_per_step = 256;

  // Ok, or an invalid-argument status naming the option. Requires max_model_len > 0.
  Status validate() const;
  // Fills max_model_len from the model when it is 0; rejects a value above the model's.
  Status resolve_max_model_len(int64_t model_max_len);
  // The threshold actually used: as configured, or when it is 0 and
  // max_num_partial_prefills > 1, 4% of max_model_len (vLLM's rule), at least 1.
  int64_t effective_long_prefill_token_threshold() const;
};

Result<SchedulingPolicy> parse_scheduling_policy(const std::string& text);
// "4096", "4k" (x1000), "4K" (x1024), "1m", "1M".
Result<int64_t> parse_model_len(const std::string& text);

// Declares the scheduler options (group "Scheduler").
void add_scheduler_options(OptionSet& options);
// Reads them back and validates what does not depend on the model (max_model_len may be 0).
Result<SchedulerConfig> scheduler_config_from_args(const Args& args);

}  // namespace strata::sched
