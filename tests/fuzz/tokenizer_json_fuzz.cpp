// Hugging Face tokenizer.json (tokenizer/hf_json.h): the input is the file's text. A tokenizer
// that loads is then used (see tokenizer_exercise.h). Promises checked: no crash, no exception;
// a refusal names the file; encode gives ids below vocab_size().
#include <string>

#include "fuzz_targets.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/tokenizer_parts.h"
#include "tokenizer_exercise.h"

namespace strata::fuzz {

int tokenizer_json(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto parts = tok::parse_tokenizer_json(text, "'fuzz/tokenizer.json'");
  if (!parts.ok()) {
    STRATA_FUZZ_CHECK(parts.status().message().find("fuzz/tokenizer.json") != std::string::npos)
        << "error without the file name: " << parts.status().message();
    return 0;
  }
  auto tok = Tokenizer::from_parts(std::move(parts).value());
  if (!tok.ok()) return 0;
  exercise_tokenizer(*tok);
  return 0;
}

}  // namespace strata::fuzz
