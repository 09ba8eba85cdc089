#include "server/openai_request.h"

#include <limits>

#include "core/json.h"
#include "core/options.h"
#include "core/strings.h"
#include "server/request_common.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {
namespace detail {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int kMaxNesting = 100;

ApiResult<OrderedJson> parse_body(const std::string& body) {
  if (trim(body).empty()) return ApiError{400, "the request body is empty; send a JSON object", ""};
  // Deep nesting is never a real request, and later recursion (templates, dumps) must not see it.
  if (json_nesting_depth(body) > kMaxNesting)
    return ApiError{400,
                    "the request body nests arrays/objects deeper than " +
                        std::to_string(kMaxNesting) + " levels",
                    ""};
  auto j = parse_ordered_json(body, "request body");
  if (!j.ok()) return ApiError{400, "malformed JSON: " + j.status().message(), ""};
  if (!j->is_object())
    return ApiError{400, "the request body must be a JSON object, got " + json_type_name(*j), ""};
  return std::move(j).value();
}

void read_common_fields(JsonFields& f, const ParseContext& ctx, GenerationRequest* r) {
  sampling::SamplingParams& p = r->params;
  p = ctx.defaults;
  if (auto v = f.string("model")) r->model = *v;
  if (auto v = f.integer("n", 1, kInt32Max)) p.n = static_cast<int>(*v);
  if (auto v = f.integer("best_of", 1, kInt32Max); v && *v != p.n)
    f.fail("best_of", "best_of different from n is not supported; use n (got best_of " +
                          std::to_string(*v) + ", n " + std::to_string(p.n) + ")");
  if (auto v = f.number("temperature")) p.temperature = static_cast<float>(*v);
  if (auto v = f.number("top_p")) p.top_p = static_cast<float>(*v);
  if (auto v = f.integer("top_k", -1, kInt32Max)) p.top_k = static_cast<int>(*v);
  if (auto v = f.number("min_p")) p.min_p = static_cast<float>(*v);
  if (auto v = f.number("presence_penalty")) p.presence_penalty = static_cast<float>(*v);
  if (auto v = f.number("frequency_penalty")) p.frequency_penalty = static_cast<float>(*v);
  if (auto v = f.number("repetition_penalty")) p.repetition_penalty = static_cast<float>(*v);
  if (auto v = f.integer("seed", kInt64Min, kInt64Max)) p.seed = *v;
  if (auto v = f.strings("stop")) {
    p.stop = *v;
    if (p.stop.size() > kMaxStopStrings)
      f.fail("stop", "stop may hold at most " + std::to_string(kMaxStopStrings) + " strings, got " +
                         std::to_string(p.stop.size()));
    for (const auto& s : p.stop) {
      if (s.size() > kMaxStopStringBytes) {
        f.fail("stop", "stop strings may be at most " + std::to_string(kMaxStopStringBytes) +
                           " bytes long, got one of " + std::to_string(s.size()));
        break;
      }
    }
  }
  if (auto v = f.integers("stop_token_ids", 0, kInt32Max)) {
    p.stop_token_ids.clear();
    for (int64_t id : *v) p.stop_token_ids.push_back(static_cast<int32_t>(id));
    if (p.stop_token_ids.size() > kMaxStopTokenIds)
      f.fail("stop_token_ids", "stop_token_ids may hold at most " +
                                   std::to_string(kMaxStopTokenIds) + " ids, got " +
                                   std::to_string(p.stop_token_ids.size()));
  }
  if (auto v = f.boolean("include_stop_str_in_output")) p.include_stop_str_in_output = *v;
  if (auto v = f.boolean("ignore_eos")) p.ignore_eos = *v;
  if (auto v = f.integer("min_tokens", 0, kInt32Max)) p.min_tokens = static_cast<int>(*v);
  if (auto v = f.boolean("skip_special_tokens")) p.skip_special_tokens = *v;
  if (auto v = f.boolean("spaces_between_special_tokens")) p.spaces_between_special_tokens = *v;
  if (auto v = f.integer("prompt_logprobs", -1, kInt32Max)) {
    p.prompt_logprobs = static_cast<int>(*v);
    r->report_prompt_logprobs = true;
  }
  if (const OrderedJson* bias = f.object("logit_bias")) {
    p.logit_bias.clear();
    for (auto it = bias->begin(); it != bias->end(); ++it) {
      auto id = parse_int(it.key(), "logit_bias key");
      if (!id.ok() || *id < 0 || *id > kInt32Max) {
        f.fail("logit_bias",
               "logit_bias keys must be token ids (integers as strings), got '" + it.key() + "'");
        break;
      }
      if (!it.value().is_number()) {
        f.fail("logit_bias", "logit_bias values must be numbers, got " +
                                 json_type_name(it.value()) + " for token " + it.key());
        break;
      }
      p.logit_bias[static_cast<int32_t>(*id)] = it.value().get<float>();
    }
  }
  if (auto v = f.boolean("stream")) r->stream = *v;
  if (const OrderedJson* so = f.object("stream_options")) {
    if (!r->stream) {
      f.fail("stream_options", "stream_options can only be given when stream is true");
    } else {
      JsonFields sf(*so);
      if (auto v = sf.boolean("include_usage")) r->include_usage = *v;
      if (auto v = sf.boolean("continuous_usage_stats")) r->continuous_usage_stats = *v;
      if (sf.failed()) f.fail("stream_options", "stream_options." + sf.error().message);
    }
  }
  if (auto v = f.integer("priority", kInt64Min, kInt64Max)) r->priority = *v;
  if (auto v = f.string("user")) r->user = *v;
  if (auto v = f.string("cache_salt")) {
    if (v->empty()) f.fail("cache_salt", "cache_salt cannot be empty (leave it out instead)");
    r->cache_salt = *v;
  }
  r->return_tokens_as_token_ids = ctx.return_tokens_as_token_ids;
  if (auto v = f.boolean("return_tokens_as_token_ids")) r->return_tokens_as_token_ids = *v;
  read_structured_output(f, r);
}

void check_fan_out(JsonFields& f, const ParseContext& ctx, int n, size_t num_prompts) {
  const int64_t total = static_cast<int64_t>(num_prompts) * n;
  if (n > ctx.max_n)
    f.fail("n", "n must be at most " + std::to_string(ctx.max_n) + " (--max-num-seqs), got " +
                    std::to_string(n));
  else if (total > ctx.max_n)
    f.fail("prompt", "a request may produce at most " + std::to_string(ctx.max_n) +
                         " sequences (--max-num-seqs); this one asks for " +
                         std::to_string(num_prompts) + " prompts x n=" + std::to_string(n));
}

}  // namespace detail

