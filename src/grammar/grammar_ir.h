// The parsed form of a grammar (internal to the grammar module): rules whose bodies are
// expression trees over code-point terminals, as written, before compilation to automata.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace strata::grammar {

struct IrNode {
  enum class Kind {
    kEmpty,    // matches ""
    kLiteral,  // `bytes` exactly (UTF-8)
    kClass,    // one code point in `ranges` (sorted, disjoint, negation already applied)
    kRef,      // the rule `rule`
    kSeq,      // children in order
    kAlt,      // one of the children
    kRepeat,   // children[0] repeated min..max times (max < 0: unbounded)
  };
  Kind kind = Kind::kEmpty;
  std::string bytes;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive code point ranges
  int rule = -1;
  std::vector<int> children;  // node indices
  int min = 0, max = -1;
};

struct GrammarIr {
  std::vector<IrNode> nodes;
  std::vector<std::string> rule_names;
  std::vector<int> rule_body;  // [num_rules] node index of each rule's body
  int root = 0;                // rule index of the start rule

  int add(IrNode node) {
    nodes.push_back(std::move(node));
    return static_cast<int>(nodes.size()) - 1;
  }
};

// The largest code point, and the surrogate block no UTF-8 text contains.
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr uint32_t kSurrogateFirst = 0xD800, kSurrogateLast = 0xDFFF;

}  // namespace strata::grammar

#include <memory>
#include <string_view>

#include "core/status.h"

namespace strata::grammar {

// EBNF text (the dialect in grammar.h) -> IR. Checks syntax, undefined and duplicate rules and
// the root's presence; automaton-level checks (left recursion, empty languages) come later.
Result<std::unique_ptr<GrammarIr>> parse_ebnf_ir(std::string_view text, std::string_view root);

// Sorts and merges code point ranges; with `negate`, the complement within the valid code
// points (surrogates excluded).
std::vector<std::pair<uint32_t, uint32_t>> normalize_ranges(
    std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negate);

}  // namespace strata::grammar
