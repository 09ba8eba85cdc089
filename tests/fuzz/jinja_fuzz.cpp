// The Jinja renderer (tokenizer/jinja/template.h): the input is a template's source, rendered
// with a fixed conversation (messages with tool calls and content parts, tools, documents,
// special tokens) under small render limits, so that runaway loops and huge outputs end in
// ResourceExhausted within a fraction of a second. Promises checked: no crash, no exception, no
// stack overflow; a syntax error is InvalidArgument naming the line; a render error is
// InvalidArgument or ResourceExhausted.
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_targets.h"
#include "tokenizer/jinja/template.h"

namespace strata::fuzz {
namespace {

constexpr const char* kContext = R"JSON({
  "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [{"type": "text", "text": "Hi \u00e9 \ud83d\ude00"},
                                 {"type": "image_url", "image_url": {"url": "x"}}]},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "c1", "type": "function",
       "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21.5}"},
    {"role": "assistant", "content": "  It is 21.5 C.  ", "reasoning_content": "look it up"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}}}],
  "documents": [{"title": "a", "text": "first"}, {"title": "b", "text": "second"}],
  "add_generation_prompt": true,
  "bos_token": "<s>",
  "eos_token": "</s>",
  "enable_thinking": false,
  "numbers": [3, -1, 2.5, 0, 1e10],
  "nested": {"a": {"b": {"c": [1, [2, [3]]]}}}
})JSON";

const jinja::Variables& variables() {
  static const jinja::Variables* vars = [] {
    auto* v = new jinja::Variables();
    auto j = nlohmann::ordered_json::parse(kContext);
    for (auto it = j.begin(); it != j.end(); ++it) {
      auto value = jinja::value_from_json(it.value());
      STRATA_CHECK(value.ok()) << value.status().message();
      v->emplace_back(it.key(), std::move(value).value());
    }
    return v;
  }();
  return *vars;
}

}  // namespace

int jinja(const uint8_t* data, size_t size) {
  std::string source(reinterpret_cast<const char*>(data), size);
  auto tmpl = jinja::Template::parse(source);
  if (!tmpl.ok()) {
    STRATA_FUZZ_CHECK(tmpl.status().code() == StatusCode::kInvalidArgument ||
                      tmpl.status().code() == StatusCode::kResourceExhausted)
        << tmpl.status().message();
    STRATA_FUZZ_CHECK(!tmpl.status().message().empty());
    return 0;
  }
  jinja::RenderOptions options;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_iterations = 100'000;
  options.now = 1'700'000'000;
  auto out = tmpl->render(variables(), options);
  if (!out.ok()) {
    STRATA_FUZZ_CHECK(out.status().code() == StatusCode::kInvalidArgument ||
                      out.status().code() == StatusCode::kResourceExhausted)
        << out.status().message();
  } else {
    STRATA_FUZZ_CHECK(out->size() <= static_cast<size_t>(options.limits.max_output_bytes))
        << "output of " << out->size() << " bytes is over the limit";
  }
  return 0;
}

}  // namespace strata::fuzz
