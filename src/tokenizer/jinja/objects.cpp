// Objects created while rendering (namespaces, macros, loop contexts, cyclers, joiners), the
// global functions and the argument reader shared by all builtins.
#include <cmath>
#include <ctime>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"

namespace strata::jinja {

// ---- ArgReader ----

ArgReader::ArgReader(const char* function, const CallArgs& args,
                     std::initializer_list<const char*> names)
    : function_(function), slots_(names.size(), nullptr), names_(names) {
  if (args.positional.size() > names.size()) {
    throw_runtime(std::string(function) + "() takes at most " + std::to_string(names.size()) +
                  " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) slots_[i] = &args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < names_.size() && key != names_[i]) ++i;
    if (i == names_.size()) {
      throw_runtime(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
    }
    if (slots_[i] != nullptr) {
      throw_runtime(std::string(function) + "() got multiple values for argument '" + key + "'");
    }
    slots_[i] = &value;
  }
}

const Value& ArgReader::get(size_t i) const {
  static const Value kMissing;
  return has(i) ? *slots_[i] : kMissing;
}

int64_t float_to_int(double d) {
  // 2^63 is exact as a double; every double in [-2^63, 2^63) converts without overflow.
  constexpr double kLimit = 9223372036854775808.0;
  if (std::isnan(d) || std::isinf(d))
    throw_runtime("cannot convert float infinity or NaN to integer");
  if (d < -kLimit || d >= kLimit)
    throw_runtime("integer overflow: " + float_repr(d) + " does not fit in 64 bits");
  return static_cast<int64_t>(d);
}

int64_t ArgReader::get_int(size_t i, int64_t fallback) const {
  if (!has(i) || get(i).is_none()) return fallback;
  const Value& v = get(i);
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float()) return float_to_int(v.as_double());
  if (v.is_undefined()) fail_undefined(v);
  throw_runtime(std::string(function_) + "(): argument '" + names_[i] +
                "' must be an integer, not " + v.type_name());
}

std::string ArgReader::get_string(size_t i, const std::string& fallback) const {
  if (!has(i)) return fallback;
  const Value& v = get(i);
  if (v.is_string()) return v.str();
  if (v.is_undefined()) fail_undefined(v);
  throw_runtime(std::string(function_) + "(): argument '" + names_[i] + "' must be a string, not " +
                v.type_name());
}

std::string unsafe_attribute_message(const Value& obj, std::string_view name) {
  return "access to attribute '" + std::string(name) + "' of '" + obj.type_name() +
         "' object is unsafe.";
}

// ---- NamespaceObject ----

bool NamespaceObject::get_attr(std::string_view name, Value* out) const {
  const Value* v = attrs_.find(name);
  if (v == nullptr) return false;
  *out = *v;
  return true;
}

void NamespaceObject::set_attr(const std::string& name, Value value) {
  note_child_depth(value);
  attrs_.set(Value::string(name), std::move(value));
}

std::string NamespaceObject::repr() const {
  std::string out = "<Namespace {";
  bool first = true;
  for (const auto& [k, v] : attrs_.entries()) {
    if (!first) out += ", ";
    first = false;
    append_repr(&out, k);
    out += ": ";
    append_repr(&out, v);
  }
  return out + "}>";
}

std::string BoundMethod::repr() const {
  return "<built-in method " + name_ + " of " + self_.type_name() + " object>";
}

// ---- MacroObject ----

bool MacroObject::get_attr(std::string_view name, Value* out) const {
  if (name == "name") {
    *out = Value::string(name_);
  } else if (name == "arguments") {
    List params;
    for (const auto& p : stmt_->params) params.push_back(Value::string(p));
    *out = Value::tuple(std::move(params));
  } else if (name == "catch_kwargs") {
    *out = Value::boolean(stmt_->uses_kwargs);
  } else if (name == "catch_varargs") {
    *out = Value::boolean(stmt_->uses_varargs);
  } else if (name == "caller") {
    *out = Value::boolean(stmt_->uses_caller);
  } else {
    return false;
  }
  return true;
}

Value MacroObject::call(Interp& interp, CallArgs& args) const {
  if (closure_ == nullptr) throw_runtime("macro '" + name_ + "' called after rendering ended");
  Interp::CallGuard guard(&interp);
  interp.charge(1);
  const Stmt& s = *stmt_;
  const size_t num_params = s.params.size();
  if (args.positional.size() > num_params && !s.uses_varargs) {
    throw_runtime("macro '" + name_ + "' takes not more than " + std::to_string(num_params) +
                  " argument(s)");
  }
  auto scope = std::make_shared<Scope>(closure_);
  std::vector<bool> bound(num_params, false);
  for (size_t i = 0; i < num_params && i < args.positional.size(); ++i) {
    scope->set(s.params[i], args.positional[i]);
    bound[i] = true;
  }
  Dict extra_kwargs;
  bool has_caller = false;
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < num_params && s.params[i] != key) ++i;
    if (i < num_params) {
      if (bound[i])
        throw_runtime("macro '" + name_ + "' got multiple values for argument '" + key + "'");
      scope->set(key, value);
      bound[i] = true;
    } else if (key == "caller") {
      if (!s.uses_caller) {
        throw_runtime("macro '" + name_ +
                      "' was invoked with a caller ({% call %}) but does not "
                      "use caller()");
      }
      scope->set("caller", value);
      has_caller = true;
    } else if (s.uses_kwargs) {
      extra_kwargs.set(Value::string(key), value);
    } else {
      throw_runtime("macro '" + name_ + "' takes no keyword argument '" + key + "'");
    }
  }
  const size_t first_default = num_params - s.defaults.size();
  for (size_t i = 0; i < num_params; ++i) {
    if (bound[i]) continue;
    if (i >= first_default) {
      scope->set(s.params[i], interp.eval(*s.defaults[i - first_default], scope));
    } else {
      scope->set(s.params[i], Value::undefined("parameter '" + s.params[i] + "' was not provided"));
    }
  }
  if (s.uses_varargs) {
    List rest;
    for (size_t i = num_params; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope->set("varargs", Value::tuple(std::move(rest)));
  }
  if (s.uses_kwargs) scope->set("kwargs", Value::dict(std::move(extra_kwargs)));
  if (s.uses_caller && !has_caller) {
    scope->set("caller", Value::undefined("No caller defined"));
  }
  return Value::string(interp.capture(s.body, scope));
}

// ---- LoopObject ----

namespace {

class LoopMethod : public Object {
 public:
  LoopMethod(std::shared_ptr<const LoopObject> loop, bool cycle)
      : loop_(std::move(loop)), cycle_(cycle) {}
  const char* type_name() const override { return "method"; }
  bool callable() const override { return true; }
  Value call(Interp&, CallArgs& args) const override {
    return cycle_ ? loop_->cycle(args) : loop_->changed(args);
  }

