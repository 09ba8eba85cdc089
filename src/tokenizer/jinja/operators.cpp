// Python semantics of the arithmetic operators, iteration, membership, slicing and len().
#include <cmath>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/interpreter.h"
#include "tokenizer/jinja/unicode.h"

namespace strata::jinja {

namespace {

const char* op_symbol(BinOp op) {
  switch (op) {
    case BinOp::kAdd:
      return "+";
    case BinOp::kSub:
      return "-";
    case BinOp::kMul:
      return "*";
    case BinOp::kDiv:
      return "/";
    case BinOp::kFloorDiv:
      return "//";
    case BinOp::kMod:
      return "%";
    case BinOp::kPow:
      return "**";
  }
  return "?";
}

[[noreturn]] void unsupported(BinOp op, const Value& a, const Value& b) {
  if (op == BinOp::kAdd && (a.is_string() || a.is_list() || a.is_tuple())) {
    throw_runtime("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " +
                  a.type_name());
  }
  throw_runtime(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" +
                a.type_name() + "' and '" + b.type_name() + "'");
}

[[noreturn]] void overflow() {
  throw_runtime("integer overflow: the result does not fit in 64 bits");
}

Value repeat(Interp& interp, const Value& seq, int64_t times) {
  if (times <= 0)
    return seq.is_string() ? Value::string("")
                           : (seq.is_list() ? Value::list({}) : Value::tuple({}));
  if (seq.is_string()) {
    interp.check_size(seq.str().size() * static_cast<size_t>(times));
    std::string out;
    out.reserve(seq.str().size() * static_cast<size_t>(times));
    for (int64_t i = 0; i < times; ++i) out += seq.str();
    return Value::string(std::move(out));
  }
  const List& items = seq.items();
  interp.charge(static_cast<int64_t>(items.size()) * times);
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_list() ? Value::list(std::move(out)) : Value::tuple(std::move(out));
}

int64_t int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) overflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
  }
  return result;
}

}  // namespace

Value binary_op(Interp& interp, BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  bool numbers = a.is_number() && b.is_number();
  bool floats = numbers && (a.is_float() || b.is_float());
  switch (op) {
    case BinOp::kAdd:
      if (numbers) {
        if (floats) return Value::number(a.as_double() + b.as_double());
        int64_t r;
        if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value::integer(r);
      }
      if (a.is_string() && b.is_string()) {
        interp.check_size(a.str().size() + b.str().size());
        return Value::string(a.str() + b.str());
      }
      if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
        interp.charge(static_cast<int64_t>(a.items().size() + b.items().size()));
        List out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return a.is_list() ? Value::list(std::move(out)) : Value::tuple(std::move(out));
      }
      unsupported(op, a, b);
    case BinOp::kSub:
      if (!numbers) unsupported(op, a, b);
      if (floats) return Value::number(a.as_double() - b.as_double());
      {
        int64_t r;
        if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value::integer(r);
      }
    case BinOp::kMul:
      if (numbers) {
        if (floats) return Value::number(a.as_double() * b.as_double());
        int64_t r;
        if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) overflow();
        return Value::integer(r);
      }
      if ((a.is_string() || a.is_sequence()) && (b.is_int() || b.is_bool())) {
        return repeat(interp, a, b.as_int());
      }
      if ((b.is_string() || b.is_sequence()) && (a.is_int() || a.is_bool())) {
        return repeat(interp, b, a.as_int());
      }
      unsupported(op, a, b);
    case BinOp::kDiv:
      if (!numbers) unsupported(op, a, b);
      if (b.as_double() == 0.0) throw_runtime("division by zero");
      return Value::number(a.as_double() / b.as_double());
    case BinOp::kFloorDiv:
      if (!numbers) unsupported(op, a, b);
      if (floats) {
        if (b.as_double() == 0.0) throw_runtime("float floor division by zero");
        return Value::number(std::floor(a.as_double() / b.as_double()));
      } else {
        int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) throw_runtime("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) overflow();
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value::integer(q);
      }
    case BinOp::kMod:
      if (a.is_string()) return Value::string(percent_format(interp, a.str(), b));
      if (!numbers) unsupported(op, a, b);
      if (floats) {
        double y = b.as_double();
        if (y == 0.0) throw_runtime("float modulo");
        double r = std::fmod(a.as_double(), y);
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value::number(r);
      } else {
        int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) throw_runtime("integer modulo by zero");
        if (y == -1) return Value::integer(0);
        int64_t r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return Value::integer(r);
      }
    case BinOp::kPow:
      if (!numbers) unsupported(op, a, b);
      if (!floats && b.as_int() >= 0) return Value::integer(int_pow(a.as_int(), b.as_int()));
      if (a.as_double() == 0.0 && b.as_double() < 0) {
        throw_runtime("0.0 cannot be raised to a negative power");
      }
      return Value::number(std::pow(a.as_double(), b.as_double()));
  }
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return Value::number(-v.as_double());
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) overflow();
    return Value::integer(-v.as_int());
  }
  throw_runtime("bad operand type for unary -: '" + v.type_name() + "'");
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return v.items();
    case Value::Kind::kDict: {
      List keys;
      keys.reserve(v.dict().size());
      for (const auto& [k, val] : v.dict().entries()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      const std::string& s = v.str();
      for (size_t pos = 0; pos < s.size();) {
        size_t start = pos;
        unicode::decode(s, &pos);
        chars.push_back(Value::string(s.substr(start, pos - start)));
      }
      return chars;
    }
    default:
      throw_runtime("'" + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!needle.is_string()) {
        throw_runtime("'in <string>' requires string as left operand, not " + needle.type_name());
      }
      return haystack.str().find(needle.str()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const Value& item : haystack.items()) {
        if (values_equal(item, needle)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return haystack.dict().find(needle) != nullptr;
    default:
      throw_runtime("argument of type '" + haystack.type_name() + "' is not iterable");
  }
}

int64_t value_length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(unicode::length(v.str()));
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return static_cast<int64_t>(v.items().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().size());
    default:
      return -1;
  }
}

