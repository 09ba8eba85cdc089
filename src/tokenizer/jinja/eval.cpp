// Expression evaluation for Interp: names, literals, attribute/item access, calls, filters,
// tests and operators.
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"

namespace strata::jinja {

namespace {

std::string no_attribute(const Value& obj, const std::string& name) {
  if (obj.is_none()) return "'None' has no attribute '" + name + "'";
  std::string message = "'";
  message += obj.type_name();
  message += " object' has no attribute '" + name + "'";
  return message;
}

std::string no_element(const Value& obj, const Value& key) {
  if (obj.is_none()) return "None has no element " + repr(key);
  return obj.type_name() + " object has no element " + repr(key);
}

bool is_builtin_container(const Value& v) {
  return v.is_string() || v.is_sequence() || v.is_dict();
}

}  // namespace

void fail_undefined(const Value& v) {
  const std::string& m = v.undefined_message();
  throw_runtime(m.empty() ? "value is undefined" : m);
}

Value Interp::get_attribute(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (is_builtin_container(obj)) {
    MethodKind kind = method_kind(obj, name);
    if (kind == MethodKind::kSafe) return Value::object(std::make_shared<BoundMethod>(obj, name));
    if (kind == MethodKind::kUnsafe) return Value::undefined(unsafe_attribute_message(obj, name));
    if (obj.is_dict()) {
      if (const Value* v = obj.dict().find(std::string_view(name))) return *v;
    }
  } else if (obj.is_object()) {
    Value out;
    if (obj.object()->get_attr(name, &out)) return out;
  }
  return Value::undefined(no_attribute(obj, name));
}

Value Interp::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if ((obj.is_sequence() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t n = value_length(obj);
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (obj.is_sequence()) return obj.items()[static_cast<size_t>(i)];
      Value one = Value::integer(i);
      Value two = Value::integer(i + 1);
      return slice_value(obj, &one, &two, nullptr);
    }
    return Value::undefined(no_element(obj, key));
  }
  if (key.is_string()) return get_attribute(obj, key.str());
  return Value::undefined(no_element(obj, key));
}

Value Interp::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.is_object() && callee.object()->callable()) return callee.object()->call(*this, args);
  throw_runtime("'" + callee.type_name() + "' object is not callable");
}

CallArgs Interp::eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
  CallArgs args;
  for (size_t i = first; i < e.operands.size(); ++i) {
    args.positional.push_back(eval(*e.operands[i], scope));
  }
  for (const auto& [name, value] : e.kwargs) args.keyword.emplace_back(name, eval(*value, scope));
  if (e.dyn_args) {
    for (Value& v : iterate(eval(*e.dyn_args, scope))) args.positional.push_back(std::move(v));
  }
  if (e.dyn_kwargs) {
    Value d = eval(*e.dyn_kwargs, scope);
    if (!d.is_dict()) throw_runtime("argument after ** must be a mapping, not " + d.type_name());
    for (const auto& [k, v] : d.dict().entries()) {
      if (!k.is_string()) throw_runtime("keywords must be strings");
      args.keyword.emplace_back(k.str(), v);
    }
  }
  return args;
}

Value Interp::eval_call(const Expr& e, const ScopePtr& scope) {
  const Expr& callee_expr = *e.operands[0];
  if (callee_expr.kind == ExprKind::kGetattr) {
    // obj.method(...): call builtin methods directly instead of building a bound method.
    Value obj = eval(*callee_expr.operands[0], scope);
    if (is_builtin_container(obj)) {
      MethodKind kind = method_kind(obj, callee_expr.name);
      if (kind == MethodKind::kSafe) {
        CallArgs args = eval_args(e, 1, scope);
        return call_method(*this, obj, callee_expr.name, args);
      }
      if (kind == MethodKind::kUnsafe)
        throw_runtime(unsafe_attribute_message(obj, callee_expr.name));
    }
    Value callee = get_attribute(obj, callee_expr.name);
    CallArgs args = eval_args(e, 1, scope);
    return call(callee, args);
  }
  Value callee = eval(callee_expr, scope);
  CallArgs args = eval_args(e, 1, scope);
  return call(callee, args);
}

Value Interp::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (fn == nullptr) throw_runtime("No filter named '" + name + "'.");
  return fn(*this, input, args);
}

bool Interp::apply_test(const std::string& name, const Value& input, CallArgs& args) {
  TestFn fn = find_test(name);
  if (fn == nullptr) throw_runtime("No test named '" + name + "'.");
  return fn(*this, input, args);
}

