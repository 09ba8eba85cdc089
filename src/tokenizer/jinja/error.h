// The interpreter's internal error. It is thrown inside src/tokenizer/jinja/ only and turned into
// a Status by jinja::Template (parse() and render()); nothing outside this directory sees it.
#pragma once

#include <exception>
#include <string>
#include <utility>

namespace strata::jinja {

class TemplateError : public std::exception {
 public:
  enum class Kind {
    kSyntax,   // the template does not parse
    kRuntime,  // evaluation failed (type error, undefined value, limit, ...)
    kRaised,   // the template called raise_exception(message)
    kLimit,    // a RenderLimits bound was exceeded (output size, work, recursion)
  };
  TemplateError(Kind kind, std::string message, int line = 0)
      : kind_(kind), message_(std::move(message)), line_(line) {}

  const char* what() const noexcept override { return message_.c_str(); }
  Kind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  int line() const { return line_; }
  void set_line_if_unknown(int line) {
    if (line_ == 0) line_ = line;
  }

 private:
  Kind kind_;
  std::string message_;
  int line_;
};

[[noreturn]] inline void throw_runtime(std::string message) {
  throw TemplateError(TemplateError::Kind::kRuntime, std::move(message));
}

[[noreturn]] inline void throw_limit(std::string message) {
  throw TemplateError(TemplateError::Kind::kLimit, std::move(message));
}

}  // namespace strata::jinja
