// The tree-walking evaluator. One Interp renders one template once (it is not shared between
// threads); the syntax tree it walks is shared and read-only. Errors are thrown as TemplateError
// and turned into a Status by jinja::Template.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/value.h"

namespace strata::jinja {

// Bounds that keep hostile templates from using unbounded time, memory or stack.
struct RenderLimits {
  int64_t max_output_bytes = 64ll << 20;  // output and every string built while rendering
  int64_t max_iterations = 10'000'000;    // loop iterations, calls and list elements built
  int max_call_depth = 64;                // nested macro calls / recursive loops
  int max_eval_depth = 1500;              // nested expression/statement evaluations in all
};

// A variable scope. Loop bodies, macros and `with` get a child scope; `if` does not.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  explicit Scope(std::shared_ptr<Scope> p) : parent(std::move(p)) {}
  const Value* find_local(std::string_view name) const;
  void set(std::string_view name, Value value);
};
using ScopePtr = std::shared_ptr<Scope>;

class Interp {
 public:
  Interp(const RenderLimits& limits, std::time_t now);
  ~Interp();

  // Renders `body` with `globals` as the outermost variables.
  std::string render(const Body& body, ScopePtr globals);

  // ---- used by filters, tests, methods and callable objects ----
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);
  // Python getattr / getitem with the sandbox's rules (Jinja's environment.getattr/getitem).
  Value get_attribute(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  // Counts work (loop iterations, elements built); throws past RenderLimits::max_iterations.
  void charge(int64_t units);
  // Throws when a string of `bytes` would exceed RenderLimits::max_output_bytes.
  void check_size(size_t bytes) const;
  std::time_t now() const { return now_; }
  const RenderLimits& limits() const { return limits_; }
  // Registers a namespace or macro whose references are dropped when rendering ends, which breaks
  // reference cycles such as {% set ns.self = ns %}.
  void track(std::shared_ptr<Object> object) { tracked_.push_back(std::move(object)); }

  // ---- evaluation (also used by macro and loop objects) ----
  Value eval(const Expr& e, const ScopePtr& scope);
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body, const ScopePtr& scope);
  // Runs `body` with output captured into the returned string.
  std::string capture(const Body& body, const ScopePtr& scope);
  // Runs a for loop over `iterable`.
  Flow run_for(const Stmt& s, const Value& iterable, const ScopePtr& scope, int depth0);
  // The recursive `loop(iterable)` call: runs the loop again and returns its output.
  std::string render_loop(const Stmt& s, const Value& iterable, const ScopePtr& scope, int depth0);
  void assign(const Target& target, const Value& value, const ScopePtr& scope);

  // Nesting guard for macro calls and recursive loops.
  struct CallGuard {
    explicit CallGuard(Interp* interp);
    ~CallGuard() { --interp_->call_depth_; }
    Interp* interp_;
  };

  // Bounds the evaluator's recursion (and so its stack use) across nested calls.
  struct EvalGuard {
    explicit EvalGuard(Interp* interp) : interp_(interp) {
      if (++interp_->eval_depth_ > interp_->limits_.max_eval_depth) fail();
    }
    ~EvalGuard() { --interp_->eval_depth_; }
    [[noreturn]] void fail();
    Interp* interp_;
  };

 private:
  Flow exec_stmt(const Stmt& s, const ScopePtr& scope);
  Value eval_call(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const Expr& e, size_t first, const ScopePtr& scope);
  Value eval_filter(const Expr& e, const ScopePtr& scope, const Value* block_input);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value resolve(const std::string& name, const ScopePtr& scope) const;
  void emit(std::string_view text);

  RenderLimits limits_;
  std::time_t now_;
  std::string* out_ = nullptr;
  int64_t work_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  std::vector<std::shared_ptr<Object>> tracked_;
};

// Binary and unary operators with Python semantics (used by the evaluator and filters).
Value binary_op(Interp& interp, BinOp op, const Value& a, const Value& b);
Value negate(const Value& v);
// Iterates like Python's iter(): list/tuple items, dict keys, string characters; Undefined is
// empty; anything else throws "'int' object is not iterable".
List iterate(const Value& v);
// Python membership (`needle in haystack`).
bool contains(const Value& haystack, const Value& needle);
// Python slicing with negative indices and steps; null bounds are omitted ones.
Value slice_value(const Value& v, const Value* start, const Value* stop, const Value* step);
// Python's len() for str (code points), list, tuple, dict; -1 when the value has no length.
int64_t value_length(const Value& v);
// Throws the error an Undefined carries ("'x' is undefined", ...).
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace strata::jinja