namespace {

using detail::kInt32Max;

// How many prompts `prompt` holds (one for a string or a list of token ids), without looking
// inside them; 0 when it is not a valid shape (read_prompts says what is wrong).
size_t count_prompts(const OrderedJson* p) {
  if (p == nullptr) return 0;
  if (p->is_string()) return 1;
  if (!p->is_array() || p->empty()) return 0;
  return p->front().is_number() ? 1 : p->size();
}

// OpenAI's prompt: a string, an array of strings, an array of token ids, or an array of arrays of
// token ids.
void read_prompts(JsonFields& f, const ParseContext& ctx, bool add_special,
                  std::vector<PromptInput>* out) {
  const OrderedJson* p = f.raw("prompt");
  if (p == nullptr) {
    f.fail("prompt", "prompt is required (a string, an array of strings, or token ids)");
    return;
  }
  auto from_text = [&](const std::string& text) {
    if (ctx.tokenizer == nullptr) {
      f.fail("prompt", "this model has no tokenizer: send the prompt as token ids");
      return;
    }
    auto ids = ctx.tokenizer->encode(text, add_special);
    if (!ids.ok()) {
      f.fail("prompt", ids.status().message());
      return;
    }
    out->push_back({std::move(ids).value(), text});
  };
  auto from_ids = [&](const OrderedJson& arr) {
    PromptInput in;
    for (const auto& item : arr) {
      int64_t id = 0;
      if (!json_to_int(item, 0, kInt32Max, &id) || item.is_boolean()) {
        f.fail("prompt",
               "token id prompts must hold non-negative integers; got " + json_brief(item));
        return;
      }
      in.token_ids.push_back(static_cast<int32_t>(id));
    }
    if (ctx.tokenizer != nullptr) in.text = ctx.tokenizer->decode(in.token_ids, false);
    out->push_back(std::move(in));
  };
  if (p->is_string()) return from_text(p->get<std::string>());
  if (!p->is_array()) {
    f.fail("prompt",
           "prompt must be a string, an array of strings, or token ids; got " + json_type_name(*p));
    return;
  }
  if (p->empty()) {
    f.fail("prompt", "prompt cannot be an empty array");
    return;
  }
  const OrderedJson& first = p->front();
  if (first.is_number()) return from_ids(*p);
  for (const auto& item : *p) {
    if (f.failed()) return;
    if (item.is_string()) {
      from_text(item.get<std::string>());
    } else if (item.is_array() && !item.empty()) {
      from_ids(item);
    } else {
      f.fail("prompt", "prompt arrays must hold strings or non-empty arrays of token ids; got " +
                           json_type_name(item));
    }
  }
}

}  // namespace

