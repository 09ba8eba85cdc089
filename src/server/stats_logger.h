// The periodic stats line in vLLM v1's format:
//   Engine 000: Avg prompt throughput: 12.3 tokens/s, Avg generation throughput: 45.6 tokens/s,
//   Running: 3 reqs, Waiting: 0 reqs, Preemptions: 0, KV cache usage: 1.2%, Prefix cache hit
//   rate: 50.0%
// (one line). Throughputs and preemptions cover the interval since the previous line; the hit
// rate covers the interval's prefix-cache queries (the previous rate when there were none).
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine_types.h"

namespace strata::server {

struct StatsLine {
  double prompt_throughput = 0;      // tokens/s
  double generation_throughput = 0;  // tokens/s
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t preemptions = 0;
  double kv_cache_usage = 0;   // fraction
  double prefix_hit_rate = 0;  // fraction
  // KV tiers (only shown when configured): usage of the RAM and disk tiers, and the hit rate of
  // lookups that missed the pool (vLLM's external prefix cache).
  bool has_cpu_tier = false, has_disk_tier = false;
  double cpu_kv_cache_usage = 0, disk_kv_cache_usage = 0;
  double external_prefix_hit_rate = 0;
  // Per-sequence state slots (models that keep state, e.g. DeepSeek-V4): shown when present.
  int64_t state_slots = 0, state_slots_in_use = 0;
  int64_t state_snapshots = 0, state_snapshots_ready = 0;
  int64_t state_bytes = 0;  // all slots
};

std::string format_stats_line(const StatsLine& line);

class StatsLogger {
 public:
  StatsLogger(const engine::EngineStats& initial, double now);
  // The line for the interval ending at `now`. *busy is false when this and the previous
  // interval saw no tokens (vLLM then logs at DEBUG to keep idle servers quiet).
  StatsLine tick(const engine::EngineStats& stats, double now, bool* busy);

 private:
  engine::EngineStats last_;
  double last_time_;
  double last_hit_rate_ = 0;
  double last_external_hit_rate_ = 0;
  bool last_busy_ = false;
};

}  // namespace strata::server
