// Structured outputs in the server: reading the request fields that ask for a constrained output
// (OpenAI's response_format; vLLM's structured_outputs; the older guided_json, guided_regex,
// guided_choice and guided_grammar, honoured rather than ignored) and compiling them against the
// model's vocabulary, with a cache so a schema is compiled once.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/grammar.h"
#include "server/json_fields.h"
#include "server/openai_request.h"

namespace strata::server {

// Reads response_format, structured_outputs and guided_* from `f` into r->structured. More than
// one constraint, or an unknown type, is a 400 naming the field.
void read_structured_output(JsonFields& f, GenerationRequest* r);

// Compiles StructuredOutputs to grammars over one vocabulary. Thread-safe (parsing runs on
// worker threads); keeps the last `capacity` distinct constraints.
class ConstraintCompiler {
 public:
  ConstraintCompiler(std::shared_ptr<const grammar::TokenVocabulary> vocabulary,
                     size_t capacity = 128);
  // Null for Kind::kNone. An invalid or unsupported constraint is a 400 whose param is the field
  // it came from and whose message names the keyword and where it is.
  ApiResult<std::shared_ptr<const grammar::CompiledGrammar>> compile(const StructuredOutput& so);
  // EBNF text of a constraint (what compile() parses); an error for invalid input.
  static Result<std::string> to_ebnf(const StructuredOutput& so);

 private:
  std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const grammar::CompiledGrammar>>> lru_;
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace strata::server
