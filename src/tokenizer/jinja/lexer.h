// Jinja2 lexer with the whitespace rules transformers uses: newlines normalized to "\n", one
// trailing newline dropped, `trim_blocks` (a block/comment tag eats the newline after it),
// `lstrip_blocks` (spaces before a block/comment tag at the start of a line are removed), and the
// `-`/`+` modifiers on tags. `{% raw %}` bodies are returned as data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::jinja {

enum class TokenType : uint8_t {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: "+", "//", "==", "(", ...
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;  // data, name, decoded string literal or operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Tokenizes a whole template; throws TemplateError (kSyntax) on malformed input.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options);

const char* token_type_name(TokenType type);

}  // namespace strata::jinja
