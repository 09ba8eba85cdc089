// Prometheus text under vLLM's names and buckets, and the stats line.
#include <gtest/gtest.h>

#include "server/metrics.h"
#include "server/stats_logger.h"

namespace strata::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(Histogram, CumulativeBuckets) {
  Histogram h({0.1, 1.0});
  for (double v : {0.05, 0.1, 0.5, 2.0}) h.observe(v);
  EXPECT_EQ(h.cumulative(0), 2u);  // le=0.1 includes 0.1
  EXPECT_EQ(h.cumulative(1), 3u);
  EXPECT_EQ(h.cumulative(2), 4u);  // +Inf
  EXPECT_EQ(h.count(), 4u);
  EXPECT_DOUBLE_EQ(h.sum(), 2.65);
}

TEST(Histogram, VllmBucketLists) {
  EXPECT_EQ(ttft_buckets().size(), 22u);
  EXPECT_EQ(ttft_buckets().front(), 0.001);
  EXPECT_EQ(ttft_buckets().back(), 2560.0);
  EXPECT_EQ(per_token_buckets().size(), 19u);
  EXPECT_EQ(request_latency_buckets().size(), 21u);
  EXPECT_EQ(request_latency_buckets().back(), 7680.0);
  EXPECT_EQ(buckets_1_2_5(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(buckets_1_2_5(512), (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500}));
}

TEST(Metrics, NumbersAsPrometheusClientWritesThem) {
  EXPECT_EQ(prom_number(0), "0.0");
  EXPECT_EQ(prom_number(3), "3.0");
  EXPECT_EQ(prom_number(0.25), "0.25");
  EXPECT_EQ(prom_number(2560), "2560.0");
  EXPECT_EQ(prom_number(1.0 / 0.0), "+Inf");
  EXPECT_EQ(prom_escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(Metrics, RendersVllmSeries) {
  ServerMetrics m("my-model", 512);
  m.observe_ttft(0.03);
  m.observe_inter_token_latency(0.02);
  FinishedSequence s;
  s.finish_reason = "stop";
  s.e2e = 0.4;
  s.queue = 0.01;
  s.prefill = 0.02;
  s.decode = 0.3;
  s.inference = 0.32;
  s.tpot = 0.03;
  s.prompt_tokens = 7;
  s.generation_tokens = 11;
  s.max_tokens_param = 16;
  m.observe_finished(s);
  m.count_rejected("queue_full");
  engine::EngineStats st;
  st.num_running = 3;
  st.num_waiting = 1;
  st.kv_cache_usage = 0.25;
  st.prefix_cache_queries = 100;
  st.prefix_cache_hits = 40;
  st.num_preemptions = 2;
  st.prompt_tokens = 70;
  st.generation_tokens = 110;
  st.requests_finished_stop = 5;
  st.requests_finished_length = 6;
  st.requests_finished_abort = 1;
  st.kv_blocks_total = 100;
  st.kv_blocks_referenced = 25;
  st.kv_blocks_cached_free = 10;
  st.kv_blocks_free = 65;
  std::string t = m.render(st, {4, 2});
  const std::string L = "model_name=\"my-model\",engine=\"0\"";
  EXPECT_TRUE(has_line(t, "# TYPE vllm:num_requests_running gauge")) << t;
  EXPECT_TRUE(has_line(t, "vllm:num_requests_running{" + L + "} 3.0"));
  EXPECT_TRUE(has_line(t, "vllm:num_requests_waiting{" + L + "} 1.0"));
  EXPECT_TRUE(has_line(t, "vllm:kv_cache_usage_perc{" + L + "} 0.25"));
  EXPECT_TRUE(has_line(t, "# TYPE vllm:prefix_cache_queries_total counter"));
  EXPECT_TRUE(has_line(t, "vllm:prefix_cache_queries_total{" + L + "} 100.0"));
  EXPECT_TRUE(has_line(t, "vllm:prefix_cache_hits_total{" + L + "} 40.0"));
  EXPECT_TRUE(has_line(t, "vllm:num_preemptions_total{" + L + "} 2.0"));
  EXPECT_TRUE(has_line(t, "vllm:prompt_tokens_total{" + L + "} 70.0"));
  EXPECT_TRUE(has_line(t, "vllm:generation_tokens_total{" + L + "} 110.0"));
  EXPECT_TRUE(has_line(t, "vllm:request_success_total{" + L + ",finished_reason=\"stop\"} 5.0"));
  EXPECT_TRUE(has_line(t, "vllm:request_success_total{" + L + ",finished_reason=\"length\"} 6.0"));
  EXPECT_TRUE(has_line(t, "# TYPE vllm:time_to_first_token_seconds histogram"));
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_bucket{" + L + ",le=\"0.02\"} 0.0"));
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_bucket{" + L + ",le=\"0.04\"} 1.0"));
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_bucket{" + L + ",le=\"+Inf\"} 1.0"));
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_count{" + L + "} 1.0"));
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_sum{" + L + "} 0.03"));
  EXPECT_EQ(count_of(t, "vllm:time_to_first_token_seconds_bucket{"), 23);
  EXPECT_EQ(count_of(t, "vllm:inter_token_latency_seconds_bucket{"), 20);
  EXPECT_EQ(count_of(t, "vllm:e2e_request_latency_seconds_bucket{"), 22);
  for (const char* h :
       {"vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
        "vllm:request_inference_time_seconds", "vllm:request_time_per_output_token_seconds",
        "vllm:request_prompt_tokens", "vllm:request_generation_tokens"})
    EXPECT_TRUE(has_line(t, std::string(h) + "_count{" + L + "} 1.0")) << h;
  EXPECT_TRUE(has_line(t, "vllm:request_prompt_tokens_bucket{" + L + ",le=\"5.0\"} 0.0"));
  EXPECT_TRUE(has_line(t, "vllm:request_prompt_tokens_bucket{" + L + ",le=\"10.0\"} 1.0"));
  EXPECT_TRUE(has_line(t, "strata:kv_cache_blocks{" + L + ",state=\"cached_free\"} 10.0"));
  EXPECT_TRUE(has_line(t, "strata:kv_cache_blocks{" + L + ",state=\"referenced\"} 25.0"));
  // No KV tiers configured: no per-tier series, external lookups count zero.
  EXPECT_EQ(t.find("kv_tier"), std::string::npos);
  EXPECT_TRUE(has_line(t, "vllm:external_prefix_cache_queries_total{" + L + "} 0.0"));
  EXPECT_TRUE(has_line(t, "strata:http_connections{" + L + "} 4.0"));
  EXPECT_TRUE(has_line(t, "strata:requests_rejected_total{" + L + ",reason=\"queue_full\"} 1.0"));
}

