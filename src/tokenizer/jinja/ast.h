// The Jinja syntax tree. Built once by the parser and never modified afterwards, so one parsed
// template can be rendered from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace strata::jinja {

enum class ExprKind : uint8_t {
  kConst,     // constant
  kName,      // name
  kList,      // operands: elements
  kTuple,     // operands: elements
  kDict,      // operands: key0, value0, key1, value1, ...
  kGetattr,   // operands: [object]; name: attribute
  kGetitem,   // operands: [object, index]
  kSlice,     // operands: [start, stop, step], each may be null
  kCall,      // operands: [callee, positional args...]; kwargs
  kFilter,    // operands: [input (null inside filter blocks), args...]; name; kwargs
  kTest,      // operands: [input, args...]; name; kwargs
  kNot,       // operands: [x]
  kNeg,       // operands: [x]
  kPos,       // operands: [x]
  kBinary,    // operands: [left, right]; bin_op
  kAnd,       // operands: [left, right]
  kOr,        // operands: [left, right]
  kConcat,    // operands: parts joined with ~
  kCompare,   // operands: [first, then one per cmp_ops entry]
  kCondExpr,  // operands: [test, then, else (may be null)]
};

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  Value constant;
  std::string name;
  BinOp bin_op = BinOp::kAdd;
  std::vector<ExprPtr> operands;
  std::vector<CmpOp> cmp_ops;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args;    // *args
  ExprPtr dyn_kwargs;  // **kwargs
};

// Left side of set/for/with: a name, a tuple of targets, or ns.attr.
struct Target {
  enum class Kind : uint8_t { kName, kTuple, kNamespaceAttr };
  Kind kind = Kind::kName;
  std::string name;
  std::string attr;           // kNamespaceAttr
  std::vector<Target> items;  // kTuple
};

enum class StmtKind : uint8_t {
  kOutput,       // text
  kPrint,        // expr
  kIf,           // branches (a null condition is the else branch)
  kFor,          // target, expr (iterable), cond (inline if), body, else_body, recursive
  kSet,          // target, expr
  kSetBlock,     // target, body, filter (may be null)
  kMacro,        // name, params, defaults, body
  kCallBlock,    // expr (the call), params, defaults, body
  kFilterBlock,  // filter, body
  kWith,         // with_targets, with_values, body
  kBreak,
  kContinue,
  kScope,  // body rendered inline ({% generation %}, {% block %})
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::kOutput;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  ExprPtr filter;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Target target;
  Body body;
  Body else_body;
  bool recursive = false;
  // Macros and call blocks.
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  bool uses_caller = false;
  bool uses_varargs = false;
  bool uses_kwargs = false;
  // {% with %}
  std::vector<Target> with_targets;
  std::vector<ExprPtr> with_values;
};

}  // namespace strata::jinja
