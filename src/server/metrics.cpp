#include "server/metrics.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

namespace strata::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  counts_[i]++;
  count_++;
  sum_ += value;
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t c = 0;
  for (size_t k = 0; k <= i && k < counts_.size(); ++k) c += counts_[k];
  return c;
}

std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> per_token_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}

std::vector<double> request_latency_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::vector<double> buckets_1_2_5(int64_t max_value) {
  std::vector<double> out;
  for (double scale = 1;; scale *= 10) {
    for (int m : {1, 2, 5}) {
      double v = m * scale;
      if (v > static_cast<double>(max_value)) return out;
      out.push_back(v);
    }
  }
}

std::string prom_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[40];
    auto r = std::to_chars(buf, buf + sizeof(buf), static_cast<long long>(v));
    return std::string(buf, r.ptr) + ".0";
  }
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string prom_escape(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

ServerMetrics::ServerMetrics(std::string model_name, int64_t max_model_len)
    : model_name_(std::move(model_name)),
      ttft_(ttft_buckets()),
      itl_(per_token_buckets()),
      tpot_(per_token_buckets()),
      e2e_(request_latency_buckets()),
      queue_(request_latency_buckets()),
      inference_(request_latency_buckets()),
      prefill_(request_latency_buckets()),
      decode_(request_latency_buckets()),
      prompt_tokens_(buckets_1_2_5(max_model_len)),
      generation_tokens_(buckets_1_2_5(max_model_len)),
      params_n_({1, 2, 5, 10, 20}),
      params_max_tokens_(buckets_1_2_5(max_model_len)) {}

void ServerMetrics::observe_ttft(double s) {
  ttft_.observe(s);
}

void ServerMetrics::observe_inter_token_latency(double s) {
  itl_.observe(s);
}

void ServerMetrics::observe_finished(const FinishedSequence& s) {
  if (s.e2e >= 0) e2e_.observe(s.e2e);
  if (s.queue >= 0) queue_.observe(s.queue);
  if (s.prefill >= 0) prefill_.observe(s.prefill);
  if (s.decode >= 0) decode_.observe(s.decode);
  if (s.inference >= 0) inference_.observe(s.inference);
  if (s.tpot >= 0) tpot_.observe(s.tpot);
  prompt_tokens_.observe(static_cast<double>(s.prompt_tokens));
  generation_tokens_.observe(static_cast<double>(s.generation_tokens));
  params_n_.observe(s.n);
  if (s.max_tokens_param > 0) params_max_tokens_.observe(static_cast<double>(s.max_tokens_param));
}

void ServerMetrics::count_rejected(const std::string& reason) {
  for (auto& [r, n] : rejected_)
    if (r == reason) {
      ++n;
      return;
    }
  rejected_.emplace_back(reason, 1);
}

namespace {

class Writer {
 public:
  explicit Writer(const std::string& model)
      : base_("model_name=\"" + prom_escape(model) + "\",engine=\"0\"") {}

  void header(const std::string& name, const char* type, const std::string& help) {
    os_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  void sample(const std::string& name, double v, const std::string& extra = "") {
    os_ << name << "{" << base_ << (extra.empty() ? "" : ",") << extra << "} " << prom_number(v)
        << "\n";
  }
  void gauge(const std::string& name, const std::string& help, double v) {
    header(name, "gauge", help);
    sample(name, v);
  }
  void counter(const std::string& name, const std::string& help, double v) {
    header(name + "_total", "counter", help);
    sample(name + "_total", v);
  }
  void histogram(const std::string& name, const std::string& help, const Histogram& h) {
    header(name, "histogram", help);
    const auto& b = h.upper_bounds();
    for (size_t i = 0; i <= b.size(); ++i) {
      std::string le = i < b.size() ? prom_number(b[i]) : "+Inf";
      sample(name + "_bucket", static_cast<double>(h.cumulative(i)), "le=\"" + le + "\"");
    }
    sample(name + "_count", static_cast<double>(h.count()));
    sample(name + "_sum", h.sum());
  }
  std::string str() const { return os_.str(); }

 private:
  std::string base_;
  std::ostringstream os_;
};

}  // namespace

std::string ServerMetrics::render(const engine::EngineStats& s, const ServerGauges& g) const {
  Writer w(model_name_);
  w.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
          static_cast<double>(s.num_running));
  w.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
          static_cast<double>(s.num_waiting));
  w.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
          s.kv_cache_usage);
  w.counter("vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            static_cast<double>(s.prefix_cache_queries));
  w.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
            static_cast<double>(s.prefix_cache_hits));
  w.counter("vllm:external_prefix_cache_queries",
            "External prefix cache queries from KV connector cross-instance cache sharing, in "
            "terms of number of queried tokens (Strata: lookups in its RAM and disk KV tiers of "
            "the tokens the pool missed).",
            static_cast<double>(s.external_prefix_cache_queries));
  w.counter("vllm:external_prefix_cache_hits",
            "External prefix cache hits from KV connector cross-instance cache sharing, in terms "
            "of number of cached tokens (Strata: tokens loaded from its KV tiers).",
            static_cast<double>(s.external_prefix_cache_hits));
  if (s.speculative) {
    w.counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
              static_cast<double>(s.spec_num_drafts));
    w.counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
              static_cast<double>(s.spec_num_draft_tokens));
    w.counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
              static_cast<double>(s.spec_num_accepted_tokens));
    w.header("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
             "Accepted tokens per draft position.");
    for (size_t i = 0; i < s.spec_accepted_per_pos.size(); ++i)
      w.sample("vllm:spec_decode_num_accepted_tokens_per_pos_total",
               static_cast<double>(s.spec_accepted_per_pos[i]),
               "position=\"" + std::to_string(i) + "\"");
  }
  w.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
            static_cast<double>(s.num_preemptions));
  w.counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
            static_cast<double>(s.prompt_tokens));
  w.counter("vllm:generation_tokens", "Number of generation tokens processed.",
            static_cast<double>(s.generation_tokens));
  w.header("vllm:request_success_total", "counter", "Count of successfully processed requests.");
  w.sample("vllm:request_success_total", static_cast<double>(s.requests_finished_stop),
           "finished_reason=\"stop\"");
  w.sample("vllm:request_success_total", static_cast<double>(s.requests_finished_length),
           "finished_reason=\"length\"");
  w.sample("vllm:request_success_total", static_cast<double>(s.requests_finished_abort),
           "finished_reason=\"abort\"");
  w.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", prompt_tokens_);
  w.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
              generation_tokens_);
  w.histogram("vllm:request_params_n", "Histogram of the n request parameter.", params_n_);
  w.histogram("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
              params_max_tokens_);
  w.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
              ttft_);
  w.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
              itl_);
  w.histogram("vllm:request_time_per_output_token_seconds",
              "Histogram of time_per_output_token_seconds per request.", tpot_);
  w.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
              e2e_);
  w.histogram("vllm:request_queue_time_seconds",
              "Histogram of time spent in WAITING phase for request.", queue_);
  w.histogram("vllm:request_inference_time_seconds",
              "Histogram of time spent in RUNNING phase for request.", inference_);
  w.histogram("vllm:request_prefill_time_seconds",
              "Histogram of time spent in PREFILL phase for request.", prefill_);
  w.histogram("vllm:request_decode_time_seconds",
              "Histogram of time spent in DECODE phase for request.", decode_);

  // Strata's own series.
  w.header("strata:kv_cache_blocks", "gauge",
           "KV cache blocks by state: referenced (held by running requests), cached_free (free "
           "but still holding a reusable prefix; evicted least recently used first) and free.");
  w.sample("strata:kv_cache_blocks", static_cast<double>(s.kv_blocks_referenced),
           "state=\"referenced\"");
  w.sample("strata:kv_cache_blocks", static_cast<double>(s.kv_blocks_cached_free),
           "state=\"cached_free\"");
  w.sample("strata:kv_cache_blocks", static_cast<double>(s.kv_blocks_free), "state=\"free\"");
  w.gauge("strata:kv_cache_blocks_total", "KV cache blocks in the pool.",
          static_cast<double>(s.kv_blocks_total));
  if (s.has_kv_tiers) {
    const std::pair<const char*, const engine::EngineStats::Tier*> tiers[] = {
        {"cpu", &s.cpu_tier}, {"disk", &s.disk_tier}};
    auto per_tier = [&](const char* name, const char* type, const char* help, auto value) {
      w.header(name, type, help);
      for (const auto& [label, t] : tiers)
        if (t->present)
          w.sample(name, static_cast<double>(value(*t)), std::string("tier=\"") + label + "\"");
    };
    per_tier("strata:kv_tier_blocks", "gauge", "KV blocks held by each tier under the pool.",
             [](const auto& t) { return t.blocks; });
    per_tier("strata:kv_tier_capacity_blocks", "gauge", "KV blocks each tier can hold.",
             [](const auto& t) { return t.capacity_blocks; });
    per_tier("strata:kv_tier_usage_perc", "gauge", "KV tier usage. 1 means 100 percent usage.",
             [](const auto& t) { return t.usage(); });
    per_tier("strata:kv_tier_hits_total", "counter",
             "KV blocks loaded from each tier into the pool instead of recomputed.",
             [](const auto& t) { return t.hits; });
    per_tier("strata:kv_tier_stores_total", "counter", "KV blocks written into each tier.",
             [](const auto& t) { return t.stores; });
    w.header("strata:kv_tier_bytes_total", "counter",
             "Bytes moved into (direction=in) and out of (direction=out) each KV tier.");
    for (const auto& [label, t] : tiers) {
      if (!t->present) continue;
      w.sample("strata:kv_tier_bytes_total", static_cast<double>(t->bytes_in),
               std::string("tier=\"") + label + "\",direction=\"in\"");
      w.sample("strata:kv_tier_bytes_total", static_cast<double>(t->bytes_out),
               std::string("tier=\"") + label + "\",direction=\"out\"");
    }
    w.header("strata:kv_tier_load_failures_total", "counter",
             "KV tier loads that failed and were recomputed, by reason.");
    w.sample("strata:kv_tier_load_failures_total", static_cast<double>(s.kv_tier_load_missing),
             "reason=\"missing\"");
    w.sample("strata:kv_tier_load_failures_total", static_cast<double>(s.kv_tier_load_corrupt),
             "reason=\"corrupt\"");
    w.sample("strata:kv_tier_load_failures_total", static_cast<double>(s.kv_tier_load_io_errors),
             "reason=\"io_error\"");
    w.counter("strata:kv_tier_stores_dropped",
              "KV blocks not stored because every RAM slot was busy.",
              static_cast<double>(s.kv_tier_stores_dropped));
    w.counter("strata:kv_tier_disk_write_failures",
              "KV block files that could not be written (disk full, I/O error).",
              static_cast<double>(s.kv_tier_disk_write_failures));
  }
  w.counter("strata:engine_steps", "Engine steps run (one batched forward each).",
            static_cast<double>(s.num_steps));
  w.gauge("strata:http_connections", "Open HTTP connections.",
          static_cast<double>(g.http_connections));
  w.gauge("strata:http_requests_in_flight", "HTTP requests being answered.",
          static_cast<double>(g.requests_in_flight));
  w.counter("strata:http_connections_rejected",
            "Connections turned away with 503 because --max-connections were open.",
            static_cast<double>(g.connections_rejected));
  w.gauge("strata:http_write_buffer_bytes",
          "Response bytes queued in the server for clients to read, all connections together.",
          static_cast<double>(g.write_buffer_bytes));
  w.gauge("strata:streams_paused",
          "Streaming requests paused because their client reads slower than they generate "
          "(--stream-buffer-size).",
          static_cast<double>(g.streams_paused));
  w.counter("strata:streams_stalled",
            "Streaming requests aborted because their client read nothing for "
            "--stream-stall-timeout seconds.",
            static_cast<double>(streams_stalled_));
  w.header("strata:requests_rejected_total", "counter",
           "Requests refused before reaching the engine, by reason (queue_full: "
           "--max-queued-requests; shutting_down).");
  bool any = false;
  for (const auto& [reason, n] : rejected_) {
    w.sample("strata:requests_rejected_total", static_cast<double>(n),
             "reason=\"" + prom_escape(reason) + "\"");
    any |= reason == "queue_full";
  }
  if (!any) w.sample("strata:requests_rejected_total", 0, "reason=\"queue_full\"");
  return w.str();
}

}  // namespace strata::server
