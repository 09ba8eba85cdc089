// Runs an Automaton as a pushdown machine over bytes. The machine's position is a set of
// stacks; a stack is a frame id, a frame being (rule, state, parent frame). Frames are interned,
// so equal stacks have equal ids and a set of stacks is a sorted vector of ints. Sets are kept
// closed: every frame that a call or a return reachable without reading a byte leads to is in
// the set.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"

namespace strata::grammar {

class StackMachine {
 public:
  explicit StackMachine(const Automaton& a) : a_(a) {}

  struct Frame {
    int32_t rule, state, parent;  // parent: frame id, -1 at the bottom
  };

  // The closed set at the start of the input.
  std::vector<int32_t> initial();
  // The closed set after reading `byte` from `set` into *out (cleared first); empty: rejected.
  void step(const std::vector<int32_t>& set, uint8_t byte, std::vector<int32_t>* out);
  // Steps from the single frame `f` (not closed: its calls and returns are assumed to be in the
  // set it came from) by `byte`.
  void step_frame(int32_t f, uint8_t byte, std::vector<int32_t>* out);
  // The whole input so far is a sentence: a bottom frame sits in an accepting state.
  bool complete(const std::vector<int32_t>& set) const;
  // The fewest bytes that complete the input from this set (0: complete), kNoPath if none.
  int64_t completion_cost(const std::vector<int32_t>& set) const;
  // Some frame can read another byte.
  bool can_continue(const std::vector<int32_t>& set) const;

  const Frame& frame(int32_t id) const { return frames_[id]; }
  // Frames made after a checkpoint can be dropped with rollback(), e.g. after trying tokens.
  size_t checkpoint() const { return frames_.size(); }
  void rollback(size_t mark);

 private:
  int32_t make(int32_t rule, int32_t state, int32_t parent);
  void close(int32_t f, std::vector<int32_t>* out);

  struct KeyHash {
    size_t operator()(const Frame& f) const {
      uint64_t h = static_cast<uint64_t>(f.rule) * 0x9E3779B97F4A7C15ull ^
                   static_cast<uint64_t>(f.state) * 0xC2B2AE3D27D4EB4Full ^
                   static_cast<uint64_t>(static_cast<uint32_t>(f.parent)) * 0x165667B19E3779F9ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  struct KeyEq {
    bool operator()(const Frame& x, const Frame& y) const {
      return x.rule == y.rule && x.state == y.state && x.parent == y.parent;
    }
  };

  const Automaton& a_;
  std::vector<Frame> frames_;
  std::unordered_map<Frame, int32_t, KeyHash, KeyEq> index_;
  std::vector<int32_t> work_;
  std::vector<uint32_t> seen_;  // [frame] stamp of the set being closed
  uint32_t stamp_ = 0;
};

}  // namespace strata::grammar
