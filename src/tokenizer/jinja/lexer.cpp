#include "tokenizer/jinja/lexer.h"

#include <cstring>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace strata::jinja {

const char* token_type_name(TokenType type) {
  switch (type) {
    case TokenType::kData:
      return "template data";
    case TokenType::kVariableBegin:
      return "begin of print statement";
    case TokenType::kVariableEnd:
      return "end of print statement";
    case TokenType::kBlockBegin:
      return "begin of statement block";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kName:
      return "name";
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kOperator:
      return "operator";
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

namespace {

[[noreturn]] void syntax_error(const std::string& message, int line) {
  throw TemplateError(TemplateError::Kind::kSyntax, message, line);
}

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += (c == '\n');
  return n;
}

// "\r\n" and "\r" become "\n"; one trailing newline is dropped unless kept.
std::string normalize_newlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    char c = source[i];
    if (c == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      out.push_back('\n');
    } else {
      out.push_back(c);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length of the (unicode) whitespace run starting at pos.
size_t whitespace_run(std::string_view s, size_t pos) {
  size_t p = pos;
  while (p < s.size()) {
    size_t next = p;
    if (!unicode::is_space(unicode::decode(s, &next))) break;
    p = next;
  }
  return p - pos;
}

bool all_whitespace(std::string_view s) {
  return whitespace_run(s, 0) == s.size();
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes Python string-literal escapes (what Jinja does with "unicode-escape").
std::string unescape(std::string_view body, int line) {
  std::string out;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    char e = body[++i];
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
      case 'u':
      case 'U': {
        size_t digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
        uint32_t cp = 0;
        for (size_t k = 0; k < digits; ++k) {
          if (i + 1 + k >= body.size() || hex_value(body[i + 1 + k]) < 0) {
            syntax_error(std::string("truncated \\") + e + " escape in string literal", line);
          }
          cp = cp * 16 + static_cast<uint32_t>(hex_value(body[i + 1 + k]));
        }
        if (cp > 0x10FFFF) syntax_error("illegal Unicode character in string literal", line);
        i += digits;
        unicode::append_utf8(&out, cp);
        break;
      }
      case 'N':
        syntax_error("named unicode escapes (\\N{...}) are not supported", line);
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = static_cast<uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
          }
          unicode::append_utf8(&out, cp);
        } else {
          out.push_back('\\');  // unknown escapes are kept as written
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options)
      : src_(std::move(source)), options_(options) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t q = find_tag_start(pos_);
      if (q == std::string::npos) {
        emit_data(std::string_view(src_).substr(pos_));
        pos_ = src_.size();
        break;
      }
      lex_tag(q);
    }
    Token eof;
    eof.type = TokenType::kEof;
    eof.line = line_;
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  size_t find_tag_start(size_t from) const {
    for (size_t q = src_.find('{', from); q != std::string::npos; q = src_.find('{', q + 1)) {
      if (q + 1 < src_.size() && std::strchr("{%#", src_[q + 1]) != nullptr &&
          src_[q + 1] != '\0') {
        return q;
      }
    }
    return std::string::npos;
  }

  void emit_data(std::string_view text) {
    if (text.empty()) return;
    Token t;
    t.type = TokenType::kData;
    t.text = std::string(text);
    t.line = line_;
    tokens_.push_back(std::move(t));
    line_ += count_newlines(text);
  }

  void emit(TokenType type, std::string text = "") {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = line_;
    tokens_.push_back(std::move(t));
  }

  // Applies `-` (strip all trailing whitespace) or lstrip_blocks to the text before a tag.
  std::string_view strip_before_tag(std::string_view text, char sign, bool is_variable) {
    if (sign == '-') return unicode::strip(text, false, true, nullptr);
    if (sign != '+' && options_.lstrip_blocks && !is_variable) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size() &&
          all_whitespace(text.substr(l_pos))) {
        return text.substr(0, l_pos);
      }
    }
    return text;
  }

  // Matches "{%[-+]? raw [-]%}" at q (the raw directive); returns its end or npos.
  size_t match_raw_begin(size_t q) const {
    size_t p = q + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p += whitespace_run(src_, p);
    if (src_.compare(p, 3, "raw") != 0) return std::string::npos;
    p += 3;
    p += whitespace_run(src_, p);
    if (src_.compare(p, 3, "-%}") == 0) return p + 3 + whitespace_run(src_, p + 3);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return std::string::npos;
  }

  void lex_tag(size_t q) {
    char kind = src_[q + 1];
    char sign =
        (q + 2 < src_.size() && (src_[q + 2] == '-' || src_[q + 2] == '+')) ? src_[q + 2] : 0;
    std::string_view text = std::string_view(src_).substr(pos_, q - pos_);
    int text_lines = count_newlines(text);
    std::string_view kept = strip_before_tag(text, sign, kind == '{');
    emit_data(kept);
    line_ += text_lines - count_newlines(kept);
    if (kind == '%') {
      size_t raw_end = match_raw_begin(q);
      if (raw_end != std::string::npos) {
        line_ += count_newlines(std::string_view(src_).substr(q, raw_end - q));
        pos_ = raw_end;
        lex_raw_body();
        return;
      }
    }
    pos_ = q + 2 + (sign ? 1 : 0);
    if (kind == '#') {
      lex_comment();
    } else {
      emit(kind == '{' ? TokenType::kVariableBegin : TokenType::kBlockBegin);
      lex_inside(kind == '%');
    }
  }

  void lex_comment() {
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) syntax_error("Missing end of comment tag", line_);
    char sign = (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) ? src_[end - 1] : 0;
    size_t after = end + 2;
    if (sign == '-') {
      after += whitespace_run(src_, after);
    } else if (sign != '+' && options_.trim_blocks && after < src_.size() && src_[after] == '\n') {
      ++after;
    }
    finish_tag(after);
  }

  void lex_raw_body() {
    // Find "{%[-+]? endraw [-+]?%}".
    for (size_t q = src_.find("{%", pos_); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t p = q + 2;
      char sign = (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ? src_[p] : 0;
      if (sign) ++p;
      p += whitespace_run(src_, p);
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      p += whitespace_run(src_, p);
      size_t after;
      if (src_.compare(p, 3, "+%}") == 0) {
        after = p + 3;
      } else if (src_.compare(p, 3, "-%}") == 0) {
        after = p + 3 + whitespace_run(src_, p + 3);
      } else if (src_.compare(p, 2, "%}") == 0) {
        after = p + 2;
        if (options_.trim_blocks && after < src_.size() && src_[after] == '\n') ++after;
      } else {
        continue;
      }
      std::string_view text = std::string_view(src_).substr(pos_, q - pos_);
      int text_lines = count_newlines(text);
      std::string_view kept = strip_before_tag(text, sign, false);
      emit_data(kept);
      line_ += text_lines - count_newlines(kept);
      finish_tag(after, q);
      return;
    }
    syntax_error("Missing end of raw directive", line_);
  }

  // Moves past a tag that ends at `after` and records whether a line starts there.
  void finish_tag(size_t after, size_t counted_from = std::string::npos) {
    size_t from = counted_from == std::string::npos ? pos_ : counted_from;
    line_ += count_newlines(std::string_view(src_).substr(from, after - from));
    line_starting_ = after > 0 && src_[after - 1] == '\n';
    pos_ = after;
  }

  bool at(std::string_view s) const { return src_.compare(pos_, s.size(), s) == 0; }

  // Tokens inside {{ }} or {% %} up to and including the end tag.
  void lex_inside(bool block) {
    std::vector<char> balance;
    while (pos_ < src_.size()) {
      if (balance.empty()) {
        size_t after = std::string::npos;
        if (block) {
          if (at("+%}")) {
            after = pos_ + 3;
          } else if (at("-%}")) {
            after = pos_ + 3 + whitespace_run(src_, pos_ + 3);
          } else if (at("%}")) {
            after = pos_ + 2;
            if (options_.trim_blocks && after < src_.size() && src_[after] == '\n') ++after;
          }
        } else {
          if (at("-}}")) {
            after = pos_ + 3 + whitespace_run(src_, pos_ + 3);
          } else if (at("}}")) {
            after = pos_ + 2;
          }
        }
        if (after != std::string::npos) {
          emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd);
          finish_tag(after);
          return;
        }
      }
      size_t ws = whitespace_run(src_, pos_);
      if (ws > 0) {
        line_ += count_newlines(std::string_view(src_).substr(pos_, ws));
        pos_ += ws;
        continue;
      }
      char c = src_[pos_];
      if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        size_t start = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        emit(TokenType::kName, src_.substr(start, pos_ - start));
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(&balance);
      }
    }
    // End of input inside a tag: the parser reports "unexpected end of template".
  }

  void lex_string(char quote) {
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += (src_[p] == '\\') ? 2 : 1;
    if (p >= src_.size()) syntax_error("unterminated string literal", line_);
    std::string_view body = std::string_view(src_).substr(pos_ + 1, p - pos_ - 1);
    emit(TokenType::kString, unescape(body, line_));
    line_ += count_newlines(body);
    pos_ = p + 1;
  }

  void lex_number() {
    size_t start = pos_;
    auto digits = [&](auto is_ok) {
      size_t p0 = pos_;
      while (pos_ < src_.size() && (is_ok(src_[pos_]) || (src_[pos_] == '_' && pos_ > p0))) ++pos_;
      return pos_ > p0;
    };
    auto dec = [](char c) { return c >= '0' && c <= '9'; };
    char next = pos_ + 1 < src_.size() ? static_cast<char>(src_[pos_ + 1] | 0x20) : 0;
    if (src_[pos_] == '0' && (next == 'x' || next == 'o' || next == 'b')) {
      int base = next == 'x' ? 16 : (next == 'o' ? 8 : 2);
      pos_ += 2;
      size_t body_start = pos_;
      digits([&](char c) { return hex_value(c) >= 0 && hex_value(c) < base; });
      if (pos_ == body_start) syntax_error("invalid integer literal", line_);
      emit_integer(src_.substr(body_start, pos_ - body_start), base);
      return;
    }
    digits(dec);
    bool is_float = false;
    bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && dec(src_[pos_ + 1])) {
      ++pos_;
      digits(dec);
      is_float = true;
    }
    if (!after_dot && pos_ < src_.size() && (src_[pos_] | 0x20) == 'e') {
      size_t save = pos_;
      ++pos_;
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-')) ++pos_;
      if (pos_ < src_.size() && dec(src_[pos_])) {
        digits(dec);
        is_float = true;
      } else {
        pos_ = save;
      }
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    if (is_float) {
      Token t;
      t.type = TokenType::kFloat;
      t.text = text;
      t.float_value = std::strtod(text.c_str(), nullptr);
      t.line = line_;
      tokens_.push_back(std::move(t));
    } else {
      emit_integer(text, 10);
    }
  }

  void emit_integer(const std::string& raw, int base) {
    int64_t v = 0;
    for (char c : raw) {
      if (c == '_') continue;
      int d = hex_value(c);
      if (v > (INT64_MAX - d) / base) syntax_error("integer literal too large", line_);
      v = v * base + d;
    }
    Token t;
    t.type = TokenType::kInteger;
    t.text = raw;
    t.int_value = v;
    t.line = line_;
    tokens_.push_back(std::move(t));
  }

  void lex_operator(std::vector<char>* balance) {
    static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (at(op)) {
        emit(TokenType::kOperator, op);
        pos_ += 2;
        return;
      }
    }
    char c = src_[pos_];
    if (std::strchr("+-/*%~[](){}><=.:|,;", c) == nullptr || c == '\0') {
      size_t p = pos_;
      uint32_t cp = unicode::decode(src_, &p);
      std::string shown;
      unicode::append_utf8(&shown, cp);
      syntax_error("unexpected char '" + shown + "' at " + std::to_string(pos_), line_);
    }
    if (c == '(' || c == '[' || c == '{') {
      balance->push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance->empty()) syntax_error(std::string("unexpected '") + c + "'", line_);
      char expected = balance->back();
      balance->pop_back();
      if (expected != c) {
        syntax_error(std::string("unexpected '") + c + "', expected '" + expected + "'", line_);
      }
    }
    emit(TokenType::kOperator, std::string(1, c));
    ++pos_;
  }

  std::string src_;
  LexerOptions options_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(normalize_newlines(source, options.keep_trailing_newline), options).run();
}

}  // namespace strata::jinja
