#include "sched/spec_decode.h"

#include <algorithm>

#include "core/json.h"

namespace strata::sched {

Result<SpeculativeConfig> parse_speculative_config(const std::string& text) {
  SpeculativeConfig c;
  if (text.empty()) return c;
  auto parsed = parse_json(text, "--speculative-config");
  if (!parsed.ok() || !parsed->is_object())
    return invalid_argument(
        "--speculative-config must be a JSON object such as "
        "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
        "\"prompt_lookup_max\": 4}'");
  const Json& j = *parsed;
  auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t* out) -> Status {
    if (!j.contains(key) || j[key].is_null()) return ok_status();
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < lo || j[key].get<int64_t>() > hi)
      return invalid_argument(std::string("--speculative-config: \"") + key +
                              "\" must be an integer from " + std::to_string(lo) + " to " +
                              std::to_string(hi));
    *out = j[key].get<int64_t>();
    return ok_status();
  };
  std::string method;
  if (j.contains("method") && j["method"].is_string()) method = j["method"].get<std::string>();
  if (method.empty() && j.contains("model") && j["model"].is_string() &&
      j["model"].get<std::string>() == "[ngram]")
    method = "ngram";
  if (method == "[ngram]") method = "ngram";
  if (method != "ngram") {
    if (method.empty())
      return invalid_argument("--speculative-config needs \"method\" (Strata has \"ngram\")");
    return unimplemented("--speculative-config method \"" + method +
                         "\" is not built yet: Strata has \"ngram\" (prompt lookup); draft "
                         "models and MTP are not implemented");
  }
  c.method = method;
  static const char* kKnown[] = {"method",
                                 "model",
                                 "num_speculative_tokens",
                                 "prompt_lookup_max",
                                 "prompt_lookup_min",
                                 "disable_log_stats",
                                 "disable_by_batch_size"};
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown))
      return invalid_argument("--speculative-config: unknown key \"" + key +
                              "\" for method ngram (keys: num_speculative_tokens, "
                              "prompt_lookup_max, prompt_lookup_min)");
  }
  if (!j.contains("num_speculative_tokens"))
    return invalid_argument("--speculative-config needs \"num_speculative_tokens\" (e.g. 4)");
  STRATA_RETURN_IF_ERROR(integer("num_speculative_tokens", 1, 16, &c.num_speculative_tokens));
  STRATA_RETURN_IF_ERROR(integer("prompt_lookup_max", 1, 64, &c.prompt_lookup_max));
  STRATA_RETURN_IF_ERROR(integer("prompt_lookup_min", 1, 64, &c.prompt_lookup_min));
  if (c.prompt_lookup_max == 0 && c.prompt_lookup_min == 0) {
    c.prompt_lookup_max = 5;
    c.prompt_lookup_min = 2;
  } else if (c.prompt_lookup_max == 0) {
    c.prompt_lookup_max = c.prompt_lookup_min;
  } else if (c.prompt_lookup_min == 0) {
    c.prompt_lookup_min = c.prompt_lookup_max;
  }
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    return invalid_argument(
        "--speculative-config: prompt_lookup_min (" + std::to_string(c.prompt_lookup_min) +
        ") is larger than prompt_lookup_max (" + std::to_string(c.prompt_lookup_max) + ")");
  return c;
}

int64_t propose_ngram(std::span<const int32_t> tokens, int64_t min_n, int64_t max_n, int64_t k,
                      std::vector<int32_t>* out) {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (k <= 0 || min_n < 1) return 0;
  for (int64_t n = std::min(max_n, len - 1); n >= min_n; --n) {
    const int32_t* tail = tokens.data() + (len - n);
    // Candidate starts s < len - n, most recent first; the match must be followed by a token.
    for (int64_t s = len - n - 1; s >= 0; --s) {
      if (tokens[static_cast<size_t>(s)] != tail[0]) continue;
      if (!std::equal(tail, tail + n, tokens.data() + s)) continue;
      // What followed the match, repeated with the period the match implies when it runs into
      // the end (a sequence caught in a cycle keeps cycling).
      const int64_t from = s + n;
      const int64_t period = len - from;
      for (int64_t i = 0; i < k; ++i)
        out->push_back(tokens[static_cast<size_t>(from + i % period)]);
      return k;
    }
  }
  return 0;
}

}  // namespace strata::sched
