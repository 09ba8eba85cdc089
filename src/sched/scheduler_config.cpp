#include "sched/scheduler_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/strings.h"

namespace strata::sched {

namespace {

constexpr const char* kGroup = "Scheduler";

Status validate_except_model_len(const SchedulerConfig& c) {
  if (c.max_num_seqs < 1) {
    return invalid_argument("--max-num-seqs must be at least 1, got " +
                            std::to_string(c.max_num_seqs));
  }
  if (c.max_num_batched_tokens < 1) {
    return invalid_argument("--max-num-batched-tokens must be at least 1, got " +
                            std::to_string(c.max_num_batched_tokens));
  }
  if (c.max_model_len < 0) {
    return invalid_argument("--max-model-len must be positive, got " +
                            std::to_string(c.max_model_len));
  }
  if (c.long_prefill_token_threshold < 0) {
    return invalid_argument("--long-prefill-token-threshold must be 0 (off) or positive, got " +
                            std::to_string(c.long_prefill_token_threshold));
  }
  if (c.max_prefill_tokens_with_decode < 0) {
    return invalid_argument("--max-prefill-tokens-with-decode must be 0 (off) or positive, got " +
                            std::to_string(c.max_prefill_tokens_with_decode));
  }
  if (c.max_num_partial_prefills < 1) {
    return invalid_argument("--max-num-partial-prefills must be at least 1, got " +
                            std::to_string(c.max_num_partial_prefills));
  }
  if (c.max_long_partial_prefills < 1 || c.max_long_partial_prefills > c.max_num_partial_prefills) {
    return invalid_argument(
        "--max-long-partial-prefills must be between 1 and "
        "--max-num-partial-prefills (" +
        std::to_string(c.max_num_partial_prefills) + "), got " +
        std::to_string(c.max_long_partial_prefills));
  }
  return ok_status();
}

}  // namespace

Status SchedulerConfig::validate() const {
  STRATA_RETURN_IF_ERROR(validate_except_model_len(*this));
  if (max_model_len < 1) {
    return invalid_argument(
        "max_model_len is not set: pass --max-model-len or let the engine "
        "take it from the model");
  }
  return ok_status();
}

Status SchedulerConfig::resolve_max_model_len(int64_t model_max_len) {
  if (max_model_len == 0) {
    max_model_len = model_max_len;
    return ok_status();
  }
  if (model_max_len > 0 && max_model_len > model_max_len) {
    return invalid_argument("--max-model-len " + std::to_string(max_model_len) +
                            " is longer than the model's maximum context of " +
                            std::to_string(model_max_len) +
                            " tokens; use a value up to that or leave it unset");
  }
  return ok_status();
}

int64_t SchedulerConfig::effective_long_prefill_token_threshold() const {
  if (long_prefill_token_threshold > 0) return long_prefill_token_threshold;
  if (max_num_partial_prefills > 1) {
    return std::max<int64_t>(1, static_cast<int64_t>(max_model_len * 0.04));
  }
  return 0;
}

Result<SchedulingPolicy> parse_scheduling_policy(const std::string& text) {
  std::string t = to_lower(trim(text));
  if (t == "fcfs") return SchedulingPolicy::kFcfs;
  if (t == "priority") return SchedulingPolicy::kPriority;
  return invalid_argument("--scheduling-policy must be fcfs or priority, got '" + text + "'");
}

Result<int64_t> parse_model_len(const std::string& text) {
  std::string t(trim(text));
  double mult = 1;
  if (!t.empty() && std::isalpha(static_cast<unsigned char>(t.back()))) {
    switch (t.back()) {
      case 'k':
        mult = 1e3;
        break;
      case 'K':
        mult = 1024;
        break;
      case 'm':
        mult = 1e6;
        break;
      case 'M':
        mult = 1024.0 * 1024;
        break;
      default:
        return invalid_argument(
            "--max-model-len expects a token count such as 4096, 4k or 4K, "
            "got '" +
            text + "'");
    }
    t.pop_back();
  }
  STRATA_ASSIGN_OR_RETURN(double v, parse_float(t, "--max-model-len"));
  double n = std::round(v * mult);
  if (n < 1 || n > 1e12 || std::fabs(n - v * mult) > 1e-6 * std::max(1.0, n)) {
    return invalid_argument("--max-model-len must be a positive whole number of tokens, got '" +
                            text + "'");
  }
  return static_cast<int64_t>(n);
}

void add_scheduler_options(OptionSet& options) {
  options.add_int("max-num-seqs", 256, "requests running at once, at most", kGroup);
  options.add_int("max-num-batched-tokens", 2048,
                  "tokens per engine step (prompt chunks and decode tokens together)", kGroup);
  options.add({.name = "max-model-len",
               .kind = OptionKind::kString,
               .default_value = "",
               .help = "context length: prompt plus generated tokens (default: the model's; "
                       "accepts 4096, 4k, 4K)",
               .group = kGroup,
               .metavar = "N"});
  options.add({.name = "scheduling-policy",
               .kind = OptionKind::kString,
               .default_value = "fcfs",
               .help = "fcfs (arrival order) or priority (lower priority value first, then "
                       "arrival)",
               .group = kGroup,
               .metavar = "POLICY"});
  options.add_int("long-prefill-token-threshold", 0,
                  "cap on one request's tokens per step; prefills with more left are 'long' "
                  "(0: no cap, or 4% of --max-model-len when --max-num-partial-prefills > 1)",
                  kGroup);
  options.add_int("max-prefill-tokens-with-decode", 256,
                  "while requests are decoding, prompt tokens per step at most (all prefills "
                  "together; 0: no cap): keeps decodes flowing and lets prompts that arrive "
                  "together finish one after another",
                  kGroup);
  options.add_int("max-num-partial-prefills", 1,
                  "requests whose prompt is being prefilled across steps, at most", kGroup);
  options.add({.name = "speculative-config",
               .kind = OptionKind::kString,
               .default_value = "",
               .help = "speculative decoding as JSON, vLLM's keys: '{\"method\": \"ngram\", "
                       "\"num_speculative_tokens\": 4, \"prompt_lookup_max\": 4}' (greedy "
                       "requests; the output is that of plain decoding)",
               .group = kGroup,
               .metavar = "JSON"});
  options.add_int("max-long-partial-prefills", 1,
                  "of those, long prompts at most (lets short prompts overtake long ones)", kGroup);
}

Result<SchedulerConfig> scheduler_config_from_args(const Args& args) {
  SchedulerConfig c;
  c.max_num_seqs = args.get_int("max-num-seqs");
  c.max_num_batched_tokens = args.get_int("max-num-batched-tokens");
  if (std::string len = args.get("max-model-len"); !len.empty()) {
    STRATA_ASSIGN_OR_RETURN(c.max_model_len, parse_model_len(len));
  }
  STRATA_ASSIGN_OR_RETURN(c.policy, parse_scheduling_policy(args.get("scheduling-policy")));
  c.long_prefill_token_threshold = args.get_int("long-prefill-token-threshold");
  c.max_num_partial_prefills = args.get_int("max-num-partial-prefills");
  c.max_long_partial_prefills = args.get_int("max-long-partial-prefills");
  c.max_prefill_tokens_with_decode = args.get_int("max-prefill-tokens-with-decode");
  STRATA_ASSIGN_OR_RETURN(c.speculative, parse_speculative_config(args.get("speculative-config")));
  STRATA_RETURN_IF_ERROR(validate_except_model_len(c));
  return c;
}

}  // namespace strata::sched