Value Interp::eval_filter(const Expr& e, const ScopePtr& scope, const Value* block_input) {
  Value input;
  const Expr* inner = e.operands[0].get();
  if (inner == nullptr) {
    input = *block_input;
  } else if (inner->kind == ExprKind::kFilter && block_input != nullptr) {
    input = eval_filter(*inner, scope, block_input);
  } else {
    input = eval(*inner, scope);
  }
  CallArgs args = eval_args(e, 1, scope);
  return apply_filter(e.name, input, args);
}

namespace {

bool compare_op(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::kEq:
      return values_equal(a, b);
    case CmpOp::kNe:
      return !values_equal(a, b);
    case CmpOp::kLt:
      return compare_values(a, b, "<") < 0;
    case CmpOp::kLe:
      return compare_values(a, b, "<=") <= 0;
    case CmpOp::kGt:
      return compare_values(a, b, ">") > 0;
    case CmpOp::kGe:
      return compare_values(a, b, ">=") >= 0;
    case CmpOp::kIn:
      return contains(b, a);
    case CmpOp::kNotIn:
      return !contains(b, a);
  }
  return false;
}

}  // namespace

Value Interp::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.operands[0], scope);
  for (size_t i = 0; i < e.cmp_ops.size(); ++i) {
    Value right = eval(*e.operands[i + 1], scope);
    if (!compare_op(e.cmp_ops[i], left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interp::eval(const Expr& e, const ScopePtr& scope) {
  EvalGuard guard(this);
  switch (e.kind) {
    case ExprKind::kConst:
      return e.constant;
    case ExprKind::kName:
      return resolve(e.name, scope);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      items.reserve(e.operands.size());
      for (const auto& op : e.operands) items.push_back(eval(*op, scope));
      return e.kind == ExprKind::kList ? Value::list(std::move(items))
                                       : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.operands.size(); i += 2) {
        d.set(eval(*e.operands[i], scope), eval(*e.operands[i + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetattr:
      return get_attribute(eval(*e.operands[0], scope), e.name);
    case ExprKind::kGetitem: {
      Value obj = eval(*e.operands[0], scope);
      const Expr& index = *e.operands[1];
      if (index.kind == ExprKind::kSlice) {
        if (obj.is_undefined()) fail_undefined(obj);
        Value parts[3];
        const Value* ptrs[3] = {nullptr, nullptr, nullptr};
        for (int i = 0; i < 3; ++i) {
          if (index.operands[i]) {
            parts[i] = eval(*index.operands[i], scope);
            ptrs[i] = &parts[i];
          }
        }
        return slice_value(obj, ptrs[0], ptrs[1], ptrs[2]);
      }
      return get_item(obj, eval(index, scope));
    }
    case ExprKind::kSlice:
      throw_runtime("a slice is only allowed inside []");
    case ExprKind::kCall:
      return eval_call(e, scope);
    case ExprKind::kFilter:
      return eval_filter(e, scope, nullptr);
    case ExprKind::kTest: {
      Value input = eval(*e.operands[0], scope);
      CallArgs args = eval_args(e, 1, scope);
      return Value::boolean(apply_test(e.name, input, args));
    }
    case ExprKind::kNot:
      return Value::boolean(!eval(*e.operands[0], scope).truthy());
    case ExprKind::kNeg:
      return negate(eval(*e.operands[0], scope));
    case ExprKind::kPos: {
      Value v = eval(*e.operands[0], scope);
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) throw_runtime("bad operand type for unary +: '" + v.type_name() + "'");
      return v.is_bool() ? Value::integer(v.as_int()) : v;
    }
    case ExprKind::kBinary:
      return binary_op(*this, e.bin_op, eval(*e.operands[0], scope), eval(*e.operands[1], scope));
    case ExprKind::kAnd: {
      Value left = eval(*e.operands[0], scope);
      if (!left.truthy()) return left;
      return eval(*e.operands[1], scope);
    }
    case ExprKind::kOr: {
      Value left = eval(*e.operands[0], scope);
      if (left.truthy()) return left;
      return eval(*e.operands[1], scope);
    }
    case ExprKind::kConcat: {
      std::string s;
      for (const auto& op : e.operands) {
        append_str(&s, eval(*op, scope));
        check_size(s.size());
      }
      return Value::string(std::move(s));
    }
    case ExprKind::kCompare:
      return eval_compare(e, scope);
    case ExprKind::kCondExpr: {
      if (eval(*e.operands[0], scope).truthy()) return eval(*e.operands[1], scope);
      if (e.operands[2]) return eval(*e.operands[2], scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value();
}

}  // namespace strata::jinja
