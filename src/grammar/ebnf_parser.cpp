// EBNF (GBNF dialect) -> GrammarIr. A recursive-descent parser over the text with line/column
// tracking for messages.
#include <algorithm>
#include <map>
#include <optional>

#include "grammar/grammar_ir.h"
#include "tokenizer/unicode.h"

namespace strata::grammar {

namespace {

// Repetition counts above this are refused: each repetition becomes automaton states.
constexpr int kMaxRepeat = 10000;
// Nesting of groups (bounds the recursion of the parser on hostile input).
constexpr int kMaxDepth = 200;

bool is_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
}

class Parser {
 public:
  Parser(std::string_view text, GrammarIr* ir) : text_(text), ir_(ir) {}

  Status parse() {
    skip_space();
    while (pos_ < text_.size()) {
      size_t start = pos_;
      std::string name = read_name();
      if (name.empty()) return error(start, "expected a rule name (name ::= ...)");
      skip_space();
      if (text_.compare(pos_, 3, "::=") != 0)
        return error(pos_, "expected '::=' after '" + name + "'");
      pos_ += 3;
      int rule = rule_index(name);
      if (defined_[rule]) return error(start, "rule '" + name + "' is defined twice");
      defined_[rule] = true;
      auto body = parse_alternatives(0);
      if (!body.ok()) return body.status();
      ir_->rule_body[rule] = *body;
      skip_space();
    }
    for (size_t r = 0; r < defined_.size(); ++r) {
      if (!defined_[r])
        return error(first_use_[r], "rule '" + ir_->rule_names[r] + "' is used but not defined");
    }
    return Status();
  }

  int find_rule(std::string_view name) const {
    auto it = index_.find(std::string(name));
    return it == index_.end() || !defined_[it->second] ? -1 : it->second;
  }

 private:
  Status error(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return invalid_argument("grammar error at line " + std::to_string(line) + ", column " +
                            std::to_string(col) + ": " + what);
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string read_name() {
    size_t start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_], pos_ == start)) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  int rule_index(const std::string& name) {
    auto [it, inserted] = index_.emplace(name, static_cast<int>(ir_->rule_names.size()));
    if (inserted) {
      ir_->rule_names.push_back(name);
      ir_->rule_body.push_back(-1);
      defined_.push_back(false);
      first_use_.push_back(pos_);
    }
    return it->second;
  }

