// Regular expressions (the Python `re` subset that structured-output users write) to EBNF.
//
// The regex is parsed into a small tree (character sets, sequences, alternations, repetitions)
// and written back as one EBNF expression. Semantics are those of a full match: ^ and $ are
// accepted only where they anchor the whole pattern and are then ignored. Where Python and
// JavaScript (ajv, which validates schema `pattern`s) disagree, the sets chosen are those both
// accept: \d is [0-9], \w is [A-Za-z0-9_], \s is [ \t\n\r\f\v]; \S excludes every character
// either language calls a space; \D and \W are the complements of the ASCII sets (JavaScript's
// meaning); . excludes \n, \r, U+2028 and U+2029. Lazy quantifiers match the same language as
// greedy ones. Unsupported syntax (\b, backreferences, lookaround, flags, possessive
// quantifiers) is an error naming its position (0-based, in code points).
#include <memory>
#include <string>
#include <vector>

#include "core/strings.h"
#include "grammar/ebnf_text.h"
#include "grammar/json_schema.h"

namespace strata::grammar {
namespace {

constexpr int kMaxRepeat = 10000;

struct Node {
  enum Kind { kSet, kSeq, kAlt, kRepeat } kind = kSeq;
  CodePointSet set;                         // kSet
  std::vector<std::unique_ptr<Node>> kids;  // kSeq, kAlt; kRepeat: one
  int min = 0, max = -1;                    // kRepeat; max -1 = unbounded
};
using NodePtr = std::unique_ptr<Node>;

NodePtr make(Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  return n;
}

CodePointSet digits() {
  return CodePointSet::range('0', '9');
}
CodePointSet word() {
  CodePointSet s = CodePointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}
CodePointSet space() {
  CodePointSet s = CodePointSet::range('\t', '\r');
  s.add(' ', ' ');
  return s;
}
// Every character Python or JavaScript treats as \s.
CodePointSet any_space() {
  CodePointSet s = CodePointSet::range('\t', '\r');
  for (auto [lo, hi] : std::vector<std::pair<uint32_t, uint32_t>>{{0x1C, 0x20},
                                                                  {0x85, 0x85},
                                                                  {0xA0, 0xA0},
                                                                  {0x1680, 0x1680},
                                                                  {0x2000, 0x200A},
                                                                  {0x2028, 0x2029},
                                                                  {0x202F, 0x202F},
                                                                  {0x205F, 0x205F},
                                                                  {0x3000, 0x3000},
                                                                  {0xFEFF, 0xFEFF}})
    s.add(lo, hi);
  return s;
}
CodePointSet dot() {
  CodePointSet s = CodePointSet::of('\n');
  s.add('\r', '\r');
  s.add(0x2028, 0x2029);
  return s.complement();
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view regex) : p_(decode_utf8(regex)) {}

  Result<NodePtr> parse() {
    auto r = parse_alt(0);
    if (!r.ok()) return r.status();
    if (pos_ < p_.size()) return error("unbalanced ')'");
    return r;
  }

 private:
  Status error(const std::string& what, size_t at = SIZE_MAX) const {
    return invalid_argument("regex: " + what + " at position " +
                            std::to_string(at == SIZE_MAX ? pos_ : at));
  }
  bool eof() const { return pos_ >= p_.size(); }
  char32_t peek(size_t k = 0) const { return pos_ + k < p_.size() ? p_[pos_ + k] : 0; }

  Result<NodePtr> parse_alt(int depth) {
    if (depth > 200) return error("groups nested too deeply");
    bool start_here = at_start_;
    auto alt = make(Node::kAlt);
    while (true) {
      at_start_ = start_here;
      auto seq = parse_seq(depth);
      if (!seq.ok()) return seq.status();
      alt->kids.push_back(std::move(seq).value());
      if (peek() != '|' || eof()) break;
      ++pos_;
    }
    if (alt->kids.size() == 1) return std::move(alt->kids[0]);
    return alt;
  }

