#include "bench/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "core/json.h"

namespace strata::bench {

std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  if (exp < -4 || exp >= 16) return sci;
  bool neg = !mant.empty() && mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp >= 0) {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() < int_len) digits.append(int_len - digits.size(), '0');
    out = digits.substr(0, int_len) + "." +
          (digits.size() > int_len ? digits.substr(int_len) : std::string("0"));
  } else {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  }
  return neg ? "-" + out : out;
}

std::string center(const std::string& s, size_t width, char fill) {
  if (s.size() >= width) return s;
  size_t pad = width - s.size();
  size_t left = pad / 2;
  return std::string(left, fill) + s + std::string(pad - left, fill);
}

std::string percentile_key(double p) {
  std::string key = "p";
  key += p == std::floor(p) ? std::to_string(static_cast<int64_t>(p)) : py_float(p);
  return key;
}

namespace {

std::string pad_right(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string fixed2(double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

// "{:<40} {:<10}"
std::string row(const std::string& label, const std::string& value) {
  return pad_right(label, 40) + " " + pad_right(value, 10) + "\n";
}

struct MetricDef {
  const char* key;
  const char* name;
  const char* header;
};
constexpr MetricDef kMetricDefs[] = {
    {"ttft", "TTFT", "Time to First Token"},
    {"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
    {"itl", "ITL", "Inter-token Latency"},
    {"e2el", "E2EL", "End-to-end Latency"},
    {"client_queue_time", "Client Queue Time", "Client-side Queueing"},
    {"e2el_including_client_queue", "E2EL incl. Client Queue",
     "Queue-inclusive End-to-end Latency"},
};

bool selected(const BlockOptions& o, const std::string& key) {
  return std::find(o.percentile_metrics.begin(), o.percentile_metrics.end(), key) !=
         o.percentile_metrics.end();
}

// The summary for one metric key (queue metrics are computed from the outputs).
MetricSummary summary_for(const std::string& key, const BenchmarkMetrics& m,
                          const std::vector<RequestOutput>& outputs, const BlockOptions& o) {
  if (key == "ttft") return m.ttft;
  if (key == "tpot") return m.tpot;
  if (key == "itl") return m.itl;
  if (key == "e2el") return m.e2el;
  std::vector<double> values;
  for (const auto& out : outputs) {
    if (!out.success) continue;
    values.push_back(key == "client_queue_time" ? out.queue_time : out.latency + out.queue_time);
  }
  return summarize_ms(values, o.percentiles);
}

}  // namespace

std::string format_failures(const std::vector<RequestOutput>& outputs) {
  std::string s;
  int shown = 0;
  for (const auto& o : outputs) {
    if (o.success) continue;
    if (shown == 0) s += "Failed requests during benchmark run detected (capping to 10):\n";
    if (shown == 10) break;
    s += "Error " + std::to_string(shown++) + ": " + o.error + "\n";
  }
  return s;
}

std::string format_result_block(const BenchmarkMetrics& m,
                                const std::vector<RequestOutput>& outputs, const BlockOptions& o) {
  std::string s = center(" Serving Benchmark Result ", 50, '=') + "\n";
  s += row("Successful requests:", std::to_string(m.completed));
  s += row("Failed requests:", std::to_string(m.failed));
  if (o.max_concurrency)
    s += row("Maximum request concurrency:", std::to_string(*o.max_concurrency));
  if (!std::isinf(o.request_rate))
    s += row("Request rate configured (RPS):", fixed2(o.request_rate));
  s += row("Benchmark duration (s):", fixed2(o.duration_s));
  s += row("Total input tokens:", std::to_string(m.total_input));
  s += row("Total generated tokens:", std::to_string(m.total_output));
  s += row("Request throughput (req/s):", fixed2(m.request_throughput));
  if (o.goodput) s += row("Request goodput (req/s):", fixed2(m.request_goodput));
  s += row("Output token throughput (tok/s):", fixed2(m.output_throughput));
  s += row("Peak output token throughput (tok/s):", fixed2(m.max_output_tokens_per_s));
  s += row("Peak concurrent requests:", fixed2(static_cast<double>(m.max_concurrent_requests)));
  s += row("Total token throughput (tok/s):", fixed2(m.total_token_throughput));
  for (const auto& d : kMetricDefs) {
    if (!selected(o, d.key)) continue;
    if ((std::string(d.key) == "client_queue_time" ||
         std::string(d.key) == "e2el_including_client_queue") &&
        !o.max_concurrency) {
      continue;  // vLLM reports client queueing only under --max-concurrency
    }
    MetricSummary sum = summary_for(d.key, m, outputs, o);
    s += center(d.header, 50, '-') + "\n";
    s += row(std::string("Mean ") + d.name + " (ms):", fixed2(sum.mean_ms));
    s += row(std::string("Median ") + d.name + " (ms):", fixed2(sum.median_ms));
    for (const auto& [p, v] : sum.percentiles_ms) {
      std::string label = percentile_key(p);
      label[0] = 'P';
      label += ' ';
      label += d.name;
      label += " (ms):";
      s += row(label, fixed2(v));
    }
  }
  s += std::string(50, '=') + "\n";
  return s;
}

std::string build_result_json(const ResultMeta& meta, const BenchmarkMetrics& m,
                              const std::vector<RequestOutput>& outputs, const BlockOptions& o,
                              bool detailed) {
  OrderedJson j;
  j["date"] = meta.date;
  j["endpoint_type"] = meta.backend;
  j["backend"] = meta.backend;
  j["label"] = meta.label.empty() ? OrderedJson(nullptr) : OrderedJson(meta.label);
  j["model_id"] = meta.model_id;
  j["tokenizer_id"] = meta.tokenizer_id;
  j["num_prompts"] = meta.num_prompts;
  for (const auto& [k, v] : meta.metadata) j[k] = v;
  if (std::isinf(meta.request_rate))
    j["request_rate"] = "inf";
  else
    j["request_rate"] = meta.request_rate;
  j["burstiness"] = meta.burstiness;
  j["max_concurrency"] =
      meta.max_concurrency ? OrderedJson(*meta.max_concurrency) : OrderedJson(nullptr);
  j["dataset_name"] = meta.dataset_name;
  if (meta.random_input_len) j["random_input_len"] = *meta.random_input_len;
  if (meta.random_output_len) j["random_output_len"] = *meta.random_output_len;
  j["duration"] = o.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = o.goodput ? OrderedJson(m.request_goodput) : OrderedJson(nullptr);
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  if (detailed) {
    OrderedJson input_lens = OrderedJson::array(), ttfts = OrderedJson::array(),
                itls = OrderedJson::array(), latencies = OrderedJson::array(),
                starts = OrderedJson::array(), queue = OrderedJson::array(),
                texts = OrderedJson::array(), errors = OrderedJson::array();
    double t0 = 0;
    bool first = true;
    for (const auto& out : outputs) {
      if (first || out.start_time < t0) t0 = out.start_time;
      first = false;
    }
    for (const auto& out : outputs) {
      input_lens.push_back(out.prompt_len);
      ttfts.push_back(out.ttft);
      itls.push_back(out.itl);
      latencies.push_back(out.latency);
      starts.push_back(out.start_time - t0);
      queue.push_back(out.queue_time);
      texts.push_back(out.generated_text);
      errors.push_back(out.error);
    }
    j["input_lens"] = input_lens;
    j["output_lens"] = m.output_lens;
    j["ttfts"] = ttfts;
    j["itls"] = itls;
    j["latencies"] = latencies;
    j["start_times"] = starts;
    j["queue_times"] = queue;
    j["generated_texts"] = texts;
    j["errors"] = errors;
  }
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  for (const auto& d : kMetricDefs) {
    if (!selected(o, d.key)) continue;
    std::string k = d.key;
    if ((k == "client_queue_time" || k == "e2el_including_client_queue") && !o.max_concurrency) {
      continue;
    }
    MetricSummary sum = summary_for(d.key, m, outputs, o);
    j["mean_" + k + "_ms"] = sum.mean_ms;
    j["median_" + k + "_ms"] = sum.median_ms;
    j["std_" + k + "_ms"] = sum.std_ms;
    for (const auto& [p, v] : sum.percentiles_ms) j[percentile_key(p) + "_" + k + "_ms"] = v;
  }
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

std::string default_result_filename(const ResultMeta& meta) {
  std::string base_model = meta.model_id.substr(meta.model_id.rfind('/') + 1);
  std::string label = meta.label.empty() ? meta.backend : meta.label;
  std::string conc =
      meta.max_concurrency ? "-concurrency" + std::to_string(*meta.max_concurrency) : "";
  return label + "-" + py_float(meta.request_rate) + "qps" + conc + "-" + base_model + "-" +
         meta.date + ".json";
}

SweepRow make_sweep_row(const BenchmarkMetrics& m, const std::vector<RequestOutput>& outputs,
                        double duration_s, std::optional<int64_t> max_concurrency,
                        std::optional<int64_t> input_len, std::optional<int64_t> output_len) {
  SweepRow r;
  r.max_concurrency = max_concurrency;
  r.input_len = input_len;
  r.output_len = output_len;
  r.completed = m.completed;
  r.failed = m.failed;
  r.duration_s = duration_s;
  std::vector<double> ttfts, e2els;
  for (const auto& o : outputs) {
    if (!o.success) continue;
    ttfts.push_back(o.ttft);
    e2els.push_back(o.latency);
  }
  r.ttft_mean_ms = m.ttft.mean_ms;
  r.ttft_median_ms = m.ttft.median_ms;
  r.tpot_median_ms = m.tpot.median_ms;
  r.ttft_p99_ms = percentile(ttfts, 99) * 1000;
  r.tpot_mean_ms = m.tpot.mean_ms;
  r.e2el_mean_ms = m.e2el.mean_ms;
  r.e2el_p99_ms = percentile(e2els, 99) * 1000;
  double d = duration_s > 0 ? duration_s : 1e-9;
  r.input_tok_s = static_cast<double>(m.total_input) / d;
  r.output_tok_s = m.output_throughput;
  r.per_user_tok_s = m.tpot.mean_ms > 0 ? 1000.0 / m.tpot.mean_ms : 0.0;
  r.request_throughput = m.request_throughput;
  return r;
}

namespace {
std::string opt_int(const std::optional<int64_t>& v, const char* none) {
  return v ? std::to_string(*v) : std::string(none);
}
}  // namespace

std::string format_sweep_table(const std::vector<SweepRow>& rows) {
  std::vector<std::string> head = {"Concurrency",    "Input len",      "Output len",
                                   "TTFT mean (ms)", "TTFT P99 (ms)",  "Input tok/s",
                                   "Output tok/s",   "Per-user tok/s", "E2EL mean (ms)",
                                   "E2EL P99 (ms)",  "Req/s",          "Failed"};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rows) {
    cells.push_back({opt_int(r.max_concurrency, "unlimited"), opt_int(r.input_len, "-"),
                     opt_int(r.output_len, "-"), fixed2(r.ttft_mean_ms), fixed2(r.ttft_p99_ms),
                     fixed2(r.input_tok_s), fixed2(r.output_tok_s), fixed2(r.per_user_tok_s),
                     fixed2(r.e2el_mean_ms), fixed2(r.e2el_p99_ms), fixed2(r.request_throughput),
                     std::to_string(r.failed)});
  }
  std::vector<size_t> w(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto& row : cells) w[c] = std::max(w[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& v, bool left) {
    std::string s = "|";
    for (size_t c = 0; c < v.size(); ++c) {
      std::string pad(w[c] - v[c].size(), ' ');
      s += ' ';
      if (left) {
        s += v[c];
        s += pad;
      } else {
        s += pad;
        s += v[c];
      }
      s += " |";
    }
    return s + "\n";
  };
  std::string out = line(head, true);
  out += "|";
  for (size_t c = 0; c < head.size(); ++c) out += std::string(w[c] + 1, '-') + ":|";
  out += "\n";
  for (const auto& row : cells) out += line(row, false);
  return out;
}

std::string sweep_json(const std::vector<SweepRow>& rows) {
  OrderedJson arr = OrderedJson::array();
  auto opt = [](const std::optional<int64_t>& v) {
    return v ? OrderedJson(*v) : OrderedJson(nullptr);
  };
  for (const auto& r : rows) {
    OrderedJson j;
    j["max_concurrency"] = opt(r.max_concurrency);
    j["random_input_len"] = opt(r.input_len);
    j["random_output_len"] = opt(r.output_len);
    j["completed"] = r.completed;
    j["failed"] = r.failed;
    j["duration"] = r.duration_s;
    j["mean_ttft_ms"] = r.ttft_mean_ms;
    j["median_ttft_ms"] = r.ttft_median_ms;
    j["p99_ttft_ms"] = r.ttft_p99_ms;
    j["mean_tpot_ms"] = r.tpot_mean_ms;
    j["median_tpot_ms"] = r.tpot_median_ms;
    j["mean_e2el_ms"] = r.e2el_mean_ms;
    j["p99_e2el_ms"] = r.e2el_p99_ms;
    j["input_throughput"] = r.input_tok_s;
    j["output_throughput"] = r.output_tok_s;
    j["per_user_output_throughput"] = r.per_user_tok_s;
    j["request_throughput"] = r.request_throughput;
    arr.push_back(j);
  }
  return arr.dump(2);
}

}  // namespace strata::bench
