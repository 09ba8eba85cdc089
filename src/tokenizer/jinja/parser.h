// Jinja2 parser: tokens -> syntax tree, following Jinja2's grammar and operator precedence
// (conditional < or < and < not < comparisons < + - < ~ < * / // % < ** < unary < filters/tests
// and postfix). Supported tags: if/elif/else, for (with inline if, else, recursive), set (also
// block set and namespace attributes), macro, call, filter, with, break/continue, raw,
// generation and block (rendered inline). include/import/extends are rejected with a clear error
// since chat templates have no loader.
#pragma once

#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/lexer.h"

namespace strata::jinja {

// Nesting deeper than this (brackets, operators, blocks) is a syntax error, which keeps hostile
// templates from exhausting the stack.
inline constexpr int kMaxParseDepth = 100;

// Throws TemplateError (kSyntax) with the line of the offending token.
Body parse_tokens(std::vector<Token> tokens);

}  // namespace strata::jinja
