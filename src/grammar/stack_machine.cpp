#include "grammar/stack_machine.h"

#include <algorithm>

namespace strata::grammar {

int32_t StackMachine::make(int32_t rule, int32_t state, int32_t parent) {
  Frame f{rule, state, parent};
  auto [it, inserted] = index_.emplace(f, static_cast<int32_t>(frames_.size()));
  if (inserted) {
    frames_.push_back(f);
    seen_.push_back(0);
  }
  return it->second;
}

void StackMachine::rollback(size_t mark) {
  while (frames_.size() > mark) {
    index_.erase(frames_.back());
    frames_.pop_back();
    seen_.pop_back();
  }
}

// Adds f and everything reachable from it without reading a byte (calls, returns) to *out.
void StackMachine::close(int32_t f, std::vector<int32_t>* out) {
  work_.clear();
  work_.push_back(f);
  while (!work_.empty()) {
    int32_t id = work_.back();
    work_.pop_back();
    if (seen_[id] == stamp_) continue;
    seen_[id] = stamp_;
    out->push_back(id);
    const Frame fr = frames_[id];
    const RuleDfa& d = a_.rules[fr.rule];
    auto [b, e] = d.calls_of(fr.state);
    for (auto it = b; it != e; ++it) {
      int32_t ret = make(fr.rule, it->second, fr.parent);
      int32_t callee = make(it->first, a_.rules[it->first].start, ret);
      work_.push_back(callee);
    }
    if (d.accept[fr.state] && fr.parent >= 0) work_.push_back(fr.parent);
  }
}

std::vector<int32_t> StackMachine::initial() {
  std::vector<int32_t> out;
  ++stamp_;
  close(make(0, a_.rules[0].start, -1), &out);
  std::sort(out.begin(), out.end());
  return out;
}

void StackMachine::step(const std::vector<int32_t>& set, uint8_t byte, std::vector<int32_t>* out) {
  out->clear();
  ++stamp_;
  for (int32_t f : set) {
    const Frame fr = frames_[f];
    int32_t t = a_.step(fr.rule, fr.state, byte);
    if (t >= 0) close(make(fr.rule, t, fr.parent), out);
  }
  std::sort(out->begin(), out->end());
}

void StackMachine::step_frame(int32_t f, uint8_t byte, std::vector<int32_t>* out) {
  out->clear();
  ++stamp_;
  const Frame fr = frames_[f];
  int32_t t = a_.step(fr.rule, fr.state, byte);
  if (t >= 0) close(make(fr.rule, t, fr.parent), out);
  std::sort(out->begin(), out->end());
}

bool StackMachine::complete(const std::vector<int32_t>& set) const {
  for (int32_t f : set) {
    const Frame& fr = frames_[f];
    if (fr.parent < 0 && a_.rules[fr.rule].accept[fr.state]) return true;
  }
  return false;
}

int64_t StackMachine::completion_cost(const std::vector<int32_t>& set) const {
  int64_t best = kNoPath;
  for (int32_t f : set) {
    int64_t cost = 0;
    for (int32_t id = f; id >= 0 && cost < best; id = frames_[id].parent) {
      cost += a_.rules[frames_[id].rule].dist[frames_[id].state];
    }
    best = std::min(best, cost);
  }
  return best;
}

bool StackMachine::can_continue(const std::vector<int32_t>& set) const {
  for (int32_t f : set) {
    const Frame& fr = frames_[f];
    if (a_.rules[fr.rule].has_bytes[fr.state]) return true;
  }
  return false;
}

}  // namespace strata::grammar