namespace {

// CPython's PySlice_AdjustIndices.
int64_t adjust(const Value* bound, int64_t length, int64_t step, bool is_start) {
  int64_t lower = step < 0 ? -1 : 0;
  int64_t upper = step < 0 ? length - 1 : length;
  if (bound == nullptr || bound->is_none()) {
    if (is_start) return step < 0 ? upper : lower;
    return step < 0 ? lower : upper;
  }
  int64_t i = bound->as_int();
  if (i < 0) {
    i += length;
    if (i < lower) i = lower;
  } else if (i > upper) {
    i = upper;
  }
  return i;
}

bool valid_index(const Value* v) {
  return v == nullptr || v->is_none() || v->is_int() || v->is_bool();
}

}  // namespace

Value slice_value(const Value& v, const Value* start, const Value* stop, const Value* step) {
  if (!valid_index(start) || !valid_index(stop) || !valid_index(step)) {
    for (const Value* b : {start, stop, step}) {
      if (b != nullptr && b->is_undefined()) fail_undefined(*b);
    }
    // Python's TypeError here is swallowed by Jinja's getitem: the result is undefined.
    return Value::undefined("slice indices must be integers or None");
  }
  int64_t st = (step == nullptr || step->is_none()) ? 1 : step->as_int();
  if (st == 0) throw_runtime("slice step cannot be zero");
  if (!v.is_string() && !v.is_sequence()) {
    return Value::undefined(v.type_name() + " object cannot be sliced");
  }
  bool ascii = v.is_string() && unicode::is_ascii(v.str());
  std::vector<size_t> bounds;
  if (v.is_string() && !ascii) bounds = unicode::boundaries(v.str());
  int64_t n = v.is_string() ? (ascii ? static_cast<int64_t>(v.str().size())
                                     : static_cast<int64_t>(bounds.size()) - 1)
                            : static_cast<int64_t>(v.items().size());
  int64_t a = adjust(start, n, st, true);
  int64_t b = adjust(stop, n, st, false);
  if (v.is_string()) {
    const std::string& s = v.str();
    auto begin_of = [&](int64_t i) { return ascii ? static_cast<size_t>(i) : bounds[i]; };
    auto end_of = [&](int64_t i) { return ascii ? static_cast<size_t>(i + 1) : bounds[i + 1]; };
    if (st == 1) {
      if (b <= a) return Value::string("");
      return Value::string(s.substr(begin_of(a), begin_of(b) - begin_of(a)));
    }
    std::string out;
    for (int64_t i = a; st > 0 ? i < b : i > b;) {
      out.append(s, begin_of(i), end_of(i) - begin_of(i));
      if (__builtin_add_overflow(i, st, &i)) break;
    }
    return Value::string(std::move(out));
  }
  const List& items = v.items();
  List out;
  for (int64_t i = a; st > 0 ? i < b : i > b;) {
    out.push_back(items[static_cast<size_t>(i)]);
    if (__builtin_add_overflow(i, st, &i)) break;
  }
  return v.is_list() ? Value::list(std::move(out)) : Value::tuple(std::move(out));
}

}  // namespace strata::jinja