 private:
  std::shared_ptr<const LoopObject> loop_;
  bool cycle_;
};

}  // namespace

bool LoopObject::get_attr(std::string_view name, Value* out) const {
  const auto n = static_cast<int64_t>(items_->size());
  const auto i = static_cast<int64_t>(index0_);
  if (name == "index") {
    *out = Value::integer(i + 1);
  } else if (name == "index0") {
    *out = Value::integer(i);
  } else if (name == "revindex") {
    *out = Value::integer(n - i);
  } else if (name == "revindex0") {
    *out = Value::integer(n - i - 1);
  } else if (name == "first") {
    *out = Value::boolean(i == 0);
  } else if (name == "last") {
    *out = Value::boolean(i == n - 1);
  } else if (name == "length") {
    *out = Value::integer(n);
  } else if (name == "depth") {
    *out = Value::integer(depth0_ + 1);
  } else if (name == "depth0") {
    *out = Value::integer(depth0_);
  } else if (name == "previtem") {
    *out = i > 0 ? (*items_)[index0_ - 1] : Value::undefined("there is no previous item");
  } else if (name == "nextitem") {
    *out = i + 1 < n ? (*items_)[index0_ + 1] : Value::undefined("there is no next item");
  } else if (name == "cycle" || name == "changed") {
    *out = Value::object(std::make_shared<LoopMethod>(shared_from_this(), name == "cycle"));
  } else {
    return false;
  }
  return true;
}

Value LoopObject::call(Interp& interp, CallArgs& args) const {
  if (!stmt_->recursive) return Object::call(interp, args);
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    throw_runtime("loop() takes exactly one argument (the iterable to recurse into)");
  }
  Interp::CallGuard guard(&interp);
  return Value::string(interp.render_loop(*stmt_, args.positional[0], scope_, depth0_ + 1));
}

std::string LoopObject::repr() const {
  return "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(items_->size()) + ">";
}

Value LoopObject::cycle(CallArgs& args) const {
  if (args.positional.empty()) throw_runtime("no items for cycling given");
  return args.positional[index0_ % args.positional.size()];
}

Value LoopObject::changed(CallArgs& args) const {
  if (has_last_changed_ && last_changed_.size() == args.positional.size()) {
    bool same = true;
    for (size_t i = 0; i < last_changed_.size() && same; ++i) {
      same = values_equal(last_changed_[i], args.positional[i]);
    }
    if (same) return Value::boolean(false);
  }
  last_changed_ = args.positional;
  has_last_changed_ = true;
  return Value::boolean(true);
}

}  // namespace strata::jinja
