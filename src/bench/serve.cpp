#include "bench/serve.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "bench/metrics.h"
#include "bench/progress.h"
#include "bench/report.h"
#include "bench/runner.h"
#include "bench/tokenizer_factory.h"
#include "core/clock.h"
#include "core/file_util.h"
#include "core/json.h"
#include "net/blocking_http.h"

namespace strata::bench {

namespace {

struct Context {
  const ServeBenchConfig& c;
  FILE* out;
  net::Url api_url;
  std::string model_id;    // reported / used for file names
  std::string model_name;  // sent in requests
  std::unique_ptr<PromptTokenizer> tokenizer;
  std::string tokenizer_id;
  bool sweep = false;
};

void say(FILE* out, const std::string& s) {
  fputs(s.c_str(), out);
  fputc('\n', out);
  fflush(out);
}

Result<std::pair<std::string, std::string>> first_model(const std::string& base_url,
                                                        const ServeBenchConfig& c) {
  std::string url = net::join_url(base_url, "/v1/models");
  STRATA_ASSIGN_OR_RETURN(net::Url u, net::parse_url(url));
  net::ClientRequest r;
  r.url = u;
  r.timeout_s = 60;
  for (const auto& [k, v] : c.headers) r.headers.add(k, v);
  auto resp = net::http_fetch(r);
  std::string hint = ". Check that the server is running and the URL is right, or pass --model.";
  if (!resp.ok())
    return unavailable("cannot list models at " + url + ": " + resp.status().message() + hint);
  if (resp->status != 200) {
    return unavailable("listing models at " + url + " answered HTTP " +
                       std::to_string(resp->status) + ": " + resp->body.substr(0, 300) + hint);
  }
  auto j = parse_json(resp->body, url);
  if (!j.ok()) return j.status();
  if (!j->contains("data") || !(*j)["data"].is_array() || (*j)["data"].empty() ||
      !(*j)["data"][0].contains("id")) {
    return not_found("no models found on the server at " + base_url +
                     "; make sure it has a model loaded, or pass --model");
  }
  const Json& m = (*j)["data"][0];
  std::string id = m["id"].get<std::string>();
  std::string root =
      m.contains("root") && m["root"].is_string() ? m["root"].get<std::string>() : id;
  return std::make_pair(id, root);
}

// The server's speculative-decoding counters (vLLM's vllm:spec_decode_* series), summed over
// labels; empty when the server has none (or no /metrics).
struct SpecCounters {
  double drafts = 0, draft_tokens = 0, accepted = 0;
  std::vector<double> per_pos;
};

std::optional<SpecCounters> scrape_spec_counters(const std::string& base_url,
                                                 const ServeBenchConfig& c) {
  auto u = net::parse_url(net::join_url(base_url, "/metrics"));
  if (!u.ok()) return std::nullopt;
  net::ClientRequest r;
  r.url = *u;
  r.timeout_s = 30;
  for (const auto& [k, v] : c.headers) r.headers.add(k, v);
  auto resp = net::http_fetch(r);
  if (!resp.ok() || resp->status != 200) return std::nullopt;
  SpecCounters out;
  bool any = false;
  std::istringstream in(resp->body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    const double v = std::strtod(line.c_str() + sp + 1, nullptr);
    auto is = [&](const char* name) { return line.rfind(name, 0) == 0; };
    if (is("vllm:spec_decode_num_drafts_total")) {
      out.drafts += v;
      any = true;
    } else if (is("vllm:spec_decode_num_draft_tokens_total")) {
      out.draft_tokens += v;
    } else if (is("vllm:spec_decode_num_accepted_tokens_per_pos_total")) {
      const size_t p = line.find("position=\"");
      if (p == std::string::npos) continue;
      const size_t pos = std::strtoul(line.c_str() + p + 10, nullptr, 10);
      if (pos >= 64) continue;
      if (out.per_pos.size() <= pos) out.per_pos.resize(pos + 1);
      out.per_pos[pos] += v;
    } else if (is("vllm:spec_decode_num_accepted_tokens_total")) {
      out.accepted += v;
    }
  }
  if (!any) return std::nullopt;
  return out;
}

// vLLM's "Speculative Decoding" block of the result, from the counters' change over the run.
std::string format_spec_block(const SpecCounters& a, const SpecCounters& b) {
  const double drafts = b.drafts - a.drafts, tokens = b.draft_tokens - a.draft_tokens,
               accepted = b.accepted - a.accepted;
  std::ostringstream os;
  char buf[160];
  os << "---------------Speculative Decoding---------------\n";  // after vLLM's result
  auto row = [&](const char* label, double v, const char* fmt) {
    std::snprintf(buf, sizeof(buf), fmt, label, v);
    os << buf << "\n";
  };
  row("Acceptance rate (%):", tokens > 0 ? accepted / tokens * 100 : 0, "%-40s%-10.2f");
  row("Acceptance length:", drafts > 0 ? 1 + accepted / drafts : 0, "%-40s%-10.2f");
  row("Drafts:", drafts, "%-40s%-10.0f");
  row("Draft tokens:", tokens, "%-40s%-10.0f");
  row("Accepted tokens:", accepted, "%-40s%-10.0f");
  os << "Per-position acceptance (%):\n";
  for (size_t i = 0; i < b.per_pos.size(); ++i) {
    const double before = i < a.per_pos.size() ? a.per_pos[i] : 0;
    char label[32];
    std::snprintf(label, sizeof(label), "  Position %zu:", i);
    row(label, drafts > 0 ? (b.per_pos[i] - before) / drafts * 100 : 0, "%-40s%-10.2f");
  }
  return os.str();
}

std::string now_date() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return buf;
}

Result<Dataset> make_dataset(Context& ctx, int64_t input_len, int64_t output_len) {
  const auto& c = ctx.c;
  if (c.dataset_name == "random") {
    RandomDatasetOptions o;
    o.num_prompts = c.num_prompts;
    o.input_len = input_len;
    o.output_len = output_len;
    o.range_ratio = c.range_ratio;
    o.prefix_len = c.prefix_len;
    o.seed = c.seed;
    return sample_random(*ctx.tokenizer, o);
  }
  if (c.dataset_name == "sharegpt") {
    ShareGptOptions o;
    o.path = c.dataset_path;
    o.num_prompts = c.num_prompts;
    o.output_len = c.sharegpt_output_len;
    o.seed = c.seed;
    o.no_oversample = c.no_oversample;
    return sample_sharegpt(*ctx.tokenizer, o);
  }
  return sample_prefix_repetition(*ctx.tokenizer, c.prefix_repetition);
}

// Fills output_tokens for successful requests whose server sent no usage, by re-tokenizing.
Status count_missing_output_tokens(Context& ctx, std::vector<RequestOutput>* outputs) {
  std::vector<size_t> idx;
  std::vector<std::string> texts;
  for (size_t i = 0; i < outputs->size(); ++i) {
    auto& o = (*outputs)[i];
    if (o.success && !o.output_tokens_from_usage) {
      idx.push_back(i);
      texts.push_back(o.generated_text);
    }
  }
  if (idx.empty()) return ok_status();
  auto ids = ctx.tokenizer->encode(texts);
  if (!ids.ok())
    return ids.status().with_context("counting output tokens (no usage in the stream)");
  for (size_t k = 0; k < idx.size(); ++k) {
    (*outputs)[idx[k]].output_tokens = static_cast<int64_t>((*ids)[k].size());
  }
  return ok_status();
}

std::string point_suffix(const Context& ctx, std::optional<int64_t> conc, int64_t in, int64_t out) {
  std::string s = "-c" + (conc ? std::to_string(*conc) : std::string("inf"));
  if (ctx.c.dataset_name == "random")
    s += "-in" + std::to_string(in) + "-out" + std::to_string(out);
  return s;
}

Status write_text(const std::string& path, const std::string& text, bool append) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return unavailable("cannot create directory " + parent.string() + ": " + ec.message());
  std::ofstream f(path, append ? std::ios::app : std::ios::trunc);
  if (!f) return unavailable("cannot write " + path);
  if (append && std::filesystem::exists(path) && std::filesystem::file_size(path, ec) > 0)
    f << "\n";
  f << text;
  f.close();
  if (!f) return unavailable("failed writing " + path);
  return ok_status();
}