  Result<NodePtr> parse_seq(int depth) {
    auto seq = make(Node::kSeq);
    while (!eof() && peek() != '|' && peek() != ')') {
      size_t atom_pos = pos_;
      char32_t c = peek();
      if (c == '^') {
        if (!at_start_) return error("'^' is supported only at the start of the pattern");
        ++pos_;
        continue;
      }
      if (c == '$') {
        // Allowed when only closing parentheses (or an alternative at the top) follow.
        size_t k = pos_ + 1;
        while (k < p_.size() && (p_[k] == ')' || p_[k] == '$')) ++k;
        if (!(k == p_.size() || (p_[k] == '|' && depth == 0 && k == pos_ + 1)))
          return error("'$' is supported only at the end of the pattern");
        ++pos_;
        continue;
      }
      if (c == '*' || c == '+' || c == '?') return error("nothing to repeat");
      NodePtr atom;
      if (c == '(') {
        ++pos_;
        if (peek() == '?') {
          if (peek(1) == ':') {
            pos_ += 2;
          } else if (peek(1) == 'P' && peek(2) == '<') {
            pos_ += 3;
            STRATA_RETURN_IF_ERROR(skip_group_name());
          } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
            pos_ += 2;
            STRATA_RETURN_IF_ERROR(skip_group_name());
          } else {
            return error("unsupported group syntax '(?" + std::string(1, char(peek(1))) + "'",
                         atom_pos);
          }
        }
        auto inner = parse_alt(depth + 1);
        if (!inner.ok()) return inner.status();
        if (peek() != ')' || eof()) return error("missing ')'", atom_pos);
        ++pos_;
        atom = std::move(inner).value();
      } else if (c == '[') {
        auto set = parse_class();
        if (!set.ok()) return set.status();
        atom = make(Node::kSet);
        atom->set = std::move(set).value();
      } else if (c == '.') {
        ++pos_;
        atom = make(Node::kSet);
        atom->set = dot();
      } else if (c == '\\') {
        auto set = parse_escape(false);
        if (!set.ok()) return set.status();
        atom = make(Node::kSet);
        atom->set = std::move(set).value();
      } else {
        ++pos_;
        atom = make(Node::kSet);
        atom->set = CodePointSet::of(c);
      }
      at_start_ = false;
      auto q = parse_quantifiers(std::move(atom));
      if (!q.ok()) return q.status();
      seq->kids.push_back(std::move(q).value());
    }
    if (seq->kids.size() == 1) return std::move(seq->kids[0]);
    return seq;
  }

