#include "tokenizer/jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <optional>

#include "tokenizer/jinja/error.h"

namespace strata::jinja {

namespace {

using EndTokens = std::vector<std::string>;

ExprPtr make_expr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

StmtPtr make_stmt(StmtKind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse() {
    Body body = subparse(nullptr);
    if (cur().type != TokenType::kEof) fail("unexpected " + describe(cur()));
    return body;
  }

 private:
  // ---- token stream ----
  const Token& cur() const { return toks_[pos_]; }
  const Token& look() const { return toks_[std::min(pos_ + 1, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_name(const char* n) const { return cur().type == TokenType::kName && cur().text == n; }
  bool is_op(const char* op) const {
    return cur().type == TokenType::kOperator && cur().text == op;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }

  static std::string describe(const Token& t) {
    if (t.type == TokenType::kName || t.type == TokenType::kOperator) return "'" + t.text + "'";
    return std::string("'") + token_type_name(t.type) + "'";
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw TemplateError(TemplateError::Kind::kSyntax, message, cur().line);
  }

  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected token '") + op + "', got " + describe(cur()));
  }
  void expect_type(TokenType type) {
    if (cur().type != type) {
      if (cur().type == TokenType::kEof) fail_eof();
      fail(std::string("expected token '") + token_type_name(type) + "', got " + describe(cur()));
    }
    next();
  }
  std::string expect_name() {
    if (cur().type != TokenType::kName) {
      fail("expected token 'name', got " + describe(cur()));
    }
    return next().text;
  }

  [[noreturn]] void fail_eof() const {
    std::string message = "unexpected end of template";
    if (!end_stack_.empty()) {
      const EndTokens& ends = *end_stack_.back();
      message += "; Jinja was looking for the following tags: ";
      for (size_t i = 0; i < ends.size(); ++i) {
        message += (i ? (i + 1 == ends.size() ? " or '" : ", '") : "'") + ends[i] + "'";
      }
      message += ". The innermost block that needs to be closed is '" + tag_stack_.back() + "'";
    }
    fail(message);
  }

  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p_(p) {
      if (++p_->depth_ > kMaxParseDepth) {
        p_->fail("template nested too deeply (more than " + std::to_string(kMaxParseDepth) +
                 " levels)");
      }
    }
    ~DepthGuard() { --p_->depth_; }
    Parser* p_;
  };

  // ---- statements ----
  Body subparse(const EndTokens* ends) {
    Body body;
    if (ends) end_stack_.push_back(ends);
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::kEof) break;
      if (t.type == TokenType::kData) {
        auto s = make_stmt(StmtKind::kOutput, t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == TokenType::kVariableBegin) {
        next();
        auto s = make_stmt(StmtKind::kPrint, cur().line);
        s->expr = parse_tuple(false, true, {}, false);
        expect_type(TokenType::kVariableEnd);
        body.push_back(std::move(s));
      } else if (t.type == TokenType::kBlockBegin) {
        next();
        if (ends && cur().type == TokenType::kName &&
            std::find(ends->begin(), ends->end(), cur().text) != ends->end()) {
          end_stack_.pop_back();
          return body;
        }
        body.push_back(parse_statement());
        expect_type(TokenType::kBlockEnd);
      } else {
        fail("unexpected " + describe(t));
      }
    }
    if (ends) end_stack_.pop_back();
    return body;
  }

  Body parse_statements(const EndTokens& ends, bool drop_needle) {
    skip_op(":");
    expect_type(TokenType::kBlockEnd);
    Body body = subparse(&ends);
    if (cur().type == TokenType::kEof) {
      end_stack_.push_back(&ends);
      fail_eof();
    }
    if (drop_needle) next();
    return body;
  }

  StmtPtr parse_statement() {
    DepthGuard guard(this);
    if (cur().type != TokenType::kName) fail("tag name expected");
    std::string tag = cur().text;
    tag_stack_.push_back(tag);
    StmtPtr s;
    if (tag == "if") {
      s = parse_if();
    } else if (tag == "for") {
      s = parse_for();
    } else if (tag == "set") {
      s = parse_set();
    } else if (tag == "macro") {
      s = parse_macro();
    } else if (tag == "call") {
      s = parse_call_block();
    } else if (tag == "filter") {
      s = parse_filter_block();
    } else if (tag == "with") {
      s = parse_with();
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside of a for loop");
      s = make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, next().line);
    } else if (tag == "generation") {
      s = make_stmt(StmtKind::kScope, next().line);
      s->body = parse_statements({"endgeneration"}, true);
    } else if (tag == "block") {
      s = make_stmt(StmtKind::kScope, next().line);
      s->name = expect_name();
      skip_name("scoped");
      skip_name("required");
      s->body = parse_statements({"endblock"}, true);
      skip_name(s->name.c_str());
    } else if (tag == "print") {
      s = make_stmt(StmtKind::kPrint, next().line);
      s->expr = parse_tuple(false, true, {}, false);
    } else if (tag == "include" || tag == "import" || tag == "from" || tag == "extends") {
      fail("'" + tag + "' is not supported: chat templates are rendered without a loader");
    } else if (tag == "autoescape") {
      fail("'autoescape' is not supported in chat templates");
    } else {
      std::string message = "Encountered unknown tag '" + tag + "'.";
      if (!end_stack_.empty()) {
        message += " Jinja was looking for the following tags: ";
        const EndTokens& ends = *end_stack_.back();
        for (size_t i = 0; i < ends.size(); ++i) {
          message += (i ? (i + 1 == ends.size() ? " or '" : ", '") : "'") + ends[i] + "'";
        }
        message += ". The innermost block that needs to be closed is '" +
                   tag_stack_[tag_stack_.size() - 2] + "'.";
      }
      tag_stack_.pop_back();
      fail(message);
    }
    tag_stack_.pop_back();
    return s;
  }

