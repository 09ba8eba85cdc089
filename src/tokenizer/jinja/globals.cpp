// Global functions: range, dict, namespace, cycler, joiner (Jinja's defaults) and
// raise_exception, strftime_now (added by transformers).
#include <ctime>
#include <unordered_map>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"

namespace strata::jinja {

namespace {

// Jinja's sandbox refuses longer ranges.
constexpr int64_t kMaxRange = 100000;

Value fn_range(Interp& interp, CallArgs& args) {
  if (!args.keyword.empty()) throw_runtime("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) {
    throw_runtime("range expected 1 to 3 arguments, got " + std::to_string(args.positional.size()));
  }
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const Value& a = args.positional[i];
    if (a.is_undefined()) fail_undefined(a);
    if (!a.is_int() && !a.is_bool()) {
      std::string message = "'";
      message += a.type_name();
      throw_runtime(message + "' object cannot be interpreted as an integer");
    }
  }
  if (args.positional.size() == 1) {
    v[1] = args.positional[0].as_int();
  } else {
    v[0] = args.positional[0].as_int();
    v[1] = args.positional[1].as_int();
    if (args.positional.size() == 3) v[2] = args.positional[2].as_int();
  }
  if (v[2] == 0) throw_runtime("range() arg 3 must not be zero");
  // Length without overflow: computed in long double is exact enough for the limit check.
  long double span = static_cast<long double>(v[1]) - static_cast<long double>(v[0]);
  long double count = span / static_cast<long double>(v[2]);
  if (count > kMaxRange) {
    throw_limit("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                std::to_string(kMaxRange) + ").");
  }
  List out;
  for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1];) {
    out.push_back(Value::integer(i));
    if (__builtin_add_overflow(i, v[2], &i)) break;
  }
  interp.charge(static_cast<int64_t>(out.size()));
  return Value::list(std::move(out));
}

// dict(mapping or pairs, **kwargs)
Value fn_dict(Interp& interp, CallArgs& args) {
  if (args.positional.size() > 1) throw_runtime("dict expected at most 1 argument");
  Dict d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.dict();
    } else {
      for (const Value& pair : iterate(src)) {
        List kv = iterate(pair);
        if (kv.size() != 2) throw_runtime("dictionary update sequence element has wrong length");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.set(Value::string(k), v);
  interp.charge(static_cast<int64_t>(d.size()));
  return Value::dict(std::move(d));
}

Value fn_namespace(Interp& interp, CallArgs& args) {
  auto ns = std::make_shared<NamespaceObject>();
  interp.track(ns);
  CallArgs init = args;
  Value d = fn_dict(interp, init);
  for (const auto& [k, v] : d.dict().entries()) {
    if (!k.is_string()) throw_runtime("namespace() keys must be strings");
    ns->set_attr(k.str(), v);
  }
  return Value::object(ns);
}

class CyclerObject : public Object, public std::enable_shared_from_this<CyclerObject> {
 public:
  explicit CyclerObject(List items) : items_(std::move(items)) {}
  const char* type_name() const override { return "Cycler"; }
  bool get_attr(std::string_view name, Value* out) const override {
    if (name == "current") {
      *out = items_[pos_];
    } else if (name == "next" || name == "reset") {
      *out = Value::object(std::make_shared<Method>(shared_from_this(), name == "next"));
    } else {
      return false;
    }
    return true;
  }

 private:
  class Method : public Object {
   public:
    Method(std::shared_ptr<const CyclerObject> c, bool next) : c_(std::move(c)), next_(next) {}
    const char* type_name() const override { return "method"; }
    bool callable() const override { return true; }
    Value call(Interp&, CallArgs&) const override {
      if (!next_) {
        c_->pos_ = 0;
        return Value::none();
      }
      Value v = c_->items_[c_->pos_];
      c_->pos_ = (c_->pos_ + 1) % c_->items_.size();
      return v;
    }

   private:
    std::shared_ptr<const CyclerObject> c_;
    bool next_;
  };

  List items_;
  mutable size_t pos_ = 0;
};

Value fn_cycler(Interp& interp, CallArgs& args) {
  if (args.positional.empty()) throw_runtime("at least one item has to be provided");
  auto c = std::make_shared<CyclerObject>(args.positional);
  return Value::object(c);
}

class JoinerObject : public Object {
 public:
  explicit JoinerObject(std::string sep) : sep_(std::move(sep)) {}
  const char* type_name() const override { return "Joiner"; }
  bool callable() const override { return true; }
  Value call(Interp&, CallArgs&) const override {
    if (!used_) {
      used_ = true;
      return Value::string("");
    }
    return Value::string(sep_);
  }

 private:
  std::string sep_;
  mutable bool used_ = false;
};

Value fn_joiner(Interp&, CallArgs& args) {
  ArgReader a("joiner", args, {"sep"});
  return Value::object(std::make_shared<JoinerObject>(a.get_string(0, ", ")));
}

Value fn_raise_exception(Interp&, CallArgs& args) {
  std::string message = args.positional.empty() ? "" : to_str(args.positional[0]);
  throw TemplateError(TemplateError::Kind::kRaised, message);
}

Value fn_strftime_now(Interp& interp, CallArgs& args) {
  ArgReader a("strftime_now", args, {"format"});
  std::string format = a.get_string(0, "");
  if (format.empty()) return Value::string("");
  std::time_t now = interp.now();
  std::tm tm{};
  localtime_r(&now, &tm);
  for (size_t size = 256; size <= 256 + format.size() * 128; size *= 4) {
    std::string buf(size, '\0');
    size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
    if (n > 0) {
      buf.resize(n);
      return Value::string(std::move(buf));
    }
  }
  return Value::string("");
}

}  // namespace

const Value* find_global(std::string_view name) {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string_view, Value>();
    auto add = [&](const char* n, BuiltinFunction::Fn fn) {
      (*t)[n] = Value::object(std::make_shared<BuiltinFunction>(n, fn));
    };
    add("range", fn_range);
    add("dict", fn_dict);
    add("namespace", fn_namespace);
    add("cycler", fn_cycler);
    add("joiner", fn_joiner);
    add("raise_exception", fn_raise_exception);
    add("strftime_now", fn_strftime_now);
    return t;
  }();
  auto it = table->find(name);
  return it == table->end() ? nullptr : &it->second;
}

}  // namespace strata::jinja
