// Grammars of JSON numbers (with exact integer ranges) and of the string formats.
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/json_schema_internal.h"

namespace strata::grammar::schema {
namespace {

std::string join_alts(const std::vector<std::string>& alts) {
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

std::string seq(std::initializer_list<std::string> parts) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

std::string lit(const std::string& digits) {
  return digits.empty() ? "" : "\"" + digits + "\"";
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return lit(std::string(1, lo));
  return std::string("[") + lo + "-" + hi + "]";
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

bool all_of(std::string_view s, char c) {
  for (char x : s)
    if (x != c) return false;
  return true;
}

// Alternatives matching the digit strings s with a <= s <= b (same length, a <= b).
void same_length_range(std::string a, std::string b, std::string prefix,
                       std::vector<std::string>& alts) {
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  prefix += a.substr(0, i);
  a = a.substr(i);
  b = b.substr(i);
  if (a.empty()) {
    alts.push_back(lit(prefix));
    return;
  }
  size_t rest = a.size() - 1;
  bool a_low = all_of(a.substr(1), '0');
  bool b_high = all_of(b.substr(1), '9');
  char mid_lo = a_low ? a[0] : static_cast<char>(a[0] + 1);
  char mid_hi = b_high ? b[0] : static_cast<char>(b[0] - 1);
  if (!a_low) same_length_range(a.substr(1), std::string(rest, '9'), prefix + a[0], alts);
  if (mid_lo <= mid_hi)
    alts.push_back(seq({lit(prefix), digit_class(mid_lo, mid_hi), any_digits(rest)}));
  if (!b_high) same_length_range(std::string(rest, '0'), b.substr(1), prefix + b[0], alts);
}

uint64_t pow10(int n) {
  uint64_t v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

int num_digits(uint64_t v) {
  int n = 1;
  while (v >= 10) v /= 10, ++n;
  return n;
}

// Non-negative integers in [lo, hi] without leading zeros.
std::string uint_range(uint64_t lo, uint64_t hi) {
  if (lo > hi) return "";
  std::vector<std::string> alts;
  int first = num_digits(lo), last = num_digits(hi);
  int run_start = -1;  // a run of lengths >= 2 that are covered entirely
  auto flush_run = [&](int end_len) {
    if (run_start < 0) return;
    int lo_rep = run_start - 1, hi_rep = end_len - 1;
    std::string rep = lo_rep == hi_rep
                          ? any_digits(lo_rep)
                          : "[0-9]{" + std::to_string(lo_rep) + "," + std::to_string(hi_rep) + "}";
    alts.push_back(seq({"[1-9]", rep}));
    run_start = -1;
  };
  for (int len = first; len <= last; ++len) {
    uint64_t a = std::max(lo, len == 1 ? 0 : pow10(len - 1));
    uint64_t b = std::min(hi, pow10(len) - 1);
    bool full = len >= 2 && a == pow10(len - 1) && b == pow10(len) - 1;
    if (full) {
      if (run_start < 0) run_start = len;
      continue;
    }
    flush_run(len - 1);
    same_length_range(std::to_string(a), std::to_string(b), "", alts);
  }
  flush_run(last);
  return join_alts(alts);
}

constexpr int64_t kIntCap = 999999999999999999;   // kMaxIntegerDigits nines
constexpr int64_t kNumberCap = 9999999999999999;  // 16 digits: bounded numbers' integer part

// Sets of fraction digit strings (what follows the '.') of at most kFractionDigits digits, by
// value: the non-empty strings as alternatives, and whether "no fraction" (value 0) is in.
struct FractionSet {
  std::vector<std::string> alts;
  bool none = false;
};

constexpr int kFractionDigits = 6;

// Fractions f with lo <= f (lo < f when lo_strict) and, when `hi` is given, f <= hi (f < hi);
// lo and hi are digit strings without trailing zeros, compared as 0.lo and 0.hi.
FractionSet fraction_range(std::string_view lo, bool lo_strict, const std::string_view* hi,
                           bool hi_strict, int k) {
  FractionSet out;
  // Value 0 (no more digits) is in when 0 >= lo (lo is 0 and not strict) and 0 <= hi.
  out.none = lo.empty() && !lo_strict && (!hi || !hi->empty() || !hi_strict);
  if (k == 0) return out;
  if (lo.empty() && !lo_strict && !hi) {  // any fraction
    out.alts.push_back(k == 1 ? "[0-9]" : "[0-9]{1," + std::to_string(k) + "}");
    return out;
  }
  char d = lo.empty() ? '0' : lo[0];
  char e = hi ? (hi->empty() ? '0' : (*hi)[0]) : '9';
  std::string_view lo_rest = lo.empty() ? lo : lo.substr(1);
  std::string_view hi_rest = hi ? (hi->empty() ? *hi : hi->substr(1)) : std::string_view();
  if (hi && e < d) return out;
  auto prefixed = [&](char c, const FractionSet& sub) {
    std::string sub_expr = join_alts(sub.alts);
    std::string head = lit(std::string(1, c));
    if (sub_expr.find(' ') != std::string::npos) sub_expr = "(" + sub_expr + ")";
    if (sub.none)
      out.alts.push_back(sub_expr.empty() ? head : seq({head, sub_expr + "?"}));
    else if (!sub_expr.empty())
      out.alts.push_back(seq({head, sub_expr}));
  };
  std::string rest = k > 1 ? "[0-9]{0," + std::to_string(k - 1) + "}" : "";
  if (hi && d == e) {
    prefixed(d, fraction_range(lo_rest, lo_strict, &hi_rest, hi_strict, k - 1));
    return out;
  }
  prefixed(d, fraction_range(lo_rest, lo_strict, nullptr, false, k - 1));
  char mid_hi = hi ? static_cast<char>(e - 1) : '9';
  if (d + 1 <= mid_hi)
    out.alts.push_back(seq({digit_class(static_cast<char>(d + 1), mid_hi), rest}));
  if (hi) prefixed(e, fraction_range("", false, &hi_rest, hi_strict, k - 1));
  return out;
}

// "" (nothing) or the fraction part for `set`; `empty` is set when the set is empty.
std::string fraction_expr(const FractionSet& set, bool& empty) {
  std::string x = join_alts(set.alts);
  empty = x.empty() && !set.none;
  if (x.empty()) return "";
  if (x.front() != '(' || x.back() != ')') x = "(" + x + ")";
  return set.none ? "(\".\" " + x + ")?" : "\".\" " + x;
}

// Magnitudes y (a JSON number without sign) with y >= lo (or > when lo.exclusive) and y <= hi
// (or <; unbounded when !hi.set); both >= 0.
std::string magnitude_range(const NumberBound& lo, const NumberBound& hi, bool fractions) {
  std::vector<std::string> alts;
  const uint64_t li = lo.whole, hi_i = hi.set ? hi.whole : static_cast<uint64_t>(kNumberCap);
  if (!fractions) {  // integer bounds only: the closed integer range
    uint64_t a = lo.exclusive ? li + 1 : li;
    uint64_t top = hi.set ? (hi.exclusive ? hi_i - (hi_i > 0) : hi_i) : hi_i;
    if (hi.set && hi.exclusive && hi_i == 0) return "";
    return a <= top ? uint_range(a, top) : "";
  }
  auto add = [&](const std::string& ints, const FractionSet& f) {
    bool empty = false;
    std::string frac = fraction_expr(f, empty);
    if (!empty) alts.push_back(seq({ints, frac}));
  };
  std::string_view lf = lo.frac, hf = hi.frac;
  if (hi.set && hi_i == li) {
    add(lit(std::to_string(li)),
        fraction_range(lf, lo.exclusive, &hf, hi.exclusive, kFractionDigits));
    return join_alts(alts);
  }
  if (hi.set && hi_i < li) return "";
  add(lit(std::to_string(li)), fraction_range(lf, lo.exclusive, nullptr, false, kFractionDigits));
  uint64_t core_hi = hi.set ? hi_i - 1 : hi_i;
  if (li + 1 <= core_hi)
    add(uint_range(li + 1, core_hi), fraction_range("", false, nullptr, false, kFractionDigits));
  if (hi.set)
    add(lit(std::to_string(hi_i)), fraction_range("", false, &hf, hi.exclusive, kFractionDigits));
  return join_alts(alts);
}

}  // namespace

std::string integer_range_expr(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  int64_t l = lo ? std::max(*lo, -kIntCap) : -kIntCap;
  int64_t h = hi ? std::min(*hi, kIntCap) : kIntCap;
  if (l > h) return "";
  std::vector<std::string> alts;
  if (l < 0) {
    uint64_t mag_lo = h < 0 ? static_cast<uint64_t>(-h) : 1;
    alts.push_back(seq({"\"-\"", uint_range(mag_lo, static_cast<uint64_t>(-l))}));
  }
  if (h >= 0)
    alts.push_back(
        uint_range(static_cast<uint64_t>(std::max<int64_t>(l, 0)), static_cast<uint64_t>(h)));
  return join_alts(alts);
}

std::string number_range_expr(NumberBound lo, NumberBound hi, bool fractions) {
  std::vector<std::string> alts;
  auto is_zero = [](const NumberBound& b) { return b.whole == 0 && b.frac.empty(); };
  auto magnitude = [](const NumberBound& b) {
    NumberBound m = b;
    m.negative = false;
    return m;
  };
  // Negative numbers: magnitude y = -x > 0.
  if (!lo.set || (lo.negative && !is_zero(lo))) {
    NumberBound y_lo{.set = true, .exclusive = true};  // y > 0
    if (hi.set && hi.negative && !is_zero(hi)) y_lo = magnitude(hi);
    NumberBound y_hi = lo.set ? magnitude(lo) : NumberBound{};
    std::string m = magnitude_range(y_lo, y_hi, fractions);
    if (!m.empty()) alts.push_back(seq({"\"-\"", m}));
  }
  // Non-negative numbers.
  bool hi_negative = hi.set && hi.negative && !is_zero(hi);
  if (!hi.set || (!hi_negative && !(is_zero(hi) && hi.exclusive))) {
    NumberBound x_lo{.set = true};  // x >= 0
    if (lo.set && (!lo.negative || is_zero(lo))) x_lo = magnitude(lo);
    if (is_zero(x_lo)) x_lo.exclusive = lo.set && is_zero(lo) && lo.exclusive;
    std::string m = magnitude_range(x_lo, hi.set ? magnitude(hi) : NumberBound{}, fractions);
    if (!m.empty()) alts.push_back(m);
  }
  return join_alts(alts);
}

std::string number_expr() {
  return "\"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [+-]? [0-9]{1,2})?";
}

std::optional<std::string> string_format_expr(std::string_view format) {
  const std::string q = "\"\\\"\"";  // the quote of a JSON string
  auto wrap = [&](const std::string& body) { return q + " " + body + " " + q; };
  const std::string d31 = "(\"0\" [1-9] | [12] [0-9] | \"3\" [01])";
  const std::string d30 = "(\"0\" [1-9] | [12] [0-9] | \"30\")";
  const std::string d28 = "(\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])";
  const std::string mult4 = "(\"0\" [48] | [2468] [048] | [13579] [26])";
  const std::string leap = "([0-9] [0-9] " + mult4 + " | (" + mult4 + " | \"00\") \"00\")";
  const std::string date = "([0-9]{4} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" " + d31 +
                           " | (\"0\" [469] | \"11\") \"-\" " + d30 + " | \"02-\" " + d28 + ") | " +
                           leap + " \"-02-29\")";
  const std::string hh = "([01] [0-9] | \"2\" [0-3])";
  const std::string mm = "[0-5] [0-9]";
  const std::string time = hh + " \":\" " + mm + " \":\" " + mm +
                           " (\".\" [0-9]{1,6})? (\"Z\" | [+-] " + hh + " \":\" " + mm + ")";
  const std::string label = "[a-zA-Z0-9] ([a-zA-Z0-9-]{0,30} [a-zA-Z0-9])?";
  const std::string octet = "(\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9]? [0-9])";
  if (format == "date") return wrap(date);
  if (format == "time") return wrap(time);
  if (format == "date-time") return wrap(date + " \"T\" " + time);
  if (format == "email")
    return wrap("[a-zA-Z0-9_+-]{1,32} (\".\" [a-zA-Z0-9_+-]{1,32}){0,2} \"@\" " + label +
                " (\".\" " + label + "){1,2}");
  if (format == "hostname") return wrap(label + " (\".\" " + label + "){0,3}");
  if (format == "uuid")
    return wrap(
        "[0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{12}");
  if (format == "uri")
    return wrap("[a-z] [a-z0-9+.-]{0,15} \"://\" " + label + " (\".\" " + label +
                "){0,3} (\":\" [0-9]{1,5})? (\"/\" [A-Za-z0-9._~-]{0,32}){0,16} (\"?\" "
                "[A-Za-z0-9._~=&-]{0,64})?");
  if (format == "ipv4") return wrap(octet + " (\".\" " + octet + "){3}");
  if (format == "ipv6") return wrap("[0-9a-f]{1,4} (\":\" [0-9a-f]{1,4}){7}");
  if (format == "byte")
    return wrap("([A-Za-z0-9+/]{4})* ([A-Za-z0-9+/]{2} \"==\" | [A-Za-z0-9+/]{3} \"=\")?");
  return std::nullopt;
}

std::pair<int64_t, int64_t> string_format_lengths(std::string_view format) {
  // Counted on the grammars above (a label is 1..32 characters).
  if (format == "date") return {10, 10};
  if (format == "time") return {9, 21};
  if (format == "date-time") return {20, 32};
  if (format == "email") return {5, 98 + 1 + 98};
  if (format == "hostname") return {1, 32 + 3 * 33};
  if (format == "uuid") return {36, 36};
  if (format == "uri") return {5, 16 + 3 + 131 + 6 + 16 * 33 + 65};
  if (format == "ipv4") return {7, 15};
  if (format == "ipv6") return {15, 39};
  return {0, -1};  // byte
}

}  // namespace strata::grammar::schema
