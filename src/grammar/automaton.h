// A grammar compiled to a recursive transition network: one DFA per "called" rule (the root, the
// rules on a reference cycle, and large rules used more than once); every other rule is inlined
// into its callers. DFA edges read byte classes (bytes the grammar never tells apart share a
// class) or call another rule, continuing at the edge's target once the callee has finished.
// States that cannot reach an accepting state are pruned, so every live state is a viable prefix.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/status.h"
#include "grammar/grammar_ir.h"

namespace strata::grammar {

struct RuleDfa {
  int num_states = 0;
  int start = 0;
  std::vector<int32_t> next;       // [num_states * num_classes] target state, -1: dead
  std::vector<uint8_t> accept;     // [num_states] the rule may end here
  std::vector<uint8_t> has_bytes;  // [num_states] some byte edge leaves the state
  // [num_states] the fewest bytes that finish the rule from here (a call costs the callee's
  // shortest sentence); kNoPath for dead states.
  std::vector<int32_t> dist;
  // [num_states + 1] offsets into calls: the call edges (callee rule, target state) of a state.
  std::vector<int32_t> call_begin;
  std::vector<std::pair<int32_t, int32_t>> calls;
  std::string name;

  std::pair<const std::pair<int32_t, int32_t>*, const std::pair<int32_t, int32_t>*> calls_of(
      int s) const {
    return {calls.data() + call_begin[s], calls.data() + call_begin[s + 1]};
  }
};

inline constexpr int32_t kNoPath = 1 << 29;

struct Automaton {
  std::array<uint8_t, 256> byte_class{};  // byte -> class
  int num_classes = 0;
  std::vector<RuleDfa> rules;       // called rules; index 0 is the root
  std::vector<int32_t> state_base;  // [rules.size() + 1] global id of each rule's state 0
  int total_states() const { return state_base.back(); }

  int32_t step(int rule, int state, uint8_t byte) const {
    const RuleDfa& d = rules[rule];
    return d.next[static_cast<size_t>(state) * num_classes + byte_class[byte]];
  }
};

// Compiles parsed rules. Errors: left recursion, a root that matches nothing, a grammar whose
// automata exceed the size limits.
Result<std::unique_ptr<Automaton>> compile_automaton(const GrammarIr& ir);

}  // namespace strata::grammar
