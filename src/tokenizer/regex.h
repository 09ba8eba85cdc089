// A compiled PCRE2 regular expression (UTF + UCP, JIT when available) for pre-tokenizer splits.
// A Regex is immutable after compile() and safe to use from several threads at once: match
// state lives in per-thread scratch space.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace strata::tok {

class Regex {
 public:
  // Compiles `pattern` (Perl/Oniguruma syntax as used in tokenizer.json Split patterns).
  // A bad pattern is an InvalidArgument error that quotes it and PCRE2's message.
  static Result<std::shared_ptr<const Regex>> compile(std::string_view pattern);
  // A regex matching `literal` exactly (metacharacters quoted).
  static Result<std::shared_ptr<const Regex>> literal(std::string_view literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Finds the leftmost match in `subject` starting at byte `start` (a character boundary).
  // Returns 1 and sets [*begin, *end) on a match, 0 when there is none, and a negative PCRE2
  // error code otherwise (see error_message). Precondition: `subject` is valid UTF-8.
  int find(std::string_view subject, size_t start, size_t* begin, size_t* end) const;
  static std::string error_message(int code);

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace strata::tok
