// Sequence filters: length, first, last, list, join, items, dictsort, sort, unique, min, max,
// sum, reverse, batch, slice, map, select, reject, selectattr, rejectattr.
#include <algorithm>
#include <unordered_map>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/unicode.h"

namespace strata::jinja {

namespace {

// Jinja's make_attrgetter: "a.b.0" looks up a, then b, then item 0 (items before attributes).
Value get_path(Interp& interp, const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return interp.get_item(item, attribute);
  Value cur = item;
  const std::string& path = attribute.str();
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    cur = interp.get_item(
        cur, digits ? Value::integer(std::stoll(part.substr(0, 18))) : Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value fold_case(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(unicode::lower(v.str()));
  return v;
}

Value f_length(Interp&, const Value& input, CallArgs& args) {
  ArgReader("length", args, {});
  int64_t n = value_length(input);
  if (n < 0) throw_runtime("object of type '" + input.type_name() + "' has no len()");
  return Value::integer(n);
}

Value f_list(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader("list", args, {});
  List items = iterate(input);
  interp.charge(static_cast<int64_t>(items.size()));
  return Value::list(std::move(items));
}

Value f_first(Interp&, const Value& input, CallArgs& args) {
  ArgReader("first", args, {});
  if (input.is_sequence()) {
    if (!input.items().empty()) return input.items().front();
  } else {
    List items = iterate(input);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interp&, const Value& input, CallArgs& args) {
  ArgReader("last", args, {});
  if (input.is_sequence()) {
    if (!input.items().empty()) return input.items().back();
  } else {
    List items = iterate(input);
    if (!items.empty()) return items.back();
  }
  return Value::undefined("No last item, sequence was empty.");
}

Value f_join(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("join", args, {"d", "attribute"});
  std::string sep = to_str(a.get_or(0, Value::string("")));
  std::string out;
  bool first = true;
  for (const Value& item : iterate(input)) {
    if (!first) out += sep;
    first = false;
    append_str(&out, a.has(1) ? get_path(interp, item, a.get(1)) : item);
    interp.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_items(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader("items", args, {});
  if (input.is_undefined()) return Value::list({});
  if (!input.is_dict()) throw_runtime("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, v] : input.dict().entries()) out.push_back(Value::tuple({k, v}));
  interp.charge(static_cast<int64_t>(out.size()));
  return Value::list(std::move(out));
}

Value f_dictsort(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("dictsort", args, {"case_sensitive", "by", "reverse"});
  bool case_sensitive = a.get_truthy(0, false);
  std::string by = a.get_string(1, "key");
  bool reverse = a.get_truthy(2, false);
  if (by != "key" && by != "value")
    throw_runtime("You can only sort by either \"key\" or \"value\"");
  if (!input.is_dict()) throw_runtime("dictsort: a mapping is required, not " + input.type_name());
  List out;
  for (const auto& [k, v] : input.dict().entries()) out.push_back(Value::tuple({k, v}));
  size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
    int c = compare_values(fold_case(x.items()[pos], case_sensitive),
                           fold_case(y.items()[pos], case_sensitive));
    return reverse ? c > 0 : c < 0;
  });
  interp.charge(static_cast<int64_t>(out.size()));
  return Value::list(std::move(out));
}

// Sort keys for sort/unique/min/max: the attribute (if any), case-folded unless case_sensitive.
List sort_keys(Interp& interp, const List& items, const ArgReader& a, size_t cs_index,
               size_t attr_index) {
  bool case_sensitive = a.get_truthy(cs_index, false);
  List keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    Value k = a.has(attr_index) && !a.get(attr_index).is_none()
                  ? get_path(interp, item, a.get(attr_index))
                  : item;
    keys.push_back(fold_case(k, case_sensitive));
  }
  return keys;
}

Value f_sort(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("sort", args, {"reverse", "case_sensitive", "attribute"});
  bool reverse = a.get_truthy(0, false);
  List items = iterate(input);
  interp.charge(static_cast<int64_t>(items.size()));
  List keys = sort_keys(interp, items, a, 1, 2);
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    int c = compare_values(keys[x], keys[y]);
    return reverse ? c > 0 : c < 0;
  });
  List out;
  for (size_t i : order) out.push_back(items[i]);
  return Value::list(std::move(out));
}

Value f_unique(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("unique", args, {"case_sensitive", "attribute"});
  List items = iterate(input);
  interp.charge(static_cast<int64_t>(items.size()));
  List keys = sort_keys(interp, items, a, 0, 1);
  List out;
  List seen;
  for (size_t i = 0; i < items.size(); ++i) {
    bool dup = false;
    for (const Value& s : seen) {
      if (values_equal(s, keys[i])) {
        dup = true;
        break;
      }
    }
    if (dup) continue;
    interp.charge(static_cast<int64_t>(seen.size()));
    seen.push_back(keys[i]);
    out.push_back(items[i]);
  }
  return Value::list(std::move(out));
}

Value min_max(Interp& interp, const Value& input, CallArgs& args, bool want_max) {
  ArgReader a(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  List items = iterate(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  List keys = sort_keys(interp, items, a, 0, 1);
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    int c = compare_values(keys[i], keys[best], want_max ? ">" : "<");
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

Value f_min(Interp& i, const Value& v, CallArgs& a) {
  return min_max(i, v, a, false);
}
Value f_max(Interp& i, const Value& v, CallArgs& a) {
  return min_max(i, v, a, true);
}

Value f_sum(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("sum", args, {"attribute", "start"});
  Value total = a.get_or(1, Value::integer(0));
  for (const Value& item : iterate(input)) {
    Value v = a.has(0) && !a.get(0).is_none() ? get_path(interp, item, a.get(0)) : item;
    total = binary_op(interp, BinOp::kAdd, total, v);
  }
  return total;
}

Value f_reverse(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader("reverse", args, {});
  if (input.is_string()) {
    Value step = Value::integer(-1);
    return slice_value(input, nullptr, nullptr, &step);
  }
  List items = iterate(input);
  interp.charge(static_cast<int64_t>(items.size()));
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_batch(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("batch", args, {"linecount", "fill_with"});
  int64_t n = a.get_int(0, 0);
  if (n <= 0) throw_runtime("batch: linecount must be positive");
  List items = iterate(input);
  interp.charge(static_cast<int64_t>(items.size()));
  List out;
  List cur;
  for (Value& item : items) {
    cur.push_back(std::move(item));
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (a.has(1) && !a.get(1).is_none()) {
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(a.get(1));
    }
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_slice(Interp& interp, const Value& input, CallArgs& args) {
  ArgReader a("slice", args, {"slices", "fill_with"});
  int64_t slices = a.get_int(0, 0);
  if (slices <= 0 || slices > 100000) throw_runtime("slice: slices must be between 1 and 100000");
  List seq = iterate(input);
  interp.charge(static_cast<int64_t>(seq.size()) + slices);
  int64_t length = static_cast<int64_t>(seq.size());
  int64_t per = length / slices;
  int64_t extra = length % slices;
  int64_t offset = 0;
  List out;
  for (int64_t k = 0; k < slices; ++k) {
    int64_t start = offset + k * per;
    if (k < extra) ++offset;
    int64_t end = offset + (k + 1) * per;
    List part(seq.begin() + start, seq.begin() + end);
    if (a.has(1) && !a.get(1).is_none() && k >= extra) part.push_back(a.get(1));
    out.push_back(Value::list(std::move(part)));
  }
  return Value::list(std::move(out));
}

Value f_map(Interp& interp, const Value& input, CallArgs& args) {
  List out;
  if (!input.truthy()) return Value::list({});
  List items = iterate(input);
  interp.charge(static_cast<int64_t>(items.size()));
  if (args.positional.empty()) {
    Value attribute;
    Value fallback;
    bool has_attribute = false;
    bool has_default = false;
    for (const auto& [k, v] : args.keyword) {
      if (k == "attribute") {
        attribute = v;
        has_attribute = true;
      } else if (k == "default") {
        fallback = v;
        has_default = true;
      } else {
        throw_runtime("Unexpected keyword argument '" + k + "'");
      }
    }
    if (!has_attribute) throw_runtime("map requires a filter argument");
    for (const Value& item : items) {
      Value v = get_path(interp, item, attribute);
      if (v.is_undefined() && has_default) v = fallback;
      out.push_back(std::move(v));
    }
    return Value::list(std::move(out));
  }
  if (!args.positional[0].is_string()) throw_runtime("map: the filter name must be a string");
  std::string name = args.positional[0].str();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    CallArgs call_args = rest;
    out.push_back(interp.apply_filter(name, item, call_args));
  }
  return Value::list(std::move(out));
}

Value select_impl(Interp& interp, const Value& input, CallArgs& args, bool lookup_attr,
                  bool keep_when) {
  size_t off = lookup_attr ? 1 : 0;
  if (lookup_attr && args.positional.empty()) throw_runtime("Missing parameter for attribute name");
  Value attr = lookup_attr ? args.positional[0] : Value();
  bool has_test = args.positional.size() > off;
  std::string test = has_test ? to_str(args.positional[off]) : "";
  CallArgs test_args;
  if (has_test) {
    test_args.positional.assign(args.positional.begin() + static_cast<long>(off) + 1,
                                args.positional.end());
    test_args.keyword = args.keyword;
  }
  List out;
  List items = iterate(input);
  interp.charge(static_cast<int64_t>(items.size()));
  for (const Value& item : items) {
    Value probe = lookup_attr ? get_path(interp, item, attr) : item;
    bool ok;
    if (has_test) {
      CallArgs call_args = test_args;
      ok = interp.apply_test(test, probe, call_args);
    } else {
      ok = probe.truthy();
    }
    if (ok == keep_when) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(Interp& i, const Value& v, CallArgs& a) {
  return select_impl(i, v, a, false, true);
}
Value f_reject(Interp& i, const Value& v, CallArgs& a) {
  return select_impl(i, v, a, false, false);
}
Value f_selectattr(Interp& i, const Value& v, CallArgs& a) {
  return select_impl(i, v, a, true, true);
}
Value f_rejectattr(Interp& i, const Value& v, CallArgs& a) {
  return select_impl(i, v, a, true, false);
}

}  // namespace

void add_sequence_filters(std::unordered_map<std::string_view, FilterFn>* t) {
  (*t)["length"] = f_length;
  (*t)["count"] = f_length;
  (*t)["list"] = f_list;
  (*t)["first"] = f_first;
  (*t)["last"] = f_last;
  (*t)["join"] = f_join;
  (*t)["items"] = f_items;
  (*t)["dictsort"] = f_dictsort;
  (*t)["sort"] = f_sort;
  (*t)["unique"] = f_unique;
  (*t)["min"] = f_min;
  (*t)["max"] = f_max;
  (*t)["sum"] = f_sum;
  (*t)["reverse"] = f_reverse;
  (*t)["batch"] = f_batch;
  (*t)["slice"] = f_slice;
  (*t)["map"] = f_map;
  (*t)["select"] = f_select;
  (*t)["reject"] = f_reject;
  (*t)["selectattr"] = f_selectattr;
  (*t)["rejectattr"] = f_rejectattr;
}

}  // namespace strata::jinja
