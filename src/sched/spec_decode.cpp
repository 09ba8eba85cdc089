#include "sched/spec_decode.h"

#include <algorithm>
#include <span>

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
  const bool has_model = j.contains("model") && j["model"].is_string();
  const std::string model = has_model ? j["model"].get<std::string>() : std::string();
  if (method.empty() && model == "[ngram]") method = "ngram";
  if (method.empty() && has_model) method = "draft_model";  // vLLM infers it from "model"
  if (method == "[ngram]") method = "ngram";
  if (method != "ngram" && method != "draft_model") {
    if (method.empty())
      return invalid_argument(
          "--speculative-config needs \"method\" (Strata has \"ngram\" and \"draft_model\")");
    return unimplemented("--speculative-config method \"" + method +
                         "\" is not built yet: Strata has \"ngram\" (prompt lookup) and "
                         "\"draft_model\" (a smaller model with the same tokenizer)");
  }
  c.method = method;
  static const char* kCommon[] = {"method", "model", "num_speculative_tokens", "disable_log_stats",
                                  "disable_by_batch_size"};
  static const char* kNgram[] = {"prompt_lookup_max", "prompt_lookup_min"};
  static const char* kDraft[] = {"draft_tensor_parallel_size", "quantization", "hf_overrides"};
  auto known = [](std::span<const char* const> list, const std::string& key) {
    return std::find(list.begin(), list.end(), key) != list.end();
  };
  const bool ngram = method == "ngram";
  for (const auto& [key, value] : j.items()) {
    if (known(kCommon, key) ||
        known(ngram ? std::span<const char* const>(kNgram) : std::span<const char* const>(kDraft),
              key))
      continue;
    return invalid_argument(
        "--speculative-config: unknown key \"" + key + "\" for method " + method +
        (ngram ? " (keys: num_speculative_tokens, prompt_lookup_max, prompt_lookup_min, "
                 "disable_by_batch_size)"
               : " (keys: model, num_speculative_tokens, quantization, hf_overrides, "
                 "draft_tensor_parallel_size, disable_by_batch_size)"));
  }
  if (!j.contains("num_speculative_tokens"))
    return invalid_argument("--speculative-config needs \"num_speculative_tokens\" (e.g. 4)");
  STRATA_RETURN_IF_ERROR(integer("num_speculative_tokens", 1, 16, &c.num_speculative_tokens));
  STRATA_RETURN_IF_ERROR(integer("disable_by_batch_size", 2, 1 << 20, &c.disable_by_batch_size));
  if (!ngram) {
    if (model.empty())
      return invalid_argument(
          "--speculative-config: method draft_model needs \"model\", the draft model's folder or "
          "GGUF file (a smaller model with the target's tokenizer)");
    c.draft_model = model;
    int64_t tp = 1;
    STRATA_RETURN_IF_ERROR(integer("draft_tensor_parallel_size", 1, 1 << 16, &tp));
    if (tp != 1)
      return unimplemented(
          "--speculative-config: draft_tensor_parallel_size " + std::to_string(tp) +
          " is not built: the draft model runs whole on each worker (omit the key, or give 1)");
    if (j.contains("quantization") && !j["quantization"].is_null()) {
      if (!j["quantization"].is_string())
        return invalid_argument("--speculative-config: \"quantization\" must be a string");
      c.draft_quantization = j["quantization"].get<std::string>();
    }
    if (j.contains("hf_overrides") && !j["hf_overrides"].is_null()) {
      if (!j["hf_overrides"].is_object())
        return invalid_argument(
            "--speculative-config: \"hf_overrides\" must be a JSON object, e.g. "
            "{\"num_hidden_layers\": 4}");
      c.draft_hf_overrides = j["hf_overrides"].dump();
    }
    return c;
  }
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