TEST(Metrics, KvTierSeriesPerTier) {
  ServerMetrics m("tiny", 512);
  engine::EngineStats s;
  s.has_kv_tiers = true;
  s.external_prefix_cache_queries = 800;
  s.external_prefix_cache_hits = 640;
  s.cpu_tier = {true, 30, 120, 40, 50, 2048, 4096};
  s.disk_tier = {true, 200, 1000, 7, 60, 512, 256};
  s.kv_tier_load_corrupt = 3;
  s.kv_tier_load_missing = 1;
  const std::string t = m.render(s, {});
  const std::string L = "model_name=\"tiny\",engine=\"0\"";
  EXPECT_TRUE(has_line(t, "vllm:external_prefix_cache_queries_total{" + L + "} 800.0")) << t;
  EXPECT_TRUE(has_line(t, "vllm:external_prefix_cache_hits_total{" + L + "} 640.0"));
  EXPECT_TRUE(has_line(t, "strata:kv_tier_blocks{" + L + ",tier=\"cpu\"} 30.0"));
  EXPECT_TRUE(has_line(t, "strata:kv_tier_blocks{" + L + ",tier=\"disk\"} 200.0"));
  EXPECT_TRUE(has_line(t, "strata:kv_tier_usage_perc{" + L + ",tier=\"cpu\"} 0.25"));
  EXPECT_TRUE(has_line(t, "strata:kv_tier_hits_total{" + L + ",tier=\"disk\"} 7.0"));
  EXPECT_TRUE(has_line(t, "strata:kv_tier_stores_total{" + L + ",tier=\"cpu\"} 50.0"));
  EXPECT_TRUE(
      has_line(t, "strata:kv_tier_bytes_total{" + L + ",tier=\"cpu\",direction=\"out\"} 4096.0"));
  EXPECT_TRUE(has_line(t, "strata:kv_tier_load_failures_total{" + L + ",reason=\"corrupt\"} 3.0"));
  EXPECT_TRUE(has_line(t, "# TYPE strata:kv_tier_hits_total counter"));
  // A configuration with only the disk tier has no cpu series.
  s.cpu_tier.present = false;
  const std::string d = m.render(s, {});
  EXPECT_EQ(d.find("tier=\"cpu\""), std::string::npos);
  EXPECT_TRUE(has_line(d, "strata:kv_tier_blocks{" + L + ",tier=\"disk\"} 200.0"));
}