  Status skip_group_name() {
    size_t start = pos_;
    while (!eof() && peek() != '>') {
      char32_t c = peek();
      if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= '0' && c <= '9') || c > 0x7F))
        return error("bad character in group name");
      ++pos_;
    }
    if (eof() || pos_ == start) return error("bad group name", start);
    ++pos_;
    return ok_status();
  }

  // {m}, {m,}, {,n}, {m,n} at pos_: true (and bounds) when it is a quantifier; Python reads
  // anything else starting with '{' as a literal.
  bool read_braces(int& lo, int& hi, size_t& end) const {
    size_t k = pos_ + 1;
    auto number = [&](long& v) {
      size_t s = k;
      v = 0;
      while (k < p_.size() && p_[k] >= '0' && p_[k] <= '9' && k - s < 9)
        v = v * 10 + (p_[k++] - '0');
      return k > s;
    };
    long a = 0, b = -1;
    bool has_a = number(a);
    if (k < p_.size() && p_[k] == '}') {
      if (!has_a) return false;
      lo = hi = static_cast<int>(std::min<long>(a, kMaxRepeat + 1));
      end = k + 1;
      return true;
    }
    if (k >= p_.size() || p_[k] != ',') return false;
    ++k;
    bool has_b = number(b);
    if (k >= p_.size() || p_[k] != '}') return false;
    lo = has_a ? static_cast<int>(std::min<long>(a, kMaxRepeat + 1)) : 0;
    hi = has_b ? static_cast<int>(std::min<long>(b, kMaxRepeat + 1)) : -1;
    end = k + 1;
    return true;
  }

  Result<NodePtr> parse_quantifiers(NodePtr atom) {
    bool quantified = false;
    while (!eof()) {
      size_t qpos = pos_;
      int lo, hi;
      size_t end;
      char32_t c = peek();
      if (c == '*') {
        lo = 0, hi = -1, end = pos_ + 1;
      } else if (c == '+') {
        lo = 1, hi = -1, end = pos_ + 1;
      } else if (c == '?') {
        lo = 0, hi = 1, end = pos_ + 1;
      } else if (c == '{' && read_braces(lo, hi, end)) {
      } else {
        break;
      }
      if (quantified) return error("multiple repeat", qpos);
      if (lo > kMaxRepeat || hi > kMaxRepeat)
        return error("repetition count above " + std::to_string(kMaxRepeat), qpos);
      if (hi >= 0 && hi < lo) return error("min repeat greater than max repeat", qpos);
      pos_ = end;
      if (peek() == '?' && !eof()) ++pos_;  // lazy: same language
      if (peek() == '+' && !eof()) return error("possessive quantifiers are not supported");
      auto rep = make(Node::kRepeat);
      rep->min = lo;
      rep->max = hi;
      rep->kids.push_back(std::move(atom));
      atom = std::move(rep);
      quantified = true;
    }
    return atom;
  }

  Result<CodePointSet> parse_class() {
    size_t start = pos_;
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^' && !eof()) {
      negate = true;
      ++pos_;
    }
    CodePointSet set;
    bool first = true;
    while (true) {
      if (eof()) return error("unterminated character class", start);
      if (peek() == ']' && !first) break;
      first = false;
      size_t item_pos = pos_;
      CodePointSet item;
      int64_t lo = -1;
      if (peek() == '\\') {
        auto e = parse_escape(true);
        if (!e.ok()) return e.status();
        item = std::move(e).value();
        lo = item.single();
      } else {
        lo = peek();
        item = CodePointSet::of(peek());
        ++pos_;
      }
      // A range a-b (a '-' before ']' is a literal).
      if (peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        int64_t hi;
        if (peek() == '\\') {
          auto e = parse_escape(true);
          if (!e.ok()) return e.status();
          hi = e->single();
        } else {
          hi = peek();
          ++pos_;
        }
        if (lo < 0 || hi < 0) return error("bad character range", item_pos);
        if (hi < lo) return error("bad character range (reversed)", item_pos);
        item = CodePointSet::range(static_cast<uint32_t>(lo), static_cast<uint32_t>(hi));
      }
      set.add(item);
    }
    ++pos_;  // ']'
    if (negate) set = set.complement();
    if (set.empty()) return error("character class matches nothing", start);
    return set;
  }

  Result<uint32_t> hex_digits(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      char32_t c = peek();
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0 || eof()) return error("incomplete escape");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) return error("bad code point");
    return v;
  }

  Result<CodePointSet> parse_escape(bool in_class) {
    size_t start = pos_;
    ++pos_;  // '\'
    if (eof()) return error("trailing backslash", start);
    char32_t c = peek();
    ++pos_;
    switch (c) {
      case 'd':
        return digits();
      case 'D':
        return digits().complement();
      case 'w':
        return word();
      case 'W':
        return word().complement();
      case 's':
        return space();
      case 'S':
        return any_space().complement();
      case 'n':
        return CodePointSet::of('\n');
      case 't':
        return CodePointSet::of('\t');
      case 'r':
        return CodePointSet::of('\r');
      case 'f':
        return CodePointSet::of('\f');
      case 'v':
        return CodePointSet::of('\v');
      case 'a':
        return CodePointSet::of('\a');
      case '0':
        return CodePointSet::of(0);
      case 'x': {
        auto v = hex_digits(2);
        if (!v.ok()) return v.status();
        return CodePointSet::of(*v);
      }
      case 'u': {
        auto v = hex_digits(4);
        if (!v.ok()) return v.status();
        return CodePointSet::of(*v);
      }
      case 'U': {
        auto v = hex_digits(8);
        if (!v.ok()) return v.status();
        return CodePointSet::of(*v);
      }
      case 'b':
        if (in_class) return CodePointSet::of('\b');
        return error("word boundaries (\\b) are not supported", start);
      default:
        break;
    }
    if (c >= '1' && c <= '9') return error("backreferences are not supported", start);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      return error("unsupported escape '\\" + std::string(1, static_cast<char>(c)) + "'", start);
    return CodePointSet::of(c);  // an escaped punctuation or other character: itself
  }

  std::u32string p_;
  size_t pos_ = 0;
  bool at_start_ = true;
};

// Writes `n` as EBNF; `atomic` asks for something a quantifier can follow.
std::string emit(const Node& n, bool json, bool atomic) {
  switch (n.kind) {
    case Node::kSet: {
      if (int64_t c = n.set.single(); c >= 0) {
        std::u32string one(1, static_cast<char32_t>(c));
        return json ? ebnf_literal(json_escape_string_body(one)) : ebnf_literal(one);
      }
      return json ? json_char_in_set(n.set) : ebnf_class(n.set);
    }
    case Node::kSeq: {
      if (n.kids.empty()) return "\"\"";
      std::string out;
      std::u32string run;  // consecutive single characters become one literal
      auto flush = [&] {
        if (run.empty()) return;
        if (!out.empty()) out += ' ';
        out += json ? ebnf_literal(json_escape_string_body(run)) : ebnf_literal(run);
        run.clear();
      };
      for (const auto& k : n.kids) {
        if (int64_t c = k->kind == Node::kSet ? k->set.single() : -1; c >= 0) {
          run.push_back(static_cast<char32_t>(c));
          continue;
        }
        flush();
        if (!out.empty()) out += ' ';
        out += emit(*k, json, k->kind == Node::kAlt);
      }
      flush();
      bool single = n.kids.size() == 1 || out.find(' ') == std::string::npos;
      return atomic && !single ? "(" + out + ")" : out;
    }
    case Node::kAlt: {
      std::string out;
      for (size_t i = 0; i < n.kids.size(); ++i)
        out += (i ? " | " : "") + emit(*n.kids[i], json, false);
      return "(" + out + ")";
    }
    case Node::kRepeat: {
      std::string inner = emit(*n.kids[0], json, true);
      if (inner == "\"\"") return inner;
      if (n.min == 0 && n.max == -1) return inner + "*";
      if (n.min == 1 && n.max == -1) return inner + "+";
      if (n.min == 0 && n.max == 1) return inner + "?";
      if (n.max == 0) return "\"\"";
      std::string q = inner;
      q += '{';
      q += std::to_string(n.min);
      if (n.max != n.min) {
        q += ',';
        if (n.max >= 0) q += std::to_string(n.max);
      }
      q += '}';
      return q;
    }
  }
  return "\"\"";
}

