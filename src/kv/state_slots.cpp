#include "kv/state_slots.h"

#include <algorithm>

#include "core/check.h"

namespace strata::kv {

StateSlots::StateSlots(int64_t num_running, int64_t num_snapshots)
    : num_running_(num_running),
      running_used_(static_cast<size_t>(num_running), false),
      snaps_(static_cast<size_t>(num_snapshots)) {
  STRATA_CHECK(num_running >= 0 && num_snapshots >= 0 && num_running + num_snapshots <= INT32_MAX);
  // Handed out lowest first.
  for (int64_t i = num_running - 1; i >= 0; --i) free_running_.push_back(static_cast<int32_t>(i));
}

StateSlots::Snapshot& StateSlots::snap(int32_t slot) {
  STRATA_CHECK(slot >= num_running_ && slot < num_running_ + num_snapshots())
      << "state slot " << slot << " is not a snapshot slot";
  return snaps_[static_cast<size_t>(slot - num_running_)];
}
const StateSlots::Snapshot& StateSlots::snap(int32_t slot) const {
  return const_cast<StateSlots*>(this)->snap(slot);
}

int32_t StateSlots::acquire() {
  STRATA_CHECK(!free_running_.empty()) << "no free state slot (" << num_running_ << " in use)";
  const int32_t s = free_running_.back();
  free_running_.pop_back();
  running_used_[static_cast<size_t>(s)] = true;
  return s;
}

void StateSlots::release(int32_t slot) {
  STRATA_CHECK(slot >= 0 && slot < num_running_ && running_used_[static_cast<size_t>(slot)])
      << "state slot " << slot << " released but not in use";
  running_used_[static_cast<size_t>(slot)] = false;
  free_running_.push_back(slot);
}

std::optional<int32_t> StateSlots::find_ready(const BlockHash& hash) {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  Snapshot& s = snap(it->second);
  if (s.state != Snapshot::State::kReady) return std::nullopt;
  s.last_used = ++clock_;
  return it->second;
}

bool StateSlots::is_ready(const BlockHash& hash) const {
  auto it = by_hash_.find(hash);
  return it != by_hash_.end() && snap(it->second).state == Snapshot::State::kReady;
}

std::optional<int32_t> StateSlots::reserve(const BlockHash& hash, uint64_t step) {
  if (snaps_.empty() || by_hash_.count(hash)) return std::nullopt;
  int64_t best = -1;
  for (size_t i = 0; i < snaps_.size(); ++i) {
    const Snapshot& s = snaps_[i];
    if (s.state == Snapshot::State::kFree) {
      best = static_cast<int64_t>(i);
      break;
    }
    // Pinned ones wait for a restore; one pending in this very step would get two writes.
    if (s.pins > 0 || (s.state == Snapshot::State::kPending && s.step == step)) continue;
    if (best < 0 || s.last_used < snaps_[static_cast<size_t>(best)].last_used)
      best = static_cast<int64_t>(i);
  }
  if (best < 0) return std::nullopt;
  Snapshot& s = snaps_[static_cast<size_t>(best)];
  if (s.state != Snapshot::State::kFree) {
    by_hash_.erase(s.hash);
    ++stats_.evictions;
  }
  const int32_t slot = static_cast<int32_t>(num_running_ + best);
  s.state = Snapshot::State::kPending;
  s.hash = hash;
  s.step = step;
  s.last_used = ++clock_;
  by_hash_[hash] = slot;
  ++stats_.snapshots_taken;
  return slot;
}

void StateSlots::commit(int32_t slot, uint64_t step) {
  Snapshot& s = snap(slot);
  if (s.state == Snapshot::State::kPending && s.step == step) s.state = Snapshot::State::kReady;
}

void StateSlots::pin(int32_t slot) {
  ++snap(slot).pins;
}

void StateSlots::unpin(int32_t slot) {
  Snapshot& s = snap(slot);
  STRATA_CHECK_GT(s.pins, 0) << "state slot " << slot << " unpinned but not pinned";
  --s.pins;
}

StateSlotStats StateSlots::stats() const {
  StateSlotStats st = stats_;
  st.num_running = num_running_;
  st.running_in_use = num_running_ - num_free_running();
  st.num_snapshots = num_snapshots();
  for (const Snapshot& s : snaps_) {
    st.snapshots_ready += s.state == Snapshot::State::kReady;
    st.snapshots_pending += s.state == Snapshot::State::kPending;
  }
  return st;
}

void StateSlots::check_invariants() const {
  int64_t used = 0;
  for (bool u : running_used_) used += u;
  STRATA_CHECK_EQ(used + num_free_running(), num_running_) << "running state slots out of sync";
  for (int32_t s : free_running_)
    STRATA_CHECK(!running_used_[static_cast<size_t>(s)]) << "state slot " << s << " free and used";
  int64_t kept = 0;
  for (size_t i = 0; i < snaps_.size(); ++i) {
    const Snapshot& s = snaps_[i];
    if (s.state == Snapshot::State::kFree) {
      STRATA_CHECK_EQ(s.pins, 0) << "a free snapshot slot is pinned";
      continue;
    }
    ++kept;
    auto it = by_hash_.find(s.hash);
    STRATA_CHECK(it != by_hash_.end() && it->second == num_running_ + static_cast<int64_t>(i))
        << "snapshot slot " << num_running_ + static_cast<int64_t>(i) << " not in the hash map";
  }
  STRATA_CHECK_EQ(kept, static_cast<int64_t>(by_hash_.size())) << "snapshot hash map out of sync";
}

}  // namespace strata::kv