ApiResult<GenerationRequest> parse_completion_request(const std::string& body,
                                                      const ParseContext& ctx) {
  auto parsed = detail::parse_body(body);
  if (!parsed.ok()) return parsed.error();
  const OrderedJson& j = parsed.value();
  JsonFields f(j);
  GenerationRequest r;
  r.kind = ApiKind::kCompletion;
  detail::read_common_fields(f, ctx, &r);
  if (auto v = f.integer("max_tokens", 0, kInt32Max)) r.params.max_tokens = static_cast<int>(*v);
  if (auto v = f.boolean("echo")) r.echo = *v;
  if (auto v = f.integer("logprobs", 0, kInt32Max)) r.logprobs = static_cast<int>(*v);
  if (f.has("suffix")) f.fail("suffix", "suffix is not supported");
  bool add_special = true;
  if (auto v = f.boolean("add_special_tokens")) add_special = *v;
  if (f.failed()) return f.error();
  detail::check_fan_out(f, ctx, r.params.n, std::max<size_t>(1, count_prompts(f.raw("prompt"))));
  if (f.failed()) return f.error();
  read_prompts(f, ctx, add_special, &r.prompts);
  if (f.failed()) return f.error();
  r.params.logprobs = r.logprobs;
  // Echo with logprobs also reports the prompt's logprobs (its first token has none).
  if (r.echo && r.logprobs)
    r.params.prompt_logprobs = std::max(r.params.prompt_logprobs.value_or(0), *r.logprobs);
  return r;
}

std::optional<ApiError> attach_constraint(const ParseContext& ctx, GenerationRequest* r) {
  if (r->structured.kind == StructuredOutput::Kind::kNone) return std::nullopt;
  if (ctx.constraints == nullptr) {
    return ApiError{400, "structured outputs need the model's tokenizer, and this server has none",
                    r->structured.param};
  }
  auto c = ctx.constraints->compile(r->structured);
  if (!c.ok()) return c.error();
  r->constraint = c.value();
  return std::nullopt;
}

ApiResult<TokenizeRequest> parse_tokenize_request(const std::string& body,
                                                  const ParseContext& ctx) {
  auto parsed = detail::parse_body(body);
  if (!parsed.ok()) return parsed.error();
  const OrderedJson& j = parsed.value();
  if (j.contains("messages")) {
    // Chat form: render the template exactly as /v1/chat/completions would.
    auto chat = parse_chat_request(body, ctx);
    if (!chat.ok()) return chat.error();
    TokenizeRequest t;
    t.model = chat.value().model;
    t.token_ids = chat.value().prompts.front().token_ids;
    JsonFields f(j);
    if (auto v = f.boolean("return_token_strs")) t.return_token_strs = *v;
    if (f.failed()) return f.error();
    return t;
  }
  JsonFields f(j);
  TokenizeRequest t;
  if (auto v = f.string("model")) t.model = *v;
  if (j.contains("content") && !j.contains("prompt")) {
    // llama-server's request: special tokens are not added unless asked.
    t.llama_cpp_shape = true;
    bool add_special = false;
    if (auto v = f.boolean("add_special")) add_special = *v;
    if (auto v = f.boolean("with_pieces")) t.with_pieces = *v;
    auto content = f.string("content");
    if (f.failed()) return f.error();
    if (ctx.tokenizer == nullptr) return ApiError{400, "this model has no tokenizer", "content"};
    auto ids = ctx.tokenizer->encode(*content, add_special);
    if (!ids.ok()) return ApiError{400, ids.status().message(), "content"};
    t.token_ids = std::move(ids).value();
    return t;
  }
  bool add_special = true;
  if (auto v = f.boolean("add_special_tokens")) add_special = *v;
  if (auto v = f.boolean("return_token_strs")) t.return_token_strs = *v;
  auto prompt = f.string("prompt");
  if (f.failed()) return f.error();
  if (!prompt) return ApiError{400, "prompt (a string), messages or content is required", "prompt"};
  if (ctx.tokenizer == nullptr) return ApiError{400, "this model has no tokenizer", "prompt"};
  auto ids = ctx.tokenizer->encode(*prompt, add_special);
  if (!ids.ok()) return ApiError{400, ids.status().message(), "prompt"};
  t.token_ids = std::move(ids).value();
  return t;
}

ApiResult<DetokenizeRequest> parse_detokenize_request(const std::string& body) {
  auto parsed = detail::parse_body(body);
  if (!parsed.ok()) return parsed.error();
  JsonFields f(parsed.value());
  DetokenizeRequest d;
  if (auto v = f.string("model")) d.model = *v;
  auto ids = f.integers("tokens", 0, kInt32Max);
  if (f.failed()) return f.error();
  if (!ids) return ApiError{400, "tokens (an array of token ids) is required", "tokens"};
  for (int64_t id : *ids) d.token_ids.push_back(static_cast<int32_t>(id));
  return d;
}

}  // namespace strata::server