  StmtPtr parse_if() {
    auto s = make_stmt(StmtKind::kIf, next().line);
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      s->branches.emplace_back(std::move(test), std::move(body));
      std::string tok = next().text;
      if (tok == "elif") continue;
      if (tok == "else") s->else_body = parse_statements({"endif"}, true);
      break;
    }
    return s;
  }

  StmtPtr parse_for() {
    auto s = make_stmt(StmtKind::kFor, next().line);
    s->target = parse_assign_target(true, {"in"}, false);
    if (!skip_name("in")) fail("expected token 'in', got " + describe(cur()));
    s->expr = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) s->cond = parse_expression(true);
    s->recursive = skip_name("recursive");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (next().text == "else") s->else_body = parse_statements({"endfor"}, true);
    return s;
  }

  StmtPtr parse_set() {
    int line = next().line;
    Target target = parse_assign_target(true, {}, true);
    if (skip_op("=")) {
      auto s = make_stmt(StmtKind::kSet, line);
      s->target = std::move(target);
      s->expr = parse_tuple(false, true, {}, false);
      return s;
    }
    auto s = make_stmt(StmtKind::kSetBlock, line);
    s->target = std::move(target);
    if (is_op("|")) s->filter = parse_filter(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  void parse_signature(Stmt* s) {
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      s->params.push_back(expect_name());
      if (skip_op("=")) {
        s->defaults.push_back(parse_expression(true));
      } else if (!s->defaults.empty()) {
        fail("non-default argument follows default argument");
      }
    }
    expect_op(")");
  }

  // Parses a macro-like body and records which of caller/varargs/kwargs it refers to.
  void parse_macro_body(Stmt* s, const char* end_tag) {
    macro_stack_.push_back(s);
    int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_statements({end_tag}, true);
    loop_depth_ = saved_loop_depth;
    macro_stack_.pop_back();
  }

  StmtPtr parse_macro() {
    auto s = make_stmt(StmtKind::kMacro, next().line);
    s->name = expect_name();
    parse_signature(s.get());
    parse_macro_body(s.get(), "endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = make_stmt(StmtKind::kCallBlock, next().line);
    if (is_op("(")) parse_signature(s.get());
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::kCall) fail("expected call");
    parse_macro_body(s.get(), "endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = make_stmt(StmtKind::kFilterBlock, next().line);
    s->filter = parse_filter(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    return s;
  }

  StmtPtr parse_with() {
    auto s = make_stmt(StmtKind::kWith, next().line);
    while (cur().type != TokenType::kBlockEnd) {
      if (!s->with_targets.empty()) expect_op(",");
      s->with_targets.push_back(parse_assign_target(true, {}, false));
      expect_op("=");
      s->with_values.push_back(parse_expression(true));
    }
    s->body = parse_statements({"endwith"}, true);
    return s;
  }

  // ---- assignment targets ----
  bool is_tuple_end(const EndTokens& extra) const {
    TokenType t = cur().type;
    if (t == TokenType::kVariableEnd || t == TokenType::kBlockEnd || is_op(")")) return true;
    return t == TokenType::kName &&
           std::find(extra.begin(), extra.end(), cur().text) != extra.end();
  }

  Target parse_target_primary(bool with_namespace) {
    if (cur().type == TokenType::kName) {
      const std::string& n = cur().text;
      if (n == "true" || n == "false" || n == "True" || n == "False" || n == "none" ||
          n == "None") {
        fail("can't assign to 'const'");
      }
      Target t;
      t.name = next().text;
      if (with_namespace && is_op(".")) {
        next();
        t.kind = Target::Kind::kNamespaceAttr;
        t.attr = expect_name();
      }
      return t;
    }
    if (skip_op("(")) {
      Target t = parse_assign_target(true, {}, with_namespace);
      expect_op(")");
      return t;
    }
    fail("can't assign to " + describe(cur()));
  }

  Target parse_assign_target(bool with_tuple, const EndTokens& extra, bool with_namespace) {
    if (!with_tuple) return parse_target_primary(with_namespace);
    std::vector<Target> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra)) break;
      items.push_back(parse_target_primary(with_namespace));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (items.empty()) fail("expected an assignment target, got " + describe(cur()));
      return std::move(items[0]);
    }
    Target t;
    t.kind = Target::Kind::kTuple;
    t.items = std::move(items);
    return t;
  }

  // ---- expressions ----
  ExprPtr parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      ExprPtr expr2 = parse_or();
      ExprPtr expr3;
      if (skip_name("else")) expr3 = parse_condexpr();
      auto e = make_expr(ExprKind::kCondExpr, line);
      e->operands.push_back(std::move(expr2));
      e->operands.push_back(std::move(expr1));
      e->operands.push_back(std::move(expr3));
      expr1 = std::move(e);
      line = cur().line;
    }
    return expr1;
  }

  ExprPtr binary(ExprKind kind, ExprPtr l, ExprPtr r, int line) {
    auto e = make_expr(kind, line);
    e->operands.push_back(std::move(l));
    e->operands.push_back(std::move(r));
    return e;
  }

  ExprPtr parse_or() {
    int line = cur().line;
    ExprPtr left = parse_and();
    while (skip_name("or")) left = binary(ExprKind::kOr, std::move(left), parse_and(), line);
    return left;
  }

  ExprPtr parse_and() {
    int line = cur().line;
    ExprPtr left = parse_not();
    while (skip_name("and")) left = binary(ExprKind::kAnd, std::move(left), parse_not(), line);
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(this);
      auto e = make_expr(ExprKind::kNot, next().line);
      e->operands.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr expr = parse_math1();
    ExprPtr result;
    static const std::pair<const char*, CmpOp> kOps[] = {{"==", CmpOp::kEq}, {"!=", CmpOp::kNe},
                                                         {"<", CmpOp::kLt},  {"<=", CmpOp::kLe},
                                                         {">", CmpOp::kGt},  {">=", CmpOp::kGe}};
    while (true) {
      std::optional<CmpOp> op;
      for (const auto& [text, value] : kOps) {
        if (is_op(text)) op = value;
      }
      if (op) {
        next();
      } else if (skip_name("in")) {
        op = CmpOp::kIn;
      } else if (is_name("not") && look().type == TokenType::kName && look().text == "in") {
        next();
        next();
        op = CmpOp::kNotIn;
      } else {
        break;
      }
      if (!result) {
        result = make_expr(ExprKind::kCompare, line);
        result->operands.push_back(std::move(expr));
      }
      result->cmp_ops.push_back(*op);
      result->operands.push_back(parse_math1());
    }
    return result ? std::move(result) : std::move(expr);
  }

  ExprPtr math(ExprPtr left, BinOp op, ExprPtr right, int line) {
    auto e = binary(ExprKind::kBinary, std::move(left), std::move(right), line);
    e->bin_op = op;
    return e;
  }

  ExprPtr parse_math1() {
    int line = cur().line;
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      BinOp op = next().text == "+" ? BinOp::kAdd : BinOp::kSub;
      left = math(std::move(left), op, parse_concat(), line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = make_expr(ExprKind::kConcat, line);
    e->operands.push_back(std::move(first));
    while (skip_op("~")) e->operands.push_back(parse_math2());
    return e;
  }

  ExprPtr parse_math2() {
    int line = cur().line;
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string& t = next().text;
      BinOp op = t == "*"    ? BinOp::kMul
                 : t == "/"  ? BinOp::kDiv
                 : t == "//" ? BinOp::kFloorDiv
                             : BinOp::kMod;
      left = math(std::move(left), op, parse_pow(), line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    int line = cur().line;
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) left = math(std::move(left), BinOp::kPow, parse_unary(true), line);
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(this);
    int line = cur().line;
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      ExprKind kind = next().text == "-" ? ExprKind::kNeg : ExprKind::kPos;
      node = make_expr(kind, line);
      node->operands.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == TokenType::kName) {
      const std::string& n = t.text;
      auto e = make_expr(ExprKind::kConst, line);
      if (n == "true" || n == "True") {
        e->constant = Value::boolean(true);
      } else if (n == "false" || n == "False") {
        e->constant = Value::boolean(false);
      } else if (n == "none" || n == "None") {
        e->constant = Value::none();
      } else {
        e->kind = ExprKind::kName;
        e->name = n;
        note_name(n);
      }
      next();
      return e;
    }
    if (t.type == TokenType::kString) {
      std::string s;
      while (cur().type == TokenType::kString) s += next().text;
      auto e = make_expr(ExprKind::kConst, line);
      e->constant = Value::string(std::move(s));
      return e;
    }
    if (t.type == TokenType::kInteger || t.type == TokenType::kFloat) {
      auto e = make_expr(ExprKind::kConst, line);
      e->constant = t.type == TokenType::kInteger ? Value::integer(t.int_value)
                                                  : Value::number(t.float_value);
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(false, true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) return parse_list();
    if (is_op("{")) return parse_dict();
    if (t.type == TokenType::kEof) fail_eof();
    fail("unexpected " + describe(t));
  }

  void note_name(const std::string& n) {
    if (macro_stack_.empty()) return;
    Stmt* m = macro_stack_.back();
    if (n == "caller") m->uses_caller = true;
    if (n == "varargs") m->uses_varargs = true;
    if (n == "kwargs") m->uses_kwargs = true;
  }

  // Comma-separated expressions; a single one without a comma is returned as is.
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const EndTokens& extra,
                      bool explicit_parens) {
    int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra)) break;
      args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) {
        if (cur().type == TokenType::kEof) fail_eof();
        fail("Expected an expression, got " + describe(cur()));
      }
    }
    auto e = make_expr(ExprKind::kTuple, line);
    e->operands = std::move(args);
    return e;
  }

  ExprPtr parse_list() {
    auto e = make_expr(ExprKind::kList, next().line);
    while (!is_op("]")) {
      if (!e->operands.empty()) expect_op(",");
      if (is_op("]")) break;
      e->operands.push_back(parse_expression(true));
    }
    expect_op("]");
    return e;
  }

  ExprPtr parse_dict() {
    auto e = make_expr(ExprKind::kDict, next().line);
    while (!is_op("}")) {
      if (!e->operands.empty()) expect_op(",");
      if (is_op("}")) break;
      e->operands.push_back(parse_expression(true));
      expect_op(":");
      e->operands.push_back(parse_expression(true));
    }
    expect_op("}");
    return e;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    int line = t.line;
    if (t.text == ".") {
      const Token& attr = next();
      if (attr.type == TokenType::kName) {
        auto e = make_expr(ExprKind::kGetattr, line);
        e->operands.push_back(std::move(node));
        e->name = attr.text;
        return e;
      }
      if (attr.type != TokenType::kInteger) fail("expected name or number");
      auto index = make_expr(ExprKind::kConst, line);
      index->constant = Value::integer(attr.int_value);
      auto e = make_expr(ExprKind::kGetitem, line);
      e->operands.push_back(std::move(node));
      e->operands.push_back(std::move(index));
      return e;
    }
    // "["
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    ExprPtr index;
    if (args.size() == 1) {
      index = std::move(args[0]);
    } else {
      index = make_expr(ExprKind::kTuple, line);
      index->operands = std::move(args);
    }
    auto e = make_expr(ExprKind::kGetitem, line);
    e->operands.push_back(std::move(node));
    e->operands.push_back(std::move(index));
    return e;
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    std::vector<ExprPtr> args;
    if (is_op(":")) {
      next();
      args.push_back(nullptr);
    } else {
      ExprPtr node = parse_expression(true);
      if (!is_op(":")) return node;
      next();
      args.push_back(std::move(node));
    }
    if (is_op(":")) {
      args.push_back(nullptr);
    } else if (!is_op("]") && !is_op(",")) {
      args.push_back(parse_expression(true));
    } else {
      args.push_back(nullptr);
    }
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) {
        args.push_back(parse_expression(true));
      } else {
        args.push_back(nullptr);
      }
    } else {
      args.push_back(nullptr);
    }
    auto e = make_expr(ExprKind::kSlice, line);
    e->operands = std::move(args);
    return e;
  }

  // Parses "(args)" into e's operands (after those already present) and kwargs.
  void parse_call_args(Expr* e) {
    int line = cur().line;
    expect_op("(");
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok)
        throw TemplateError(TemplateError::Kind::kSyntax,
                            "invalid syntax for function call expression", line);
    };
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*")) {
        ensure(!e->dyn_args && !e->dyn_kwargs);
        next();
        e->dyn_args = parse_expression(true);
      } else if (is_op("**")) {
        ensure(!e->dyn_kwargs);
        next();
        e->dyn_kwargs = parse_expression(true);
      } else if (cur().type == TokenType::kName && look().type == TokenType::kOperator &&
                 look().text == "=") {
        ensure(!e->dyn_kwargs);
        std::string key = next().text;
        next();
        e->kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!e->dyn_args && !e->dyn_kwargs && e->kwargs.empty());
        e->operands.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make_expr(ExprKind::kCall, cur().line);
    e->operands.push_back(std::move(node));
    parse_call_args(e.get());
    return e;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      auto e = make_expr(ExprKind::kFilter, cur().line);
      e->name = expect_name();
      while (skip_op(".")) e->name.append(1, '.').append(expect_name());
      e->operands.push_back(std::move(node));
      if (is_op("(")) parse_call_args(e.get());
      node = std::move(e);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = next().line;  // "is"
    bool negated = skip_name("not");
    auto e = make_expr(ExprKind::kTest, line);
    e->name = expect_name();
    while (skip_op(".")) e->name.append(1, '.').append(expect_name());
    e->operands.push_back(std::move(node));
    const Token& t = cur();
    bool arg_start = t.type == TokenType::kName || t.type == TokenType::kString ||
                     t.type == TokenType::kInteger || t.type == TokenType::kFloat || is_op("[") ||
                     is_op("{");
    if (is_op("(")) {
      parse_call_args(e.get());
    } else if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      DepthGuard guard(this);
      e->operands.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    auto n = make_expr(ExprKind::kNot, line);
    n->operands.push_back(std::move(e));
    return n;
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<const EndTokens*> end_stack_;
  std::vector<std::string> tag_stack_;
  std::vector<Stmt*> macro_stack_;
};

}  // namespace

Body parse_tokens(std::vector<Token> tokens) {
  return Parser(std::move(tokens)).parse();
}

}  // namespace strata::jinja