RunnerOptions runner_options(const Context& ctx, std::optional<int64_t> conc) {
  RunnerOptions r;
  r.api_url = ctx.api_url;
  r.backend = ctx.c.backend;
  r.headers = ctx.c.headers;
  r.request_rate = ctx.c.request_rate;
  r.burstiness = ctx.c.burstiness;
  r.max_concurrency = conc.value_or(0);
  r.request_timeout_s = ctx.c.request_timeout_s;
  r.seed = ctx.c.seed;
  return r;
}

struct PointResult {
  SweepRow row;
  bool any_success = false;
};

Result<PointResult> run_point(Context& ctx, const Dataset& ds,
                              const std::vector<std::string>& payloads, std::optional<int64_t> conc,
                              int64_t input_len, int64_t output_len) {
  const auto& c = ctx.c;
  FILE* out = ctx.out;
  std::vector<int64_t> prompt_lens;
  for (const auto& r : ds.requests) prompt_lens.push_back(r.prompt_len);

  if (c.ready_check_timeout_s > 0) {
    say(out, "Starting initial single prompt test run...");
    RunnerOptions ro = runner_options(ctx, std::nullopt);
    ro.request_rate = std::numeric_limits<double>::infinity();
    double deadline = now_seconds() + c.ready_check_timeout_s;
    std::string last_error;
    while (true) {
      auto r = run_requests(ro, {payloads[0]}, {prompt_lens[0]}, nullptr);
      if (!r.ok()) return r.status();
      if (r->outputs[0].success) break;
      last_error = r->outputs[0].error;
      if (now_seconds() >= deadline) {
        return unavailable(
            "Initial test run failed - check the benchmark arguments and that the "
            "server is up. Error: " +
            last_error);
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    say(out, "Initial test run completed.");
  } else {
    say(out, "Skipping endpoint ready check.");
  }
  if (c.num_warmups > 0) {
    say(out, "Warming up with " + std::to_string(c.num_warmups) + " requests...");
    RunnerOptions ro = runner_options(ctx, conc);
    ro.request_rate = std::numeric_limits<double>::infinity();
    std::vector<std::string> wp(static_cast<size_t>(c.num_warmups), payloads[0]);
    std::vector<int64_t> wl(static_cast<size_t>(c.num_warmups), prompt_lens[0]);
    auto r = run_requests(ro, wp, wl, nullptr);
    if (!r.ok()) return r.status();
    say(out, "Warmup run completed.");
  }
  say(out, "Starting main benchmark run...");
  say(out, "Traffic request rate: " + py_float(c.request_rate));
  say(out, "Burstiness factor: " + py_float(c.burstiness) + " (" +
               (c.burstiness == 1.0 ? "Poisson process" : "Gamma distribution") + ")");
  say(out, "Maximum request concurrency: " + (conc ? std::to_string(*conc) : std::string("None")));

  const auto spec_before = scrape_spec_counters(c.base_url, c);
  Progress progress(choose_progress_mode(out, c.disable_progress),
                    static_cast<int64_t>(payloads.size()), out, c.progress_interval_s);
  auto run = run_requests(runner_options(ctx, conc), payloads, prompt_lens, &progress);
  if (!run.ok()) return run.status();
  Status counted = count_missing_output_tokens(ctx, &run->outputs);
  if (!counted.ok()) say(out, "WARNING: " + counted.message());

  BenchmarkMetrics m = compute_metrics(run->outputs, run->duration_s, c.percentiles, c.goodput);
  if (m.completed == 0) {
    say(out,
        "WARNING: All requests failed. This is likely due to a misconfiguration of the "
        "benchmark arguments or an unreachable server.");
  }
  fputs(format_failures(run->outputs).c_str(), out);
  BlockOptions bo;
  bo.max_concurrency = conc;
  bo.request_rate = c.request_rate;
  bo.duration_s = run->duration_s;
  bo.goodput = !c.goodput.empty();
  bo.percentile_metrics = c.percentile_metrics;
  bo.percentiles = c.percentiles;
  fputs(format_result_block(m, run->outputs, bo).c_str(), out);
  if (spec_before) {
    if (auto spec_after = scrape_spec_counters(c.base_url, c))
      fputs(format_spec_block(*spec_before, *spec_after).c_str(), out);
  }
  fflush(out);

  if (c.save_result || c.append_result) {
    ResultMeta meta;
    meta.date = now_date();
    meta.backend = c.backend_name;
    meta.label = c.label;
    meta.model_id = ctx.model_id;
    meta.tokenizer_id = ctx.tokenizer_id;
    meta.num_prompts = c.num_prompts;
    meta.request_rate = c.request_rate;
    meta.burstiness = c.burstiness;
    meta.max_concurrency = conc;
    meta.dataset_name = c.dataset_name;
    if (c.dataset_name == "random") {
      meta.random_input_len = input_len;
      meta.random_output_len = output_len;
    }
    meta.metadata = c.metadata;
    std::string name =
        c.result_filename.empty() ? default_result_filename(meta) : c.result_filename;
    bool length_sweep = c.input_lens.size() > 1 || c.output_lens.size() > 1;
    if (ctx.sweep && (!c.result_filename.empty() || length_sweep)) {
      // Each sweep point gets its own file.
      std::string stem = name.size() > 5 && name.substr(name.size() - 5) == ".json"
                             ? name.substr(0, name.size() - 5)
                             : name;
      name = stem + point_suffix(ctx, conc, input_len, output_len) + ".json";
    }
    std::string path = c.result_dir.empty() ? name : path_join(c.result_dir, name);
    std::string json = build_result_json(meta, m, run->outputs, bo, c.save_detailed);
    Status s = write_text(path, json, c.append_result);
    if (!s.ok()) return s;
    say(out, "Saved the result to " + path);
  }
  PointResult pr;
  pr.row = make_sweep_row(
      m, run->outputs, run->duration_s, conc,
      c.dataset_name == "random" ? std::optional<int64_t>(input_len) : std::nullopt,
      c.dataset_name == "random" ? std::optional<int64_t>(output_len) : std::nullopt);
  pr.any_success = m.completed > 0;
  return pr;
}

}  // namespace

int run_serve_bench(const ServeBenchConfig& c, FILE* out) {
  auto fail = [&](const Status& s) {
    fprintf(stderr, "strata bench serve: %s\n", s.message().c_str());
    return 1;
  };
  auto api = net::parse_url(net::join_url(c.base_url, c.endpoint));
  if (!api.ok()) return fail(api.status());
  Context ctx{
      c,       out, *api, c.model, c.served_model_name.empty() ? c.model : c.served_model_name,
      nullptr, "",  false};
  if (ctx.model_id.empty()) {
    say(out, "Model not specified, fetching first model from server...");
    auto m = first_model(c.base_url, c);
    if (!m.ok()) return fail(m.status());
    ctx.model_id = m->first;
    if (ctx.model_name.empty()) ctx.model_name = m->first;
    say(out, "First model name: " + m->first + ", first model id: " + m->second);
  }
  if (!c.temperature_set) {
    say(out,
        "WARNING: no --temperature given: the server's default sampling applies. Pass "
        "--temperature 0 for greedy decoding.");
  }
  auto tok = make_prompt_tokenizer(c, ctx.model_name);
  if (!tok.ok()) return fail(tok.status());
  ctx.tokenizer = std::move(tok).value();
  ctx.tokenizer_id = c.tokenizer_path.empty() ? ctx.model_id : c.tokenizer_path;

  std::vector<int64_t> in_lens =
      c.dataset_name == "random" ? c.input_lens : std::vector<int64_t>{0};
  std::vector<int64_t> out_lens =
      c.dataset_name == "random" ? c.output_lens : std::vector<int64_t>{0};
  size_t points = in_lens.size() * out_lens.size() * c.concurrencies.size();
  ctx.sweep = points > 1;
  std::vector<SweepRow> rows;
  bool any_success = false;
  for (int64_t in : in_lens) {
    for (int64_t outl : out_lens) {
      auto ds = make_dataset(ctx, in, outl);
      if (!ds.ok()) return fail(ds.status());
      for (const auto& note : ds->notes) say(out, "WARNING: " + note);
      PayloadOptions po;
      po.model = ctx.model_name;
      po.ignore_eos = c.ignore_eos;
      po.logprobs = c.logprobs;
      po.extra_body_json = c.extra_body_json;
      auto payloads = build_payloads(c.backend, po, ds->requests);
      if (!payloads.ok()) return fail(payloads.status());
      for (const auto& conc : c.concurrencies) {
        if (ctx.sweep) {
          std::string what = "Sweep point " + std::to_string(rows.size() + 1) + "/" +
                             std::to_string(points) + ": max concurrency " +
                             (conc ? std::to_string(*conc) : std::string("unlimited"));
          if (c.dataset_name == "random") {
            what += ", input len " + std::to_string(in) + ", output len " + std::to_string(outl);
          }
          say(out, "\n" + what);
        }
        auto pr = run_point(ctx, *ds, *payloads, conc, in, outl);
        if (!pr.ok()) return fail(pr.status());
        rows.push_back(pr->row);
        any_success = any_success || pr->any_success;
      }
    }
  }
  if (ctx.sweep) {
    say(out, "\n" + center(" Sweep Summary ", 50, '='));
    fputs(format_sweep_table(rows).c_str(), out);
    if (c.save_result || c.append_result) {
      std::string base =
          c.result_filename.empty()
              ? (c.label.empty() ? c.backend_name : c.label) + "-sweep-" +
                    ctx.model_id.substr(ctx.model_id.rfind('/') + 1) + "-" + now_date()
              : c.result_filename.substr(0, c.result_filename.rfind(".json")) + "-sweep";
      std::string stem = c.result_dir.empty() ? base : path_join(c.result_dir, base);
      Status a = write_text(stem + ".json", sweep_json(rows), false);
      if (!a.ok()) return fail(a);
      std::string title = "strata bench serve: " + ctx.model_id + " (" + c.dataset_name + ", " +
                          std::to_string(c.num_prompts) + " prompts)";
      Status b = write_text(stem + ".svg", render_sweep_svg(rows, title), false);
      if (!b.ok()) return fail(b);
      say(out, "Saved the sweep summary to " + stem + ".json and the chart to " + stem + ".svg");
    } else {
      say(out, "(add --save-result to write the results, the sweep summary JSON and an SVG chart)");
    }
  }
  return any_success ? 0 : 1;
}

}  // namespace strata::bench
