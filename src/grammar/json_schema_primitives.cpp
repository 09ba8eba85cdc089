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

const char* kAnyFraction = "(\".\" [0-9]{1,6})?";
const char* kZeroFraction = "(\".\" \"0\"{1,6})?";

// "." then 1..6 digits, not all zero.
std::string nonzero_fraction() {
  std::string inner = "[1-9]";
  for (int k = 2; k <= 6; ++k)
    inner = "([1-9] [0-9]{0," + std::to_string(k - 1) + "} | \"0\" " + inner + ")";
  return "\".\" " + inner;
}

// Magnitudes y (a JSON number without sign) with y >= lo (or > when lo_strict) and y <= hi
// (or <, or unbounded when !has_hi); lo, hi >= 0 integers.
std::string magnitude_range(int64_t lo, bool lo_strict, bool has_hi, int64_t hi, bool hi_strict,
                            bool fractions) {
  std::vector<std::string> alts;
  int64_t a = lo_strict ? lo + 1 : lo;
  int64_t b = has_hi ? hi - 1 : kNumberCap;
  if (!fractions) {
    // Integers only: the closed integer range.
    int64_t top = has_hi ? (hi_strict ? hi - 1 : hi) : kNumberCap;
    return a <= top ? uint_range(static_cast<uint64_t>(a), static_cast<uint64_t>(top)) : "";
  }
  if (a <= b)
    alts.push_back(
        seq({uint_range(static_cast<uint64_t>(a), static_cast<uint64_t>(b)), kAnyFraction}));
  if (lo_strict && (!has_hi || hi > lo))
    alts.push_back(seq({lit(std::to_string(lo)), nonzero_fraction()}));
  if (has_hi && !hi_strict && (hi > lo || (hi == lo && !lo_strict)))
    alts.push_back(seq({lit(std::to_string(hi)), kZeroFraction}));
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
  // Negative numbers: magnitude y = -x > 0.
  if (!lo.set || lo.value < 0) {
    int64_t y_lo = hi.set && hi.value < 0 ? -hi.value : 0;
    bool y_lo_strict = hi.set && hi.value < 0 ? hi.exclusive : true;
    std::string m =
        magnitude_range(y_lo, y_lo_strict, lo.set, lo.set ? -lo.value : 0, lo.exclusive, fractions);
    if (!m.empty()) alts.push_back(seq({"\"-\"", m}));
  }
  // Non-negative numbers.
  if (!hi.set || hi.value > 0 || (hi.value == 0 && !hi.exclusive)) {
    int64_t x_lo = lo.set && lo.value >= 0 ? lo.value : 0;
    bool x_lo_strict = lo.set && lo.value >= 0 ? lo.exclusive : false;
    std::string m = magnitude_range(x_lo, x_lo_strict, hi.set, hi.value, hi.exclusive, fractions);
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
    return wrap("[a-zA-Z0-9_+-]{1,32} (\".\" [a-zA-Z0-9_+-]{1,32}){0,3} \"@\" " + label +
                " (\".\" " + label + "){1,3}");
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

}  // namespace strata::grammar::schema