TEST(StatsLine, ShowsTheTiersWhenConfigured) {
  StatsLine l;
  l.kv_cache_usage = 0.5;
  l.has_cpu_tier = true;
  l.cpu_kv_cache_usage = 0.25;
  l.external_prefix_hit_rate = 0.9;
  const std::string line = format_stats_line(l);
  EXPECT_NE(line.find("KV cache usage: 50.0%, Prefix cache hit rate: 0.0%, CPU KV cache usage: "
                      "25.0%, External prefix cache hit rate: 90.0%"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("Disk"), std::string::npos);
  engine::EngineStats s;
  s.disk_tier = {true, 10, 40, 0, 0, 0, 0};
  StatsLogger logger(s, 0.0);
  s.external_prefix_cache_queries = 100;
  s.external_prefix_cache_hits = 75;
  bool busy = false;
  const StatsLine t = logger.tick(s, 10.0, &busy);
  EXPECT_TRUE(t.has_disk_tier);
  EXPECT_FALSE(t.has_cpu_tier);
  EXPECT_DOUBLE_EQ(t.disk_kv_cache_usage, 0.25);
  EXPECT_DOUBLE_EQ(t.external_prefix_hit_rate, 0.75);
}

TEST(StatsLine, ShowsStateSlotsWhenTheModelKeepsState) {
  engine::EngineStats s;
  s.state_slots_running = 4;
  s.state_snapshots = 4;
  s.state_slot_bytes = 1 << 20;
  StatsLogger logger(s, 0.0);
  s.state_slots_in_use = 3;
  s.state_snapshots_ready = 2;
  bool busy = false;
  const std::string line = format_stats_line(logger.tick(s, 10.0, &busy));
  EXPECT_NE(line.find(", State slots: 3/4 running, 2/4 snapshots (8.0 MiB)"), std::string::npos)
      << line;
  EXPECT_EQ(format_stats_line(StatsLine{}).find("State"), std::string::npos);
}

TEST(StatsLine, VllmFormat) {
  StatsLine l;
  l.prompt_throughput = 12.34;
  l.generation_throughput = 45.66;
  l.running = 3;
  l.waiting = 1;
  l.preemptions = 2;
  l.kv_cache_usage = 0.0125;
  l.prefix_hit_rate = 0.5;
  EXPECT_EQ(format_stats_line(l),
            "Engine 000: Avg prompt throughput: 12.3 tokens/s, Avg generation throughput: 45.7 "
            "tokens/s, Running: 3 reqs, Waiting: 1 reqs, Preemptions: 2, KV cache usage: 1.2%, "
            "Prefix cache hit rate: 50.0%");
}

TEST(StatsLine, IntervalsAndIdleness) {
  engine::EngineStats s;
  StatsLogger logger(s, 100.0);
  s.prompt_tokens = 200;
  s.generation_tokens = 50;
  s.num_running = 2;
  s.num_preemptions = 3;
  s.prefix_cache_queries = 100;
  s.prefix_cache_hits = 25;
  s.kv_cache_usage = 0.5;
  bool busy = false;
  StatsLine l = logger.tick(s, 110.0, &busy);
  EXPECT_TRUE(busy);
  EXPECT_DOUBLE_EQ(l.prompt_throughput, 20.0);
  EXPECT_DOUBLE_EQ(l.generation_throughput, 5.0);
  EXPECT_EQ(l.preemptions, 3);
  EXPECT_DOUBLE_EQ(l.prefix_hit_rate, 0.25);
  // Idle interval right after a busy one still logs (vLLM), with the last hit rate.
  s.num_running = 0;
  l = logger.tick(s, 120.0, &busy);
  EXPECT_TRUE(busy);
  EXPECT_DOUBLE_EQ(l.prompt_throughput, 0.0);
  EXPECT_EQ(l.preemptions, 0);
  EXPECT_DOUBLE_EQ(l.prefix_hit_rate, 0.25);
  l = logger.tick(s, 130.0, &busy);
  EXPECT_FALSE(busy);
}

}  // namespace
}  // namespace strata::server
