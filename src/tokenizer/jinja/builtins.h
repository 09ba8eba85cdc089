// Builtin filters, tests, methods of str/list/dict, global functions and the objects the
// interpreter creates (namespaces, macros, loop contexts). Semantics follow Jinja2 3.1 under
// transformers' settings (ImmutableSandboxedEnvironment: list/dict mutators are refused).
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/value.h"

namespace strata::jinja {

using FilterFn = Value (*)(Interp& interp, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interp& interp, const Value& input, CallArgs& args);

// nullptr when unknown.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
// Builtin global functions: range, dict, namespace, cycler, joiner, raise_exception,
// strftime_now. nullptr when unknown.
const Value* find_global(std::string_view name);

// Methods of str, list, tuple and dict values.
enum class MethodKind { kNone, kSafe, kUnsafe };
MethodKind method_kind(const Value& self, std::string_view name);
// Calls a safe method; requires method_kind(self, name) == kSafe.
Value call_method(Interp& interp, const Value& self, const std::string& name, CallArgs& args);

// Python's printf-style `fmt % args` and str.format(*args, **kwargs).
std::string percent_format(Interp& interp, const std::string& fmt, const Value& args);
std::string str_format(Interp& interp, const std::string& fmt, CallArgs& args);

// Binds positional and keyword arguments to named parameters; unknown keywords, duplicates and
// too many positionals throw TypeError-style messages naming `function`.
class ArgReader {
 public:
  ArgReader(const char* function, const CallArgs& args, std::initializer_list<const char*> names);
  bool has(size_t i) const { return i < slots_.size() && slots_[i] != nullptr; }
  // The argument, or an Undefined when it was not given.
  const Value& get(size_t i) const;
  Value get_or(size_t i, const Value& fallback) const { return has(i) ? get(i) : fallback; }
  int64_t get_int(size_t i, int64_t fallback) const;
  bool get_truthy(size_t i, bool fallback) const { return has(i) ? get(i).truthy() : fallback; }
  // Requires a string when given.
  std::string get_string(size_t i, const std::string& fallback) const;

 private:
  const char* function_;
  std::vector<const Value*> slots_;
  std::vector<const char*> names_;
};

// ---- objects ----

class NamespaceObject : public Object {
 public:
  const char* type_name() const override { return "Namespace"; }
  bool get_attr(std::string_view name, Value* out) const override;
  std::string repr() const override;
  void set_attr(const std::string& name, Value value);
  void clear() { attrs_ = Dict(); }

 private:
  Dict attrs_;
};

// A builtin function value (a global such as range, or a bound method of a str/list/dict).
class BuiltinFunction : public Object {
 public:
  using Fn = Value (*)(Interp& interp, CallArgs& args);
  BuiltinFunction(const char* name, Fn fn) : name_(name), fn_(fn) {}
  const char* type_name() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  Value call(Interp& interp, CallArgs& args) const override { return fn_(interp, args); }
  std::string repr() const override { return std::string("<built-in function ") + name_ + ">"; }

 private:
  const char* name_;
  Fn fn_;
};

class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  const char* type_name() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  Value call(Interp& interp, CallArgs& args) const override {
    return call_method(interp, self_, name_, args);
  }
  std::string repr() const override;

 private:
  Value self_;
  std::string name_;
};

// A macro (or the body of a {% call %} block, exposed to the macro as `caller`).
class MacroObject : public Object {
 public:
  MacroObject(const Stmt* stmt, std::string name, ScopePtr closure)
      : stmt_(stmt), name_(std::move(name)), closure_(std::move(closure)) {}
  const char* type_name() const override { return "Macro"; }
  bool callable() const override { return true; }
  bool get_attr(std::string_view name, Value* out) const override;
  Value call(Interp& interp, CallArgs& args) const override;
  std::string repr() const override { return "<Macro '" + name_ + "'>"; }
  void clear() { closure_.reset(); }

 private:
  const Stmt* stmt_;
  std::string name_;
  ScopePtr closure_;
};

// `loop` inside a for loop.
class LoopObject : public Object, public std::enable_shared_from_this<LoopObject> {
 public:
  LoopObject(const Stmt* stmt, ScopePtr scope, std::shared_ptr<const List> items, int depth0)
      : stmt_(stmt), scope_(std::move(scope)), items_(std::move(items)), depth0_(depth0) {}
  const char* type_name() const override { return "LoopContext"; }
  bool get_attr(std::string_view name, Value* out) const override;
  bool callable() const override { return stmt_->recursive; }
  Value call(Interp& interp, CallArgs& args) const override;
  std::string repr() const override;
  void set_index(size_t index0) { index0_ = index0; }
  Value cycle(CallArgs& args) const;
  Value changed(CallArgs& args) const;

 private:
  const Stmt* stmt_;
  ScopePtr scope_;
  std::shared_ptr<const List> items_;
  int depth0_;
  size_t index0_ = 0;
  mutable bool has_last_changed_ = false;
  mutable List last_changed_;
};

// A float as an integer, truncated toward zero as Python's int() does. A runtime error when it is
// NaN, infinite or outside int64 (where Python would make a big integer).
int64_t float_to_int(double d);

// The sandbox refuses list/dict mutators; accessing one gives an Undefined carrying this message.
std::string unsafe_attribute_message(const Value& obj, std::string_view name);

// Python's json.dumps(value, ensure_ascii, indent, separators, sort_keys) as transformers' tojson
// filter calls it. `indent` < 0 means None; `indent_text` overrides it when not empty.
struct JsonOptions {
  bool ensure_ascii = false;
  int indent = -1;
  std::string indent_text;  // indent given as a string
  bool has_indent = false;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string to_json(Interp& interp, const Value& value, const JsonOptions& options);

}  // namespace strata::jinja
