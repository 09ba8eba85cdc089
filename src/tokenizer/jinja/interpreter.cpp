#include "tokenizer/jinja/interpreter.h"

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"

namespace strata::jinja {

// ---- Scope ----

const Value* Scope::find_local(std::string_view name) const {
  for (const auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(value));
}

// ---- Interp ----

Interp::Interp(const RenderLimits& limits, std::time_t now) : limits_(limits), now_(now) {}

Interp::~Interp() {
  for (auto& object : tracked_) {
    if (auto* ns = dynamic_cast<NamespaceObject*>(object.get())) ns->clear();
    if (auto* macro = dynamic_cast<MacroObject*>(object.get())) macro->clear();
  }
}

Interp::CallGuard::CallGuard(Interp* interp) : interp_(interp) {
  if (++interp_->call_depth_ > interp_->limits_.max_call_depth) {
    --interp_->call_depth_;
    throw_limit("maximum recursion depth exceeded (more than " +
                std::to_string(interp_->limits_.max_call_depth) +
                " nested macro calls or recursive loops)");
  }
}

void Interp::EvalGuard::fail() {
  --interp_->eval_depth_;
  throw_limit("template nesting exceeded " + std::to_string(interp_->limits_.max_eval_depth) +
              " levels of evaluation (deep expressions inside recursive macros)");
}

std::string Interp::render(const Body& body, ScopePtr globals) {
  std::string result;
  out_ = &result;
  auto root = std::make_shared<Scope>(std::move(globals));
  exec(body, root);
  out_ = nullptr;
  return result;
}

void Interp::charge(int64_t units) {
  work_ += units;
  if (work_ > limits_.max_iterations) {
    throw_limit("template exceeded the work limit (" + std::to_string(limits_.max_iterations) +
                " loop iterations, calls and elements)");
  }
}

void Interp::check_size(size_t bytes) const {
  if (static_cast<int64_t>(bytes) > limits_.max_output_bytes) {
    throw_limit("template output exceeds the size limit (" +
                std::to_string(limits_.max_output_bytes) + " bytes)");
  }
}

void Interp::emit(std::string_view text) {
  check_size(out_->size() + text.size());
  out_->append(text);
}

std::string Interp::capture(const Body& body, const ScopePtr& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec(body, scope);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

std::string Interp::render_loop(const Stmt& s, const Value& iterable, const ScopePtr& scope,
                                int depth0) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    run_for(s, iterable, scope, depth0);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Value Interp::resolve(const std::string& name, const ScopePtr& scope) const {
  for (const Scope* s = scope.get(); s != nullptr; s = s->parent.get()) {
    if (const Value* v = s->find_local(name)) return *v;
  }
  if (const Value* g = find_global(name)) return *g;
  return Value::undefined("'" + name + "' is undefined");
}

// ---- statements ----

Interp::Flow Interp::exec(const Body& body, const ScopePtr& scope) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, scope);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

void Interp::assign(const Target& target, const Value& value, const ScopePtr& scope) {
  switch (target.kind) {
    case Target::Kind::kName:
      scope->set(target.name, value);
      return;
    case Target::Kind::kNamespaceAttr: {
      Value ns = resolve(target.name, scope);
      auto* object = ns.is_object() ? dynamic_cast<NamespaceObject*>(ns.object()) : nullptr;
      if (object == nullptr) throw_runtime("cannot assign attribute on non-namespace object");
      object->set_attr(target.attr, value);
      return;
    }
    case Target::Kind::kTuple: {
      List items = iterate(value);
      size_t want = target.items.size();
      if (items.size() < want) {
        throw_runtime("not enough values to unpack (expected " + std::to_string(want) + ", got " +
                      std::to_string(items.size()) + ")");
      }
      if (items.size() > want) {
        throw_runtime("too many values to unpack (expected " + std::to_string(want) + ")");
      }
      for (size_t i = 0; i < want; ++i) assign(target.items[i], items[i], scope);
      return;
    }
  }
}

Interp::Flow Interp::run_for(const Stmt& s, const Value& iterable, const ScopePtr& scope,
                             int depth0) {
  List items = iterate(iterable);
  charge(static_cast<int64_t>(items.size()));
  if (s.cond) {
    List kept;
    for (Value& item : items) {
      auto probe = std::make_shared<Scope>(scope);
      assign(s.target, item, probe);
      if (eval(*s.cond, probe).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (s.else_body.empty()) return Flow::kNormal;
    return exec(s.else_body, std::make_shared<Scope>(scope));
  }
  auto shared_items = std::make_shared<const List>(std::move(items));
  auto loop = std::make_shared<LoopObject>(&s, scope, shared_items, depth0);
  Value loop_value = Value::object(loop);
  for (size_t i = 0; i < shared_items->size(); ++i) {
    charge(1);
    loop->set_index(i);
    auto iteration = std::make_shared<Scope>(scope);
    assign(s.target, (*shared_items)[i], iteration);
    iteration->set("loop", loop_value);
    if (exec(s.body, iteration) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Interp::Flow Interp::exec_stmt(const Stmt& s, const ScopePtr& scope) {
  EvalGuard guard(this);
  try {
    switch (s.kind) {
      case StmtKind::kOutput:
        emit(s.text);
        return Flow::kNormal;
      case StmtKind::kPrint: {
        Value v = eval(*s.expr, scope);
        if (v.is_string()) {
          emit(v.str());
        } else {
          std::string text;
          append_str(&text, v);
          emit(text);
        }
        return Flow::kNormal;
      }
      case StmtKind::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (eval(*cond, scope).truthy()) return exec(body, scope);
        }
        return exec(s.else_body, scope);
      case StmtKind::kFor:
        return run_for(s, eval(*s.expr, scope), scope, 0);
      case StmtKind::kSet:
        assign(s.target, eval(*s.expr, scope), scope);
        return Flow::kNormal;
      case StmtKind::kSetBlock: {
        Value v = Value::string(capture(s.body, std::make_shared<Scope>(scope)));
        if (s.filter) v = eval_filter(*s.filter, scope, &v);
        assign(s.target, v, scope);
        return Flow::kNormal;
      }
      case StmtKind::kMacro: {
        auto macro = std::make_shared<MacroObject>(&s, s.name, scope);
        track(macro);
        scope->set(s.name, Value::object(macro));
        return Flow::kNormal;
      }
      case StmtKind::kCallBlock: {
        auto caller = std::make_shared<MacroObject>(&s, "caller", scope);
        track(caller);
        const Expr& call_expr = *s.expr;
        Value callee = eval(*call_expr.operands[0], scope);
        CallArgs args = eval_args(call_expr, 1, scope);
        args.keyword.emplace_back("caller", Value::object(caller));
        Value result = call(callee, args);
        std::string text;
        append_str(&text, result);
        emit(text);
        return Flow::kNormal;
      }
      case StmtKind::kFilterBlock: {
        Value v = Value::string(capture(s.body, std::make_shared<Scope>(scope)));
        Value result = eval_filter(*s.filter, scope, &v);
        std::string text;
        append_str(&text, result);
        emit(text);
        return Flow::kNormal;
      }
      case StmtKind::kWith: {
        std::vector<Value> values;
        for (const auto& e : s.with_values) values.push_back(eval(*e, scope));
        auto inner = std::make_shared<Scope>(scope);
        for (size_t i = 0; i < values.size(); ++i) assign(s.with_targets[i], values[i], inner);
        return exec(s.body, inner);
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kScope:
        return exec(s.body, std::make_shared<Scope>(scope));
    }
  } catch (TemplateError& e) {
    e.set_line_if_unknown(s.line);
    throw;
  }
  return Flow::kNormal;
}

}  // namespace strata::jinja
