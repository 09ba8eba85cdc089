// Option declarations and parsing for `strata bench serve` (vLLM's names and defaults).
#include <algorithm>
#include <cmath>
#include <limits>

#include "bench/serve.h"
#include "core/json.h"
#include "core/strings.h"

namespace strata::bench {

namespace {

constexpr const char* kEndpoint = "Endpoint";
constexpr const char* kDataset = "Dataset";
constexpr const char* kTraffic = "Traffic";
constexpr const char* kSampling = "Sampling parameters (sent only when given)";
constexpr const char* kResults = "Results";

void add(OptionSet& o, const std::string& name, OptionKind kind, const std::string& def,
         const std::string& help, const char* group, const std::string& metavar = "",
         bool repeated = false) {
  o.add({.name = name,
         .kind = kind,
         .default_value = def,
         .help = help,
         .group = group,
         .repeated = repeated,
         .metavar = metavar});
}

// "inf" or a positive number.
Result<double> parse_rate(const std::string& text, const std::string& what) {
  std::string t = to_lower(trim(text));
  if (t == "inf" || t == "infinity" || t == "+inf") return std::numeric_limits<double>::infinity();
  auto v = parse_float(text, what);
  if (!v.ok())
    return invalid_argument(what + " expects a positive number or inf, got '" + text + "'");
  if (!(*v > 0)) return invalid_argument(what + " must be positive (or inf), got '" + text + "'");
  return *v;
}

Result<std::vector<int64_t>> positive_list(const std::string& text, const std::string& what,
                                           bool allow_zero) {
  auto v = parse_int_list(text);
  if (!v.ok() || v->empty()) {
    return invalid_argument(what +
                            " expects an integer or a comma-separated list (e.g. 1,4,16), "
                            "got '" +
                            text + "'");
  }
  for (int64_t x : *v) {
    if (x < 0 || (!allow_zero && x == 0)) {
      return invalid_argument(what + " values must be " +
                              (allow_zero ? "non-negative" : "positive") + ", got " +
                              std::to_string(x));
    }
  }
  return v;
}

Result<std::pair<std::string, std::string>> key_value(const std::string& item, char sep,
                                                      const std::string& what) {
  size_t pos = item.find(sep);
  if (pos == std::string::npos || pos == 0) {
    return invalid_argument(what + " expects KEY" + std::string(1, sep) + "VALUE, got '" + item +
                            "'");
  }
  return std::make_pair(std::string(trim(item.substr(0, pos))),
                        std::string(trim(item.substr(pos + 1))));
}

}  // namespace

void add_serve_bench_options(OptionSet& o) {
  using K = OptionKind;
  add(o, "backend", K::kString, "openai",
      "openai (POST /v1/completions) or openai-chat (POST /v1/chat/completions)", kEndpoint,
      "NAME");
  add(o, "base-url", K::kString, "",
      "server base URL, e.g. http://127.0.0.1:8000 (else --host/--port)", kEndpoint, "URL");
  add(o, "host", K::kString, "127.0.0.1", "server host when --base-url is not given", kEndpoint,
      "HOST");
  add(o, "port", K::kInt, "8000", "server port when --base-url is not given", kEndpoint, "PORT");
  add(o, "endpoint", K::kString, "",
      "API path (default: /v1/completions, or /v1/chat/completions "
      "for openai-chat)",
      kEndpoint, "PATH");
  add(o, "model", K::kString, "",
      "model name to request (default: the server's first model from "
      "/v1/models)",
      kEndpoint, "NAME");
  add(o, "served-model-name", K::kString, "",
      "model name sent in requests when it differs from "
      "--model",
      kEndpoint, "NAME");
  add(o, "api-key", K::kString, "",
      "sent as 'Authorization: Bearer KEY' (also read from "
      "OPENAI_API_KEY)",
      kEndpoint, "KEY");
  add(o, "header", K::kString, "", "extra request header KEY=VALUE (repeatable)", kEndpoint,
      "KEY=VALUE", true);
  add(o, "request-timeout", K::kFloat, "21600", "seconds before a request counts as failed",
      kEndpoint, "S");
  add(o, "ready-check-timeout-sec", K::kInt, "0",
      "wait up to this long for a first successful "
      "request before starting (0 skips the check)",
      kEndpoint, "S");
  add(o, "label", K::kString, "", "label (prefix) of the result file name (default: the backend)",
      kEndpoint, "TEXT");

  add(o, "dataset-name", K::kString, "random", "random, sharegpt or prefix-repetition", kDataset,
      "NAME");
  add(o, "dataset-path", K::kString, "", "dataset file (sharegpt: a ShareGPT JSON list)", kDataset,
      "FILE");
  add(o, "num-prompts", K::kInt, "1000", "number of requests per run", kDataset, "N");
  add(o, "seed", K::kInt, "0", "random seed (prompts, lengths and arrivals)", kDataset, "N");
  add(o, "input-len", K::kString, "", "shorthand for --random-input-len", kDataset, "N[,N...]");
  add(o, "output-len", K::kString, "",
      "shorthand for --random-output-len, --sharegpt-output-len "
      "and --prefix-repetition-output-len",
      kDataset, "N[,N...]");
  add(o, "random-input-len", K::kString, "1024", "prompt tokens per request; a comma list sweeps",
      kDataset, "N[,N...]");
  add(o, "random-output-len", K::kString, "128", "output tokens per request; a comma list sweeps",
      kDataset, "N[,N...]");
  add(o, "random-range-ratio", K::kFloat, "0.0",
      "sample lengths uniformly within +-ratio of the "
      "given ones, in [0, 1)",
      kDataset, "R");
  add(o, "random-prefix-len", K::kInt, "0", "random tokens shared by every prompt, before its own",
      kDataset, "N");
  add(o, "sharegpt-output-len", K::kInt, "",
      "output tokens for every ShareGPT request (default: "
      "the reply's length)",
      kDataset, "N");
  add(o, "prefix-repetition-prefix-len", K::kInt, "256", "tokens in each shared prefix", kDataset,
      "N");
  add(o, "prefix-repetition-suffix-len", K::kInt, "256", "tokens after the prefix, per prompt",
      kDataset, "N");
  add(o, "prefix-repetition-num-prefixes", K::kInt, "10", "number of distinct prefixes", kDataset,
      "N");
  add(o, "prefix-repetition-output-len", K::kInt, "128", "output tokens per request", kDataset,
      "N");
  add(o, "prefix-repetition-order", K::kString, "shuffled",
      "shuffled, or round-robin (prefix 0, 1, ..., n-1, 0, 1, ...: each prefix returns after all "
      "the others, for KV tier benchmarks)",
      kDataset, "ORDER");
  add(o, "no-oversample", K::kBool, "false",
      "do not repeat ShareGPT samples when the file has "
      "fewer usable entries than --num-prompts",
      kDataset);
  add(o, "tokenizer", K::kString, "",
      "local tokenizer (model directory or tokenizer file) for "
      "exact prompt lengths; default: the server's /tokenize",
      kDataset, "PATH");

  add(o, "request-rate", K::kString, "inf", "requests per second (inf sends all at once)", kTraffic,
      "R");
  add(o, "burstiness", K::kString, "1.0",
      "gamma shape of the arrival gaps: 1 is Poisson, < 1 "
      "burstier, > 1 more even",
      kTraffic, "B");
  add(o, "max-concurrency", K::kString, "",
      "most requests in flight at once; a comma list (e.g. "
      "1,4,16,64) runs one benchmark per value",
      kTraffic, "N[,N...]");
  add(o, "num-warmups", K::kInt, "0", "warm-up requests before the measured run", kTraffic, "N");
  add(o, "ignore-eos", K::kBool, "false",
      "ask the server to ignore EOS (always on for the random "
      "dataset)",
      kTraffic);
  add(o, "logprobs", K::kInt, "", "logprobs per token to request (completions)", kTraffic, "N");
  add(o, "extra-body", K::kString, "", "JSON object merged into every request body", kTraffic,
      "JSON");
  add(o, "temperature", K::kFloat, "", "sampling temperature", kSampling, "T");
  add(o, "top-p", K::kFloat, "", "top-p", kSampling, "P");
  add(o, "top-k", K::kInt, "", "top-k", kSampling, "K");
  add(o, "min-p", K::kFloat, "", "min-p", kSampling, "P");
  add(o, "frequency-penalty", K::kFloat, "", "frequency penalty", kSampling, "X");
  add(o, "presence-penalty", K::kFloat, "", "presence penalty", kSampling, "X");
  add(o, "repetition-penalty", K::kFloat, "", "repetition penalty", kSampling, "X");

  add(o, "percentile-metrics", K::kString, "ttft,tpot,itl,e2el",
      "metrics with percentile "
      "sections: ttft, tpot, itl, e2el, client_queue_time, e2el_including_client_queue",
      kResults, "LIST");
  add(o, "metric-percentiles", K::kString, "99", "percentiles to report, e.g. 50,90,99", kResults,
      "LIST");
  add(o, "goodput", K::kString, "",
      "SLOs KEY:MS for goodput (ttft, tpot, e2el); give several after "
      "one --goodput or repeat the flag",
      kResults, "KEY:MS", true);
  add(o, "save-result", K::kBool, "false",
      "write the result JSON (and, for sweeps, a summary JSON "
      "and SVG chart)",
      kResults);
  add(o, "save-detailed", K::kBool, "false",
      "include per-request lists (lengths, TTFTs, ITLs, "
      "texts, errors) in the JSON",
      kResults);
  add(o, "append-result", K::kBool, "false", "append to the result file instead of replacing it",
      kResults);
  add(o, "result-dir", K::kString, "", "directory for result files (default: current)", kResults,
      "DIR");
  add(o, "result-filename", K::kString, "",
      "result file name (default: "
      "{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json)",
      kResults, "FILE");
  add(o, "metadata", K::kString, "", "KEY=VALUE saved in the result JSON (repeatable)", kResults,
      "KEY=VALUE", true);
  add(o, "disable-tqdm", K::kBool, "false", "no progress output", kResults);
  add(o, "progress-interval", K::kFloat, "5",
      "seconds between progress lines when stdout is not "
      "a terminal",
      kResults, "S");
}

Result<ServeBenchConfig> parse_serve_bench_config(const Args& args) {
  ServeBenchConfig c;
  // Endpoint.
  c.backend_name = args.get("backend");
  STRATA_ASSIGN_OR_RETURN(c.backend, parse_backend(c.backend_name));
  if (args.is_set("base-url") && !args.get("base-url").empty()) {
    c.base_url = args.get("base-url");
  } else {
    std::string host = args.get("host");
    if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
    c.base_url = "http://" + host + ":" + std::to_string(args.get_int("port"));
  }
  while (!c.base_url.empty() && c.base_url.back() == '/') c.base_url.pop_back();
  c.endpoint = args.get("endpoint").empty() ? default_endpoint(c.backend) : args.get("endpoint");
  if (c.endpoint.front() != '/') c.endpoint = "/" + c.endpoint;
  c.model = args.get("model");
  c.served_model_name = args.get("served-model-name");
  std::string key = args.get("api-key");
  if (key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY"); env != nullptr) key = env;
  }
  if (!key.empty()) c.headers.emplace_back("Authorization", "Bearer " + key);
  for (const auto& h : args.get_all("header")) {
    if (h.empty()) continue;
    STRATA_ASSIGN_OR_RETURN(auto kv, key_value(h, '=', "--header"));
    c.headers.push_back(kv);
  }
  c.request_timeout_s = args.get_float("request-timeout");
  if (!(c.request_timeout_s > 0)) return invalid_argument("--request-timeout must be positive");
  c.ready_check_timeout_s = static_cast<double>(args.get_int("ready-check-timeout-sec"));
  c.label = args.get("label");

  // Dataset.
  c.dataset_name = args.get("dataset-name");
  if (c.dataset_name == "prefix_repetition") c.dataset_name = "prefix-repetition";
  if (c.dataset_name != "random" && c.dataset_name != "sharegpt" &&
      c.dataset_name != "prefix-repetition") {
    return invalid_argument("--dataset-name '" + c.dataset_name +
                            "' is not supported; use random, sharegpt or prefix-repetition");
  }
  c.dataset_path = args.get("dataset-path");
  if (c.dataset_name != "sharegpt" && !c.dataset_path.empty()) {
    return invalid_argument("--dataset-path is only used with --dataset-name sharegpt; the '" +
                            c.dataset_name + "' dataset is generated");
  }
  if (c.dataset_name == "sharegpt" && c.dataset_path.empty()) {
    return invalid_argument("--dataset-name sharegpt needs --dataset-path FILE");
  }
  c.num_prompts = args.get_int("num-prompts");
  if (c.num_prompts < 1) return invalid_argument("--num-prompts must be at least 1");
  c.seed = static_cast<uint64_t>(args.get_int("seed"));
  std::string in_text =
      args.is_set("input-len") ? args.get("input-len") : args.get("random-input-len");
  std::string out_text =
      args.is_set("output-len") ? args.get("output-len") : args.get("random-output-len");
  STRATA_ASSIGN_OR_RETURN(c.input_lens, positive_list(in_text, "--random-input-len", true));
  STRATA_ASSIGN_OR_RETURN(c.output_lens, positive_list(out_text, "--random-output-len", false));
  bool length_sweep = c.input_lens.size() > 1 || c.output_lens.size() > 1;
  if (length_sweep && c.dataset_name != "random") {
    return invalid_argument(
        "lists of --random-input-len / --random-output-len values sweep the "
        "random dataset only; use --dataset-name random");
  }
  c.range_ratio = args.get_float("random-range-ratio");
  if (!(c.range_ratio >= 0 && c.range_ratio < 1)) {
    return invalid_argument("--random-range-ratio must be in [0, 1)");
  }
  c.prefix_len = args.get_int("random-prefix-len");
  if (c.prefix_len < 0) return invalid_argument("--random-prefix-len must not be negative");
  if (args.is_set("sharegpt-output-len") && !args.get("sharegpt-output-len").empty()) {
    c.sharegpt_output_len = args.get_int("sharegpt-output-len");
  } else if (args.is_set("output-len") && c.output_lens.size() == 1) {
    c.sharegpt_output_len = c.output_lens[0];
  }
  if (c.sharegpt_output_len && *c.sharegpt_output_len < 1) {
    return invalid_argument("--sharegpt-output-len must be at least 1");
  }
  c.prefix_repetition.prefix_len = args.get_int("prefix-repetition-prefix-len");
  c.prefix_repetition.suffix_len = args.get_int("prefix-repetition-suffix-len");
  c.prefix_repetition.num_prefixes = args.get_int("prefix-repetition-num-prefixes");
  c.prefix_repetition.output_len = args.is_set("output-len") && c.output_lens.size() == 1
                                       ? c.output_lens[0]
                                       : args.get_int("prefix-repetition-output-len");
  c.prefix_repetition.num_prompts = c.num_prompts;
  c.prefix_repetition.seed = c.seed;
  if (const std::string order = args.get("prefix-repetition-order"); order == "round-robin") {
    c.prefix_repetition.round_robin = true;
  } else if (order != "shuffled") {
    return invalid_argument("--prefix-repetition-order must be shuffled or round-robin, not '" +
                            order + "'");
  }
  c.no_oversample = args.get_bool("no-oversample");
  c.tokenizer_path = args.get("tokenizer");

  // Traffic.
  STRATA_ASSIGN_OR_RETURN(c.request_rate, parse_rate(args.get("request-rate"), "--request-rate"));
  STRATA_ASSIGN_OR_RETURN(c.burstiness, parse_rate(args.get("burstiness"), "--burstiness"));
  if (!args.get("max-concurrency").empty()) {
    STRATA_ASSIGN_OR_RETURN(auto conc,
                            positive_list(args.get("max-concurrency"), "--max-concurrency", false));
    c.concurrencies.assign(conc.begin(), conc.end());
  }
  c.num_warmups = args.get_int("num-warmups");
  if (c.num_warmups < 0) return invalid_argument("--num-warmups must not be negative");
  c.ignore_eos = args.get_bool("ignore-eos") || c.dataset_name == "random";
  if (!args.get("logprobs").empty()) c.logprobs = static_cast<int>(args.get_int("logprobs"));

  Json extra = Json::object();
  for (const char* name : {"temperature", "top-p", "min-p", "frequency-penalty", "presence-penalty",
                           "repetition-penalty"}) {
    if (args.get(name).empty()) continue;
    std::string field = name;
    std::replace(field.begin(), field.end(), '-', '_');
    extra[field] = args.get_float(name);
  }
  if (!args.get("top-k").empty()) extra["top_k"] = args.get_int("top-k");
  c.temperature_set = !args.get("temperature").empty();
  if (!args.get("extra-body").empty()) {
    auto parsed = parse_json(args.get("extra-body"), "--extra-body");
    if (!parsed.ok()) return parsed.status();
    if (!parsed->is_object()) return invalid_argument("--extra-body must be a JSON object");
    for (const auto& [k, v] : parsed->items()) extra[k] = v;
    if (parsed->contains("temperature")) c.temperature_set = true;
  }
  if (!extra.empty()) c.extra_body_json = extra.dump();

  // Results.
  c.percentile_metrics = split(args.get("percentile-metrics"), ',');
  for (auto& m : c.percentile_metrics) {
    m = std::string(trim(m));
    if (m != "ttft" && m != "tpot" && m != "itl" && m != "e2el" && m != "client_queue_time" &&
        m != "e2el_including_client_queue") {
      return invalid_argument("--percentile-metrics: unknown metric '" + m +
                              "' (use ttft, tpot, itl, e2el, client_queue_time, "
                              "e2el_including_client_queue)");
    }
  }
  auto pcts = parse_float_list(args.get("metric-percentiles"));
  if (!pcts.ok() || pcts->empty()) {
    return invalid_argument("--metric-percentiles expects numbers like 50,90,99, got '" +
                            args.get("metric-percentiles") + "'");
  }
  for (double p : *pcts) {
    if (p < 0 || p > 100) return invalid_argument("--metric-percentiles must lie in [0, 100]");
  }
  c.percentiles = *pcts;
  // --goodput takes several KEY:MS words (they arrive as positional arguments after the first).
  std::vector<std::string> slos;
  for (const auto& v : args.get_all("goodput")) {
    if (!v.empty()) slos.push_back(v);
  }
  for (const auto& p : args.positional()) {
    if (slos.empty() || p.find(':') == std::string::npos) {
      return invalid_argument("unexpected argument '" + p +
                              "': `strata bench serve` takes options only (see --help)");
    }
    slos.push_back(p);
  }
  for (const auto& s : slos) {
    STRATA_ASSIGN_OR_RETURN(auto kv, key_value(s, ':', "--goodput"));
    if (kv.first != "ttft" && kv.first != "tpot" && kv.first != "e2el") {
      return invalid_argument("--goodput: unknown metric '" + kv.first +
                              "'; service level objectives use ttft, tpot or e2el");
    }
    auto ms = parse_float(kv.second, "--goodput " + kv.first);
    if (!ms.ok()) {
      return invalid_argument("--goodput expects KEY:VALUE with VALUE in milliseconds, got '" + s +
                              "'");
    }
    if (*ms < 0) return invalid_argument("--goodput values must be non-negative, got '" + s + "'");
    c.goodput[kv.first] = *ms;
  }
  c.save_result = args.get_bool("save-result");
  c.save_detailed = args.get_bool("save-detailed");
  c.append_result = args.get_bool("append-result");
  c.result_dir = args.get("result-dir");
  c.result_filename = args.get("result-filename");
  for (const auto& m : args.get_all("metadata")) {
    if (m.empty()) continue;
    STRATA_ASSIGN_OR_RETURN(auto kv, key_value(m, '=', "--metadata"));
    c.metadata.push_back(kv);
  }
  c.disable_progress = args.get_bool("disable-tqdm");
  c.progress_interval_s = args.get_float("progress-interval");
  if (!(c.progress_interval_s > 0)) return invalid_argument("--progress-interval must be positive");
  return c;
}

}  // namespace strata::bench
