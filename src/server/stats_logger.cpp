#include "server/stats_logger.h"

#include <cstdio>

namespace strata::server {

std::string format_stats_line(const StatsLine& l) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: "
                "%.1f tokens/s, Running: %lld reqs, Waiting: %lld reqs, Preemptions: %lld, KV "
                "cache usage: %.1f%%, Prefix cache hit rate: %.1f%%",
                l.prompt_throughput, l.generation_throughput, static_cast<long long>(l.running),
                static_cast<long long>(l.waiting), static_cast<long long>(l.preemptions),
                l.kv_cache_usage * 100, l.prefix_hit_rate * 100);
  std::string out = buf;
  auto pct = [&](const char* label, double v) {
    std::snprintf(buf, sizeof(buf), ", %s: %.1f%%", label, v * 100);
    out += buf;
  };
  if (l.has_cpu_tier) pct("CPU KV cache usage", l.cpu_kv_cache_usage);
  if (l.has_disk_tier) pct("Disk KV cache usage", l.disk_kv_cache_usage);
  if (l.has_cpu_tier || l.has_disk_tier)
    pct("External prefix cache hit rate", l.external_prefix_hit_rate);
  if (l.state_slots > 0) {
    std::snprintf(
        buf, sizeof(buf), ", State slots: %lld/%lld running, %lld/%lld snapshots (%.1f MiB)",
        static_cast<long long>(l.state_slots_in_use), static_cast<long long>(l.state_slots),
        static_cast<long long>(l.state_snapshots_ready), static_cast<long long>(l.state_snapshots),
        static_cast<double>(l.state_bytes) / (1024.0 * 1024.0));
    out += buf;
  }
  return out;
}

StatsLogger::StatsLogger(const engine::EngineStats& initial, double now)
    : last_(initial), last_time_(now) {}

StatsLine StatsLogger::tick(const engine::EngineStats& s, double now, bool* busy) {
  StatsLine l;
  const double dt = now - last_time_;
  const int64_t prompt = s.prompt_tokens - last_.prompt_tokens;
  const int64_t gen = s.generation_tokens - last_.generation_tokens;
  if (dt > 0) {
    l.prompt_throughput = static_cast<double>(prompt) / dt;
    l.generation_throughput = static_cast<double>(gen) / dt;
  }
  l.running = s.num_running;
  l.waiting = s.num_waiting;
  l.preemptions = s.num_preemptions - last_.num_preemptions;
  l.kv_cache_usage = s.kv_cache_usage;
  const int64_t queries = s.prefix_cache_queries - last_.prefix_cache_queries;
  const int64_t hits = s.prefix_cache_hits - last_.prefix_cache_hits;
  if (queries > 0) last_hit_rate_ = static_cast<double>(hits) / static_cast<double>(queries);
  l.prefix_hit_rate = last_hit_rate_;
  l.has_cpu_tier = s.cpu_tier.present;
  l.has_disk_tier = s.disk_tier.present;
  l.cpu_kv_cache_usage = s.cpu_tier.usage();
  l.disk_kv_cache_usage = s.disk_tier.usage();
  const int64_t ext_queries = s.external_prefix_cache_queries - last_.external_prefix_cache_queries;
  const int64_t ext_hits = s.external_prefix_cache_hits - last_.external_prefix_cache_hits;
  if (ext_queries > 0)
    last_external_hit_rate_ = static_cast<double>(ext_hits) / static_cast<double>(ext_queries);
  l.external_prefix_hit_rate = last_external_hit_rate_;
  l.state_slots = s.state_slots_running;
  l.state_slots_in_use = s.state_slots_in_use;
  l.state_snapshots = s.state_snapshots;
  l.state_snapshots_ready = s.state_snapshots_ready;
  l.state_bytes = (s.state_slots_running + s.state_snapshots) * s.state_slot_bytes;
  const bool now_busy = prompt > 0 || gen > 0 || s.num_running > 0 || s.num_waiting > 0;
  *busy = now_busy || last_busy_;
  last_busy_ = now_busy;
  last_ = s;
  last_time_ = now;
  return l;
}

}  // namespace strata::server