  // True when the text at pos_ is `name ::=` (the start of the next rule).
  bool at_rule_start() const {
    size_t p = pos_;
    size_t start = p;
    while (p < text_.size() && is_name_char(text_[p], p == start)) ++p;
    if (p == start) return false;
    while (p < text_.size() &&
           (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' || text_[p] == '\r'))
      ++p;
    return text_.compare(p, 3, "::=") == 0;
  }

  Result<int> parse_alternatives(int depth) {
    if (depth > kMaxDepth) return error(pos_, "groups nested too deeply");
    std::vector<int> alts;
    while (true) {
      auto seq = parse_sequence(depth);
      if (!seq.ok()) return seq.status();
      alts.push_back(*seq);
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == '|') {
        ++pos_;
        continue;
      }
      break;
    }
    if (alts.size() == 1) return alts[0];
    IrNode n;
    n.kind = IrNode::Kind::kAlt;
    n.children = std::move(alts);
    return ir_->add(std::move(n));
  }

  Result<int> parse_sequence(int depth) {
    std::vector<int> items;
    while (true) {
      skip_space();
      if (pos_ >= text_.size()) break;
      char c = text_[pos_];
      if (c == '|' || c == ')') break;
      if (is_name_char(c, true) && at_rule_start()) break;
      auto item = parse_item(depth);
      if (!item.ok()) return item.status();
      auto rep = parse_postfix(*item);
      if (!rep.ok()) return rep.status();
      items.push_back(*rep);
    }
    if (items.empty()) return ir_->add(IrNode{});
    if (items.size() == 1) return items[0];
    IrNode n;
    n.kind = IrNode::Kind::kSeq;
    n.children = std::move(items);
    return ir_->add(std::move(n));
  }

  Result<int> parse_item(int depth) {
    size_t start = pos_;
    char c = text_[pos_];
    if (c == '"' || c == '\'') {
      ++pos_;
      IrNode n;
      n.kind = IrNode::Kind::kLiteral;
      while (true) {
        if (pos_ >= text_.size()) return error(start, "unterminated string literal");
        if (text_[pos_] == c) {
          ++pos_;
          break;
        }
        auto cp = read_char();
        if (!cp.ok()) return cp.status();
        tok::utf8_append(&n.bytes, static_cast<char32_t>(*cp));
      }
      if (n.bytes.empty()) n.kind = IrNode::Kind::kEmpty;
      return ir_->add(std::move(n));
    }
    if (c == '[') {
      ++pos_;
      bool negate = false;
      if (pos_ < text_.size() && text_[pos_] == '^') {
        negate = true;
        ++pos_;
      }
      std::vector<std::pair<uint32_t, uint32_t>> ranges;
      while (true) {
        if (pos_ >= text_.size()) return error(start, "unterminated character class");
        if (text_[pos_] == ']') {
          ++pos_;
          break;
        }
        auto lo = read_char();
        if (!lo.ok()) return lo.status();
        uint32_t hi = *lo;
        if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
          ++pos_;
          auto h = read_char();
          if (!h.ok()) return h.status();
          hi = *h;
          if (hi < *lo) return error(start, "character class range is reversed");
        }
        ranges.emplace_back(*lo, hi);
      }
      IrNode n;
      n.kind = IrNode::Kind::kClass;
      n.ranges = normalize_ranges(std::move(ranges), negate);
      if (n.ranges.empty()) return error(start, "character class matches no character");
      return ir_->add(std::move(n));
    }
    if (c == '.') {
      ++pos_;
      IrNode n;
      n.kind = IrNode::Kind::kClass;
      n.ranges = normalize_ranges({}, true);
      return ir_->add(std::move(n));
    }
    if (c == '(') {
      ++pos_;
      auto inner = parse_alternatives(depth + 1);
      if (!inner.ok()) return inner.status();
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != ')') return error(start, "unclosed '('");
      ++pos_;
      return *inner;
    }
    if (is_name_char(c, true)) {
      std::string name = read_name();
      IrNode n;
      n.kind = IrNode::Kind::kRef;
      n.rule = rule_index(name);
      return ir_->add(std::move(n));
    }
    return error(start, std::string("unexpected character '") + c + "'");
  }

  Result<int> parse_postfix(int item) {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      int min = 0, max = -1;
      size_t start = pos_;
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        min = 1;
        ++pos_;
      } else if (c == '?') {
        max = 1;
        ++pos_;
      } else if (c == '{') {
        ++pos_;
        auto a = read_int();
        if (!a) return error(start, "expected a number after '{'");
        min = *a;
        max = *a;
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          auto b = read_int();
          max = b ? *b : -1;
        }
        if (pos_ >= text_.size() || text_[pos_] != '}') return error(start, "expected '}'");
        ++pos_;
        if (max >= 0 && max < min) return error(start, "repetition {m,n} with n < m");
        if (min > kMaxRepeat || max > kMaxRepeat) {
          return error(start, "repetition counts above " + std::to_string(kMaxRepeat) +
                                  " are not supported");
        }
      } else {
        break;
      }
      IrNode n;
      n.kind = IrNode::Kind::kRepeat;
      n.children = {item};
      n.min = min;
      n.max = max;
      item = ir_->add(std::move(n));
    }
    return item;
  }

  std::optional<int> read_int() {
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      v = std::min<int64_t>(v * 10 + (text_[pos_] - '0'), 1 << 30);
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    return static_cast<int>(v);
  }

  // One character of a literal or class: an escape or a UTF-8 encoded code point.
  Result<uint32_t> read_char() {
    size_t start = pos_;
    auto c = static_cast<unsigned char>(text_[pos_]);
    if (c == '\\') {
      if (pos_ + 1 >= text_.size()) return error(start, "unfinished escape");
      char e = text_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n':
          return uint32_t{'\n'};
        case 'r':
          return uint32_t{'\r'};
        case 't':
          return uint32_t{'\t'};
        case 'f':
          return uint32_t{'\f'};
        case 'v':
          return uint32_t{'\v'};
        case '0':
          return uint32_t{0};
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '(':
        case ')':
        case '.':
        case '|':
        case '*':
        case '+':
        case '?':
        case '{':
        case '}':
          return static_cast<uint32_t>(e);
        case 'x':
          return read_hex(2, start);
        case 'u':
          return read_hex(4, start);
        case 'U':
          return read_hex(8, start);
        default:
          return error(start, std::string("unknown escape '\\") + e + "'");
      }
    }
    uint32_t cp = 0;
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + len > text_.size()) return error(start, "invalid UTF-8 in the grammar");
    cp = len == 1 ? c : (c & (0x7F >> len));
    for (int i = 1; i < len; ++i) {
      auto b = static_cast<unsigned char>(text_[pos_ + i]);
      if ((b & 0xC0) != 0x80) return error(start, "invalid UTF-8 in the grammar");
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += len;
    return cp;
  }

  Result<uint32_t> read_hex(int digits, size_t start) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= text_.size()) return error(start, "unfinished hex escape");
      char h = text_[pos_++];
      int d = h >= '0' && h <= '9'   ? h - '0'
              : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                     : -1;
      if (d < 0) return error(start, "bad hex digit in escape");
      v = v * 16 + d;
    }
    if (v > kMaxCodePoint || (v >= kSurrogateFirst && v <= kSurrogateLast)) {
      return error(start, "escape names no Unicode character");
    }
    return v;
  }

  std::string_view text_;
  size_t pos_ = 0;
  GrammarIr* ir_;
  std::map<std::string, int> index_;
  std::vector<bool> defined_;
  std::vector<size_t> first_use_;
};

}  // namespace

