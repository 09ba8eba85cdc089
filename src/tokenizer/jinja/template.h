// A Jinja2 template: parsed once, rendered many times (render() is const and thread-safe).
// Semantics are those of Jinja2 3.1 as Hugging Face transformers configures it for chat
// templates: ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls,
// default Undefined, tojson(ensure_ascii=False), raise_exception and strftime_now.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/value.h"

namespace strata::jinja {

struct TemplateOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

struct RenderOptions {
  RenderLimits limits;
  // The time strftime_now() formats (local time); the current time when unset.
  std::optional<std::time_t> now;
};

using Variables = std::vector<std::pair<std::string, Value>>;

class Template {
 public:
  // Syntax errors: InvalidArgument "template syntax error at line N: message".
  static Result<Template> parse(std::string_view source, const TemplateOptions& options = {});

  // Renders with `variables` as the template's context. Errors are InvalidArgument:
  // raise_exception(msg) gives exactly `msg`; other errors "template error at line N: message".
  // Exceeded limits give ResourceExhausted.
  Result<std::string> render(const Variables& variables, const RenderOptions& options = {}) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// JSON -> interpreter values (objects keep their key order; ordered_json preserves the
// document's order, which tojson then reproduces). Nesting deeper than kMaxValueDepth is an error.
Result<Value> value_from_json(const nlohmann::ordered_json& json);
Result<Value> value_from_json(const nlohmann::json& json);

}  // namespace strata::jinja
