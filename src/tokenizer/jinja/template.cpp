#include "tokenizer/jinja/template.h"

#include <new>

#include "core/json.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"

namespace strata::jinja {

struct Template::Impl {
  Body body;
};

namespace {

Status to_status(const TemplateError& e) {
  std::string where = e.line() > 0 ? " at line " + std::to_string(e.line()) : "";
  switch (e.kind()) {
    case TemplateError::Kind::kSyntax:
      return invalid_argument("template syntax error" + where + ": " + e.message());
    case TemplateError::Kind::kRaised:
      return invalid_argument(e.message());
    case TemplateError::Kind::kLimit:
      return resource_exhausted("template error" + where + ": " + e.message());
    case TemplateError::Kind::kRuntime:
      break;
  }
  return invalid_argument("template error" + where + ": " + e.message());
}

template <typename J>
Value convert(const J& j, int depth) {
  if (depth > kMaxValueDepth) {
    throw_limit("JSON value nested too deeply (more than " + std::to_string(kMaxValueDepth) +
                " levels)");
  }
  switch (j.type()) {
    case J::value_t::null:
    case J::value_t::discarded:
      return Value::none();
    case J::value_t::boolean:
      return Value::boolean(j.template get<bool>());
    case J::value_t::number_integer:
      return Value::integer(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      auto u = j.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::integer(static_cast<int64_t>(u));
      return Value::number(static_cast<double>(u));
    }
    case J::value_t::number_float:
      return Value::number(j.template get<double>());
    case J::value_t::string:
      return Value::string(j.template get_ref<const std::string&>());
    case J::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(convert(e, depth + 1));
      return Value::list(std::move(items));
    }
    case J::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) {
        d.set(Value::string(it.key()), convert(it.value(), depth + 1));
      }
      return Value::dict(std::move(d));
    }
    case J::value_t::binary:
      throw_runtime("binary JSON values are not supported");
  }
  return Value::none();
}

template <typename J>
Result<Value> convert_json(const J& json) {
  try {
    return convert(json, 0);
  } catch (const TemplateError& e) {
    return to_status(e);
  }
}

}  // namespace

Result<Template> Template::parse(std::string_view source, const TemplateOptions& options) {
  try {
    LexerOptions lex;
    lex.trim_blocks = options.trim_blocks;
    lex.lstrip_blocks = options.lstrip_blocks;
    lex.keep_trailing_newline = options.keep_trailing_newline;
    auto impl = std::make_shared<Impl>();
    impl->body = parse_tokens(tokenize(source, lex));
    Template t;
    t.impl_ = std::move(impl);
    return t;
  } catch (const TemplateError& e) {
    return to_status(e);
  } catch (const std::bad_alloc&) {
    return resource_exhausted("out of memory while parsing the template");
  }
}

Result<std::string> Template::render(const Variables& variables,
                                     const RenderOptions& options) const {
  if (impl_ == nullptr) return failed_precondition("render() called on an empty Template");
  try {
    auto globals = std::make_shared<Scope>(nullptr);
    for (const auto& [name, value] : variables) globals->set(name, value);
    Interp interp(options.limits, options.now ? *options.now : std::time(nullptr));
    return interp.render(impl_->body, std::move(globals));
  } catch (const TemplateError& e) {
    return to_status(e);
  } catch (const std::bad_alloc&) {
    return resource_exhausted("out of memory while rendering the template");
  } catch (const std::exception& e) {
    return internal_error(std::string("template rendering failed: ") + e.what());
  }
}

Result<Value> value_from_json(const nlohmann::ordered_json& json) {
  return convert_json(json);
}
Result<Value> value_from_json(const nlohmann::json& json) {
  return convert_json(json);
}

}  // namespace strata::jinja