// The least and greatest number of characters `n` matches (hi -1: unbounded).
std::pair<int64_t, int64_t> length_bounds(const Node& n) {
  constexpr int64_t kHuge = int64_t{1} << 40;
  auto cap = [&](int64_t v) { return v > kHuge ? -1 : v; };
  switch (n.kind) {
    case Node::kSet:
      return {1, 1};
    case Node::kSeq: {
      int64_t lo = 0, hi = 0;
      for (const auto& k : n.kids) {
        auto [a, b] = length_bounds(*k);
        lo += a;
        hi = hi < 0 || b < 0 ? -1 : cap(hi + b);
      }
      return {lo, hi};
    }
    case Node::kAlt: {
      int64_t lo = INT64_MAX, hi = 0;
      for (const auto& k : n.kids) {
        auto [a, b] = length_bounds(*k);
        lo = std::min(lo, a);
        hi = hi < 0 || b < 0 ? -1 : std::max(hi, b);
      }
      return {lo, hi};
    }
    case Node::kRepeat: {
      auto [a, b] = length_bounds(*n.kids[0]);
      int64_t hi = n.max < 0 ? (b == 0 ? 0 : -1) : b < 0 ? -1 : cap(b * n.max);
      return {std::min(a * n.min, kHuge), hi};
    }
  }
  return {0, 0};
}

// Narrows `tree` to strings of min_len..max_len characters when it is a sequence of fixed-length
// parts and at most one repetition of a character set; false when that shape does not hold.
bool narrow_lengths(Node& tree, int64_t min_len, int64_t max_len, bool& empty) {
  std::vector<Node*> parts;
  if (tree.kind == Node::kSeq) {
    for (auto& k : tree.kids) parts.push_back(k.get());
  } else {
    parts.push_back(&tree);
  }
  int64_t fixed = 0;
  Node* var = nullptr;
  for (Node* p : parts) {
    auto [a, b] = length_bounds(*p);
    if (a == b) {
      fixed += a;
    } else if (!var && p->kind == Node::kRepeat && p->kids[0]->kind == Node::kSet) {
      var = p;
    } else {
      return false;
    }
  }
  if (!var) {
    empty = fixed < min_len || (max_len >= 0 && fixed > max_len);
    return true;
  }
  int64_t lo = std::max<int64_t>(var->min, min_len - fixed);
  int64_t hi = var->max;
  if (max_len >= 0) hi = hi < 0 ? max_len - fixed : std::min<int64_t>(hi, max_len - fixed);
  empty = hi >= 0 && lo > hi;
  if (lo > kMaxRepeat || hi > kMaxRepeat) return false;
  var->min = static_cast<int>(lo);
  var->max = static_cast<int>(hi);
  return true;
}

}  // namespace

Result<std::string> regex_to_ebnf_expression(std::string_view regex, bool json_string_body,
                                             int64_t min_len, int64_t max_len) {
  // Found by the grammar fuzz target: bytes that are not UTF-8 (e.g. a sequence past U+10FFFF)
  // would reach the grammar as code points it rightly refuses.
  if (!is_valid_utf8(regex)) return invalid_argument("the regular expression is not valid UTF-8");
  RegexParser parser(regex);
  auto tree = parser.parse();
  if (!tree.ok()) return tree.status();
  auto [lo, hi] = length_bounds(**tree);
  bool within = min_len <= lo && (max_len < 0 || (hi >= 0 && hi <= max_len));
  if (!within) {
    bool empty = false;
    if (!narrow_lengths(**tree, min_len, max_len, empty))
      return invalid_argument(
          "the lengths cannot be combined with this pattern (supported: patterns whose matches "
          "all fit the lengths, or fixed parts around one repeated character class)");
    if (empty) return invalid_argument("no string matching the pattern has the allowed length");
  }
  return emit(**tree, json_string_body, false);
}

Result<std::string> regex_to_ebnf(std::string_view regex) {
  auto expr = regex_to_ebnf_expression(regex, false);
  if (!expr.ok()) return expr.status();
  return "root ::= " + *expr + "\n";
}

}  // namespace strata::grammar
