#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace strata::tok {

namespace {

// Per-thread match data and JIT stack, shared by every Regex used on that thread.
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  MatchScratch() {
    data = pcre2_match_data_create(4, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context != nullptr && jit_stack != nullptr) {
      pcre2_jit_stack_assign(context, nullptr, jit_stack);
    }
  }
  ~MatchScratch() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

}  // namespace

std::string Regex::error_message(int code) {
  PCRE2_UCHAR buf[256];
  int n = pcre2_get_error_message(code, buf, sizeof(buf));
  if (n < 0) return "PCRE2 error " + std::to_string(code);
  return std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

Result<std::shared_ptr<const Regex>> Regex::compile(std::string_view pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code == nullptr) {
    return invalid_argument("invalid regular expression '" + std::string(pattern) + "' at offset " +
                            std::to_string(offset) + ": " + error_message(err));
  }
  std::shared_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(pattern);
  re->code_ = code;
  re->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return std::shared_ptr<const Regex>(std::move(re));
}

Result<std::shared_ptr<const Regex>> Regex::literal(std::string_view literal) {
  std::string quoted;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-/").find(c) != std::string_view::npos) quoted += '\\';
    quoted += c;
  }
  if (literal.empty()) quoted = "(?!)";  // never matches
  return compile(quoted);
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

int Regex::find(std::string_view subject, size_t start, size_t* begin, size_t* end) const {
  MatchScratch& s = scratch();
  auto* code = static_cast<pcre2_code*>(code_);
  auto* subj = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc;
  if (jit_) {
    rc = pcre2_jit_match(code, subj, subject.size(), start, PCRE2_NO_UTF_CHECK, s.data, s.context);
  } else {
    rc = pcre2_match(code, subj, subject.size(), start, PCRE2_NO_UTF_CHECK, s.data, s.context);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc < 0) return rc;
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
  *begin = ov[0];
  *end = ov[1];
  return 1;
}

}  // namespace strata::tok