std::vector<std::pair<uint32_t, uint32_t>> normalize_ranges(
    std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negate) {
  // Drop surrogates, sort, merge.
  std::vector<std::pair<uint32_t, uint32_t>> split;
  for (auto [lo, hi] : ranges) {
    hi = std::min(hi, kMaxCodePoint);
    if (lo > hi) continue;
    if (lo < kSurrogateFirst && hi >= kSurrogateFirst) {
      split.emplace_back(lo, kSurrogateFirst - 1);
      lo = kSurrogateFirst;
    }
    if (lo >= kSurrogateFirst && lo <= kSurrogateLast) lo = kSurrogateLast + 1;
    if (lo <= hi) split.emplace_back(lo, hi);
  }
  std::sort(split.begin(), split.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (auto r : split) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (!negate) return merged;
  std::vector<std::pair<uint32_t, uint32_t>> out;
  uint32_t next = 0;
  auto add = [&](uint32_t lo, uint32_t hi) {
    if (lo > hi) return;
    if (lo < kSurrogateFirst && hi >= kSurrogateFirst) {
      out.emplace_back(lo, kSurrogateFirst - 1);
      lo = kSurrogateLast + 1;
    } else if (lo >= kSurrogateFirst && lo <= kSurrogateLast) {
      lo = kSurrogateLast + 1;
    }
    if (lo <= hi) out.emplace_back(lo, hi);
  };
  for (auto [lo, hi] : merged) {
    if (lo > next) add(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) add(next, kMaxCodePoint);
  return out;
}

Result<std::unique_ptr<GrammarIr>> parse_ebnf_ir(std::string_view text, std::string_view root) {
  auto ir = std::make_unique<GrammarIr>();
  Parser parser(text, ir.get());
  STRATA_RETURN_IF_ERROR(parser.parse());
  int r = parser.find_rule(root);
  if (r < 0)
    return invalid_argument("grammar has no rule '" + std::string(root) + "' (the start rule)");
  ir->root = r;
  return ir;
}

}  // namespace strata::grammar
