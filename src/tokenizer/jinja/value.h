// Values of the Jinja interpreter, with Python semantics: None/bool/int/float/str/list/tuple/dict
// plus Undefined (Jinja's default Undefined) and objects (namespaces, loop contexts, callables).
// Strings are UTF-8; lists, dicts and strings are immutable and shared (copying a Value is cheap).
// Dicts keep insertion order like Python's dict.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace strata::jinja {

class Value;
class Dict;
class Object;
class Interp;

using List = std::vector<Value>;

// Arguments of a call, filter or test (without the filtered/tested value).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kObject,
  };

  Value() : i_(0) {}  // Undefined without a message
  // An Undefined whose misuse (attribute access, arithmetic, ...) fails with `message`, e.g.
  // "'dict object' has no attribute 'x'".
  static Value undefined(std::string message);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(List items);
  static Value tuple(List items);
  static Value dict(Dict d);
  static Value object(std::shared_ptr<Object> o);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // int, float or bool (Python's bool is an int).
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kTuple; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Accessors; each requires the matching kind.
  bool as_bool() const { return b_; }
  int64_t as_int() const { return is_bool() ? (b_ ? 1 : 0) : i_; }  // int or bool
  double as_double() const;                                         // int, bool or float
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  const List& items() const { return *static_cast<const List*>(ptr_.get()); }  // list or tuple
  const Dict& dict() const { return *static_cast<const Dict*>(ptr_.get()); }
  Object* object() const { return static_cast<Object*>(const_cast<void*>(ptr_.get())); }
  // The message of an Undefined ("" for a plain undefined name without context).
  const std::string& undefined_message() const;

  // Python truthiness (Undefined is false).
  bool truthy() const;
  // Python's type name: "str", "int", "list", "dict", "NoneType", ...
  std::string type_name() const;
  // True when both refer to the same shared object (Python's `is` for containers and objects).
  bool same_object(const Value& other) const { return ptr_ == other.ptr_; }
  // Nesting depth: 0 for scalars, 1 + the deepest element for containers and objects.
  int depth() const;

 private:
  Kind kind_ = Kind::kUndefined;
  uint16_t depth_ = 0;
  union {
    bool b_;
    int64_t i_;
    double f_;
  };
  std::shared_ptr<const void> ptr_;
};

// An insertion-ordered dict. Lookups are linear for small dicts and hashed (string keys) above.
class Dict {
 public:
  using Entry = std::pair<Value, Value>;

  // Inserts or replaces (a replaced key keeps its position, like Python).
  void set(Value key, Value value);
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  static constexpr size_t kIndexThreshold = 8;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t> string_index_;  // built past kIndexThreshold entries
};

// Values nest at most this deep (lists of lists, namespaces holding lists, ...); building a deeper
// value is a template error. This bounds every recursive walk (repr, tojson, equality, freeing).
inline constexpr int kMaxValueDepth = 200;

// Namespaces, loop contexts, macros and builtin functions.
class Object {
 public:
  virtual ~Object() = default;
  // Python-ish type name used in messages ("namespace", "function", "LoopContext").
  virtual const char* type_name() const = 0;
  // Attribute lookup; false when the object has no such attribute.
  virtual bool get_attr(std::string_view name, Value* out) const { return false; }
  virtual bool callable() const { return false; }
  // Calls the object; the default throws "'X' object is not callable".
  virtual Value call(Interp& interp, CallArgs& args) const;
  virtual std::string repr() const;
  // Nesting depth of what the object holds (kept up to date by mutable objects).
  int depth() const { return depth_; }

 protected:
  // Raises the depth to 1 + `value`'s depth; throws when that exceeds kMaxValueDepth.
  void note_child_depth(const Value& value) const;

 private:
  mutable int depth_ = 1;
};

// Python equality (1 == 1.0 == True, list == list elementwise, dict == dict ignoring order).
bool values_equal(const Value& a, const Value& b);
// Python ordering: <0, 0, >0. Throws a TemplateError for unorderable types ("'<' not supported
// between instances of 'str' and 'int'").
int compare_values(const Value& a, const Value& b, const char* op = "<");

// Python str() and repr().
std::string to_str(const Value& v);
std::string repr(const Value& v);
void append_str(std::string* out, const Value& v);
void append_repr(std::string* out, const Value& v);
// Python's repr() of a float: shortest round-trip digits, "1.0", "1e+16", "inf", "nan".
std::string float_repr(double d);
// Python's repr() of a str: quotes chosen like Python, escapes for non-printables.
void append_string_repr(std::string* out, std::string_view s);

}  // namespace strata::jinja
