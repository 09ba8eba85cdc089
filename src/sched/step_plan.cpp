#include "sched/step_plan.h"

#include "core/byte_io.h"

namespace strata::sched {
namespace {

constexpr uint32_t kMagic = 0x4E4C5053;  // "SPLN"
constexpr uint32_t kVersion = 2;         // 2: state slots, restores and snapshots

void write_transfers(ByteWriter& w, const std::vector<KvTransfer>& v) {
  w.u64(v.size());
  for (const KvTransfer& t : v) {
    w.i32(t.block);
    w.u32(t.tier);
    w.u64(t.key_lo);
    w.u64(t.key_hi);
  }
}

std::vector<KvTransfer> read_transfers(ByteReader& r) {
  const uint64_t n = r.count(20);
  std::vector<KvTransfer> v(n);
  for (KvTransfer& t : v) {
    t.block = r.i32();
    t.tier = r.u32();
    t.key_lo = r.u64();
    t.key_hi = r.u64();
  }
  return v;
}

bool in_range(uint64_t offset, uint64_t count, size_t size) {
  return offset <= size && count <= size - offset;
}

}  // namespace

std::string encode_step_plan(const StepPlan& p) {
  ByteWriter w;
  w.u32(kMagic);
  w.u32(kVersion);
  w.u64(p.step);
  w.i64(p.total_num_scheduled_tokens);
  w.u64(p.scheduled.size());
  for (const ScheduledRequest& s : p.scheduled) {
    w.str(s.request_id);
    w.u32(s.handle.slot);
    w.u32(s.handle.generation);
    w.i64(s.num_computed_tokens);
    w.i64(s.num_scheduled_tokens);
    w.boolean(s.new_block_table);
    w.boolean(s.will_sample);
    w.u32(s.token_ids_offset);
    w.u32(s.block_ids_offset);
    w.u32(s.block_ids_count);
    w.u32(s.spec_token_ids_offset);
    w.u32(s.spec_token_ids_count);
    w.i32(s.state_slot);
  }
  w.vec(p.token_ids);
  w.vec(p.block_ids);
  w.vec(p.spec_token_ids);
  w.strings(p.preempted_ids);
  w.strings(p.finished_ids);
  write_transfers(w, p.kv_loads);
  write_transfers(w, p.kv_stores);
  w.u64(p.state_restores.size());
  for (const StateRestore& c : p.state_restores) {
    w.i32(c.src_slot);
    w.i32(c.dst_slot);
  }
  w.u64(p.state_snapshots.size());
  for (const StateSnapshot& c : p.state_snapshots) {
    w.u32(c.entry);
    w.i64(c.boundary);
    w.i32(c.dst_slot);
  }
  return w.take();
}

Result<StepPlan> decode_step_plan(std::string_view bytes) {
  ByteReader r(bytes, "step plan");
  if (r.u32() != kMagic && r.ok()) r.fail("not a step plan (bad magic)");
  const uint32_t version = r.u32();
  if (r.ok() && version != kVersion)
    r.fail("version " + std::to_string(version) + ", expected " + std::to_string(kVersion));
  StepPlan p;
  p.step = r.u64();
  p.total_num_scheduled_tokens = r.i64();
  const uint64_t n = r.count(8 + 8 + 8 + 8 + 2 + 20 + 4);
  p.scheduled.resize(n);
  for (ScheduledRequest& s : p.scheduled) {
    s.request_id = r.str();
    s.handle.slot = r.u32();
    s.handle.generation = r.u32();
    s.num_computed_tokens = r.i64();
    s.num_scheduled_tokens = r.i64();
    s.new_block_table = r.boolean();
    s.will_sample = r.boolean();
    s.token_ids_offset = r.u32();
    s.block_ids_offset = r.u32();
    s.block_ids_count = r.u32();
    s.spec_token_ids_offset = r.u32();
    s.spec_token_ids_count = r.u32();
    s.state_slot = r.i32();
  }
  p.token_ids = r.vec<int32_t>();
  p.block_ids = r.vec<kv::BlockId>();
  p.spec_token_ids = r.vec<int32_t>();
  p.preempted_ids = r.strings();
  p.finished_ids = r.strings();
  p.kv_loads = read_transfers(r);
  p.kv_stores = read_transfers(r);
  p.state_restores.resize(r.count(8));
  for (StateRestore& c : p.state_restores) {
    c.src_slot = r.i32();
    c.dst_slot = r.i32();
  }
  p.state_snapshots.resize(r.count(16));
  for (StateSnapshot& c : p.state_snapshots) {
    c.entry = r.u32();
    c.boundary = r.i64();
    c.dst_slot = r.i32();
  }
  for (const StateRestore& c : p.state_restores)
    if (r.ok() && (c.src_slot < 0 || c.dst_slot < 0)) r.fail("a state restore names a bad slot");
  for (const StateSnapshot& c : p.state_snapshots) {
    if (!r.ok()) break;
    if (c.entry >= p.scheduled.size() || c.dst_slot < 0) {
      r.fail("a state snapshot names a bad entry or slot");
      break;
    }
    const ScheduledRequest& s = p.scheduled[c.entry];
    if (!(s.num_computed_tokens < c.boundary &&
          c.boundary <= s.num_computed_tokens + s.num_scheduled_tokens))
      r.fail("a state snapshot's boundary is outside its entry's tokens");
  }
  // Every view must stay inside the plan's arrays.
  int64_t total = 0;
  for (const ScheduledRequest& s : p.scheduled) {
    if (!r.ok()) break;
    if (s.num_computed_tokens < 0 || s.num_scheduled_tokens < 0 ||
        !in_range(s.token_ids_offset, static_cast<uint64_t>(s.num_scheduled_tokens),
                  p.token_ids.size()) ||
        !in_range(s.block_ids_offset, s.block_ids_count, p.block_ids.size()) ||
        !in_range(s.spec_token_ids_offset, s.spec_token_ids_count, p.spec_token_ids.size()))
      r.fail("request '" + s.request_id + "' has counts or offsets outside the plan");
    total += s.num_scheduled_tokens;
  }
  if (r.ok() && total != p.total_num_scheduled_tokens)
    r.fail("the scheduled tokens add up to " + std::to_string(total) + ", not " +
           std::to_string(p.total_num_scheduled_tokens));
  STRATA_RETURN_IF_ERROR(r.finish());
  return p;
}

}  // namespace strata::sched
