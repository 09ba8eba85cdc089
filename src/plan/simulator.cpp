#include "plan/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <numeric>
#include <unordered_map>

#include "bench/arrivals.h"
#include "bench/dataset.h"
#include "core/file_util.h"
#include "core/rng.h"
#include "core/strings.h"
#include "sched/clock.h"
#include "tokenizer/tokenizer.h"

namespace strata::plan {

namespace {

constexpr const char* kRandomSyntax =
    "random:in=N,out=M[,range=R][,prefix=P][,n=NUM][,rate=QPS][,burstiness=B][,seed=S]";
constexpr const char* kShareGptSyntax =
    "sharegpt:path=FILE[,n=NUM][,output-len=M][,tokenizer=PATH][,rate=QPS][,burstiness=B]"
    "[,seed=S]";

Status bad_spec(const std::string& spec, const std::string& why) {
  std::string expected = std::string(kRandomSyntax) + " or " + kShareGptSyntax;
  if (starts_with(spec, "random:")) expected = kRandomSyntax;
  if (starts_with(spec, "sharegpt:")) expected = kShareGptSyntax;
  return invalid_argument("--workload '" + spec + "': " + why + " (expected " + expected + ")");
}

Result<double> parse_number(const std::string& spec, const std::string& key,
                            const std::string& text) {
  if (text == "inf") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(v >= 0))
    return bad_spec(spec, key + "=" + text + " is not a non-negative number");
  return v;
}

Result<int64_t> parse_count(const std::string& spec, const std::string& key,
                            const std::string& text, int64_t min) {
  STRATA_ASSIGN_OR_RETURN(double v, parse_number(spec, key, text));
  if (v != std::floor(v) || v < static_cast<double>(min) || v > 1e12)
    return bad_spec(spec, key + "=" + text + " must be a whole number >= " + std::to_string(min));
  return static_cast<int64_t>(v);
}

// Prompt token ids: a group prefix [group marker, filler...] then [request marker, filler...].
// Markers differ per group / request, so prompts share KV only through a common group prefix.
std::vector<int32_t> prompt_tokens(const SimRequest& r, size_t index) {
  std::vector<int32_t> t(static_cast<size_t>(r.prompt_len));
  const int64_t shared = r.prefix_group >= 0 ? std::min(r.prefix_len, r.prompt_len) : 0;
  for (int64_t j = 0; j < r.prompt_len; ++j) {
    const bool in_prefix = j < shared;
    const int64_t start = in_prefix ? 0 : shared;
    if (j == start) {
      t[j] = in_prefix ? 1'000'000 + static_cast<int32_t>(r.prefix_group % 1'000'000)
                       : 2'000'000 + static_cast<int32_t>(index % 100'000'000);
    } else {
      t[j] = 1 + static_cast<int32_t>((j * 7919) % 30000);
    }
  }
  return t;
}

// The KEY=VALUE list after "KIND:", each key once.
Result<std::vector<std::pair<std::string, std::string>>> key_values(const std::string& spec,
                                                                    size_t kind_len) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& part : split(spec.substr(kind_len), ',')) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos) return bad_spec(spec, "'" + part + "' is not KEY=VALUE");
    std::string key = part.substr(0, eq);
    for (const auto& [k, v] : out)
      if (k == key) return bad_spec(spec, "key '" + key + "' is given twice");
    out.emplace_back(std::move(key), part.substr(eq + 1));
  }
  return out;
}

// The keys every workload has: n, and bench serve's arrival model. False: not one of them.
Result<bool> parse_common_key(const std::string& spec, const std::string& key,
                              const std::string& value, int64_t* num_prompts, double* rate,
                              double* burstiness, uint64_t* seed) {
  if (key == "n") {
    STRATA_ASSIGN_OR_RETURN(*num_prompts, parse_count(spec, key, value, 1));
  } else if (key == "rate") {
    STRATA_ASSIGN_OR_RETURN(*rate, parse_number(spec, key, value));
    if (*rate <= 0) return bad_spec(spec, "rate must be > 0 (inf: all at once)");
  } else if (key == "burstiness") {
    STRATA_ASSIGN_OR_RETURN(*burstiness, parse_number(spec, key, value));
    if (*burstiness <= 0) return bad_spec(spec, "burstiness must be > 0");
  } else if (key == "seed") {
    STRATA_ASSIGN_OR_RETURN(int64_t s, parse_count(spec, key, value, 0));
    *seed = static_cast<uint64_t>(s);
  } else {
    return false;
  }
  return true;
}

Result<RandomWorkload> parse_random(const std::string& spec) {
  RandomWorkload w;
  bool has_in = false, has_out = false;
  STRATA_ASSIGN_OR_RETURN(auto kvs, key_values(spec, 7));
  for (const auto& [key, value] : kvs) {
    STRATA_ASSIGN_OR_RETURN(bool common, parse_common_key(spec, key, value, &w.num_prompts,
                                                          &w.request_rate, &w.burstiness, &w.seed));
    if (common) continue;
    if (key == "in") {
      STRATA_ASSIGN_OR_RETURN(w.input_len, parse_count(spec, key, value, 1));
      has_in = true;
    } else if (key == "out") {
      STRATA_ASSIGN_OR_RETURN(w.output_len, parse_count(spec, key, value, 1));
      has_out = true;
    } else if (key == "range") {
      STRATA_ASSIGN_OR_RETURN(w.range_ratio, parse_number(spec, key, value));
      if (w.range_ratio >= 1) return bad_spec(spec, "range must be in [0, 1)");
    } else if (key == "prefix") {
      STRATA_ASSIGN_OR_RETURN(w.prefix_len, parse_count(spec, key, value, 0));
    } else {
      return bad_spec(spec, "unknown key '" + key + "'");
    }
  }
  if (!has_in || !has_out) return bad_spec(spec, "in= and out= are required");
  return w;
}

Result<ShareGptWorkload> parse_sharegpt(const std::string& spec) {
  ShareGptWorkload w;
  bool has_path = false;
  STRATA_ASSIGN_OR_RETURN(auto kvs, key_values(spec, 9));
  for (const auto& [key, value] : kvs) {
    STRATA_ASSIGN_OR_RETURN(bool common, parse_common_key(spec, key, value, &w.num_prompts,
                                                          &w.request_rate, &w.burstiness, &w.seed));
    if (common) continue;
    if (key == "path") {
      if (value.empty()) return bad_spec(spec, "path= needs the ShareGPT JSON file");
      w.path = value;
      has_path = true;
    } else if (key == "output-len") {
      STRATA_ASSIGN_OR_RETURN(w.output_len, parse_count(spec, key, value, 1));
    } else if (key == "tokenizer") {
      if (value.empty()) return bad_spec(spec, "tokenizer= needs a tokenizer directory or file");
      w.tokenizer = value;
    } else {
      return bad_spec(spec, "unknown key '" + key + "'");
    }
  }
  if (!has_path) return bad_spec(spec, "path= is required (a ShareGPT JSON file)");
  return w;
}

}  // namespace

Result<Workload> parse_workload(const std::string& spec) {
  if (starts_with(spec, "random:")) {
    STRATA_ASSIGN_OR_RETURN(RandomWorkload w, parse_random(spec));
    return Workload(std::move(w));
  }
  if (starts_with(spec, "sharegpt:")) {
    STRATA_ASSIGN_OR_RETURN(ShareGptWorkload w, parse_sharegpt(spec));
    return Workload(std::move(w));
  }
  return bad_spec(spec, "unknown workload kind (random or sharegpt)");
}

Result<RandomWorkload> parse_workload_spec(const std::string& spec) {
  if (!starts_with(spec, "random:")) return bad_spec(spec, "a random workload is expected here");
  return parse_random(spec);
}

Result<WorkloadRequests> make_sharegpt_workload(const ShareGptWorkload& w,
                                                bench::PromptTokenizer& tok) {
  if (!file_exists(w.path))
    return invalid_argument("--workload sharegpt: path=" + w.path + " does not exist");
  bench::ShareGptOptions o;
  o.path = w.path;
  o.num_prompts = w.num_prompts;
  o.output_len = w.output_len;
  o.seed = w.seed;
  auto ds = bench::sample_sharegpt(tok, o);
  if (!ds.ok()) return ds.status().with_context("--workload sharegpt path=" + w.path);
  WorkloadRequests out;
  for (std::string note : ds->notes) {
    // bench's notes name its flag; here it is the spec's key.
    if (size_t at = note.find("--sharegpt-output-len"); at != std::string::npos)
      note.replace(at, std::string("--sharegpt-output-len").size(), "output-len=");
    out.notes.push_back(std::move(note));
  }
  const auto offsets =
      bench::run_arrival_offsets(ds->requests.size(), w.request_rate, w.burstiness, w.seed);
  std::unordered_map<std::string, int64_t> group_of_prompt;
  for (size_t i = 0; i < ds->requests.size(); ++i) {
    const bench::SampleRequest& s = ds->requests[i];
    SimRequest r;
    r.arrival_s = offsets[i];
    r.prompt_len = s.prompt_len;
    r.output_len = s.expected_output_len;
    r.prefix_group =
        group_of_prompt.try_emplace(s.prompt, static_cast<int64_t>(group_of_prompt.size()))
            .first->second;
    r.prefix_len = s.prompt_len;
    out.requests.push_back(r);
  }
  return out;
}

Result<WorkloadRequests> make_workload(const Workload& w, const std::string& model_tokenizer) {
  if (const auto* random = std::get_if<RandomWorkload>(&w)) {
    WorkloadRequests out;
    out.requests = make_random_workload(*random);
    out.input_len = random->input_len;
    out.output_len = random->output_len;
    return out;
  }
  const auto& sharegpt = std::get<ShareGptWorkload>(w);
  std::shared_ptr<const Tokenizer> tok;
  std::string tok_path = sharegpt.tokenizer;
  if (!tok_path.empty()) {
    auto t = Tokenizer::load(tok_path);
    if (!t.ok()) return t.status().with_context("--workload sharegpt: tokenizer=" + tok_path);
    tok = std::move(t).value();
  } else {
    tok_path = model_tokenizer;
    auto t = tok_path.empty() ? Result<std::shared_ptr<const Tokenizer>>(not_found("no model path"))
                              : Tokenizer::load(tok_path);
    if (!t.ok())
      return invalid_argument(
          "--workload sharegpt: prompt lengths are counted with the model's tokenizer, and there "
          "is none at '" +
          tok_path + "' (" + t.status().message() +
          "); give one in the spec with tokenizer=PATH (a tokenizer folder, tokenizer.json or "
          ".gguf)");
    tok = std::move(t).value();
  }
  auto prompt_tok = bench::make_local_tokenizer(std::move(tok), tok_path);
  return make_sharegpt_workload(sharegpt, *prompt_tok);
}

std::vector<SimRequest> make_random_workload(const RandomWorkload& w) {
  Rng rng(w.seed);
  auto draw = [&](int64_t len) {
    const int64_t lo =
        std::max<int64_t>(1, static_cast<int64_t>(std::floor(len * (1 - w.range_ratio))));
    const int64_t hi = std::max(lo, static_cast<int64_t>(std::ceil(len * (1 + w.range_ratio))));
    return lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(hi - lo + 1)));
  };
  std::vector<SimRequest> out(static_cast<size_t>(w.num_prompts));
  for (auto& r : out) {
    r.prompt_len = w.prefix_len + draw(w.input_len);
    r.output_len = draw(w.output_len);
    if (w.prefix_len > 0) {
      r.prefix_group = 0;
      r.prefix_len = w.prefix_len;
    }
  }
  // The send times `strata bench serve --seed S` uses.
  const auto offsets = bench::run_arrival_offsets(out.size(), w.request_rate, w.burstiness, w.seed);
  for (size_t i = 0; i < out.size(); ++i) out[i].arrival_s = offsets[i];
  return out;
}

Result<SimulationResult> simulate(const SimulationConfig& config,
                                  std::span<const SimRequest> workload,
                                  const StepTimeFn& step_time) {
  for (size_t i = 0; i < workload.size(); ++i) {
    const SimRequest& r = workload[i];
    if (r.prompt_len < 1 || r.output_len < 1 || !(r.arrival_s >= 0) || !std::isfinite(r.arrival_s))
      return invalid_argument("workload request " + std::to_string(i) +
                              ": needs prompt_len >= 1, output_len >= 1 and a finite arrival "
                              "time >= 0");
  }
  if (config.max_concurrency && *config.max_concurrency < 1)
    return invalid_argument("max concurrency must be >= 1");
  if (!(config.request_admission_s >= 0) || !std::isfinite(config.request_admission_s))
    return invalid_argument("the request admission time must be a finite number >= 0 seconds");
  sched::ManualClock clock(0.0);
  STRATA_ASSIGN_OR_RETURN(
      std::unique_ptr<sched::Scheduler> sched,
      sched::Scheduler::create(config.scheduler, config.cache, config.num_kv_blocks, &clock));

  SimulationResult res;
  const size_t n = workload.size();
  res.outputs.resize(n);
  std::vector<size_t> order(n);  // by arrival time, then index
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return workload[a].arrival_s < workload[b].arrival_s;
  });
  std::vector<double> last_token(n, 0.0);
  std::deque<size_t> pending;  // arrived, waiting for a concurrency slot
  size_t next = 0;             // into order
  size_t done = 0;
  int64_t in_flight = 0;
  const int64_t cap = config.max_concurrency.value_or(std::numeric_limits<int64_t>::max());
  double now = 0;

  // The client sends request i at time t: it takes a concurrency slot, and the server admits it
  // (hands it to the scheduler) request_admission_s after the previous admission or t.
  struct Admission {
    double time;
    size_t index;
  };
  std::deque<Admission> admitting;
  double last_admission = 0;
  auto send = [&](size_t i, double t) {
    bench::RequestOutput& out = res.outputs[i];
    out.prompt_len = workload[i].prompt_len;
    out.start_time = t;
    out.queue_time = t - workload[i].arrival_s;
    last_admission = std::max(t, last_admission) + config.request_admission_s;
    admitting.push_back({last_admission, i});
  };
  auto dispatch_pending = [&](double t) {
    while (!pending.empty() && in_flight < cap) {
      const size_t i = pending.front();
      pending.pop_front();
      send(i, t);
      ++in_flight;
    }
  };
  // Requests admitted by time t go to the scheduler; one it refuses (prompt too long, ...) is
  // done, failed, and frees its slot.
  auto admit_until = [&](double t) {
    while (!admitting.empty() && admitting.front().time <= t) {
      const Admission a = admitting.front();
      admitting.pop_front();
      const SimRequest& r = workload[a.index];
      sched::RequestSpec spec{.request_id = "sim-" + std::to_string(a.index),
                              .prompt_token_ids = prompt_tokens(r, a.index)};
      spec.stop.max_tokens = r.output_len;
      spec.stop.ignore_eos = true;
      spec.arrival_time = a.time;
      spec.user_data = a.index;
      if (Status st = sched->add_request(std::move(spec)); !st.ok()) {
        bench::RequestOutput& out = res.outputs[a.index];
        out.success = false;
        out.error = st.to_string();
        ++done;
        --in_flight;
        dispatch_pending(t);
      }
    }
  };
  // Requests arriving by time t: sent at their own arrival time while slots are free.
  auto arrive_until = [&](double t, int64_t* occupied) {
    while (next < n && workload[order[next]].arrival_s <= t) {
      const size_t i = order[next++];
      if (pending.empty() && *occupied < cap) {
        send(i, workload[i].arrival_s);
        ++*occupied;
      } else {
        pending.push_back(i);
      }
    }
  };

  std::vector<SequenceWork> batch;
  std::vector<int32_t> sampled;
  // The outputs of a completed step at time `now`.
  auto complete = [&](const sched::StepPlan& plan, const std::vector<int32_t>& tokens) {
    ++res.num_steps;
    res.max_running = std::max(res.max_running, static_cast<int64_t>(plan.scheduled.size()));
    int64_t occupied = in_flight;  // the slots in use while the step ran
    int64_t freed = 0;
    for (const sched::RequestOutput& o : sched->update(plan, tokens)) {
      const size_t i = static_cast<size_t>(o.user_data);
      bench::RequestOutput& out = res.outputs[i];
      if (o.num_output_tokens == 1) {
        out.ttft = now - out.start_time;
      } else {
        out.itl.push_back(now - last_token[i]);
      }
      last_token[i] = now;
      if (o.finished()) {
        out.success = o.finish_reason == sched::FinishReason::kLength;
        if (!out.success)
          out.error = std::string("finished: ") + finish_reason_name(o.finish_reason);
        out.output_tokens = o.num_output_tokens;
        out.output_tokens_from_usage = true;
        out.latency = now - out.start_time;
        res.duration_s = now;
        ++freed;
        ++done;
      }
    }
    arrive_until(now, &occupied);
    in_flight = occupied - freed;
    dispatch_pending(now);
  };
  // The batch a plan runs, and made-up sampled tokens that are no stop tokens (EOS is ignored).
  auto batch_of = [&](const sched::StepPlan& plan, std::vector<SequenceWork>* b,
                      std::vector<int32_t>* tokens) {
    b->clear();
    tokens->clear();
    for (const auto& s : plan.scheduled) {
      b->push_back({.num_new_tokens = s.num_scheduled_tokens,
                    .context_len = s.num_computed_tokens,
                    .sample = s.will_sample});
      tokens->push_back(
          s.will_sample
              ? static_cast<int32_t>(1 + (s.num_computed_tokens + s.num_scheduled_tokens) % 30000)
              : sched::kNoToken);
    }
  };
  auto idle = [&]() -> Status {  // no runnable request: wait for the next admission or arrival
    dispatch_pending(now);
    if (done == n) return Status::ok_status();
    if (!admitting.empty() && admitting.front().time <= now) return Status::ok_status();
    double next_t = std::numeric_limits<double>::infinity();
    if (!admitting.empty()) next_t = admitting.front().time;
    if (next < n) next_t = std::min(next_t, workload[order[next]].arrival_s);
    if (!std::isfinite(next_t))
      return internal_error("simulation: requests are queued but the scheduler has no work");
    now = std::max(now, next_t);
    clock.set(now);
    arrive_until(now, &in_flight);
    dispatch_pending(now);
    return Status::ok_status();
  };

  if (config.pipeline_depth > 1 && config.stage_cost) {
    sched->set_pipeline_depth(config.pipeline_depth);
    struct Submitted {
      sched::StepPlan plan;
      std::vector<int32_t> tokens;
      double done_at = 0;
    };
    std::deque<Submitted> submitted;
    std::vector<double> stage_free;  // when each stage's device finishes its last batch
    while (done < n) {
      admit_until(now);
      while (static_cast<int>(submitted.size()) < config.pipeline_depth &&
             sched->has_runnable_requests()) {
        if (res.num_steps + static_cast<int64_t>(submitted.size()) >= config.max_steps)
          return internal_error("simulation: no end after " + std::to_string(config.max_steps) +
                                " steps (" + std::to_string(n - done) + " requests unfinished)");
        sched::StepPlan plan = sched->schedule();
        if (plan.empty()) break;  // every runnable request is in a batch in flight
        Submitted sub;
        batch_of(plan, &batch, &sub.tokens);
        const StepCost cost = config.stage_cost(batch);
        if (!(cost.step_time_s > 0) || !std::isfinite(cost.step_time_s))
          return invalid_argument("simulation: the step time of a batch of " +
                                  std::to_string(plan.total_num_scheduled_tokens) +
                                  " tokens is not a positive number of seconds");
        if (stage_free.size() < cost.stage_s.size()) stage_free.resize(cost.stage_s.size(), 0.0);
        double t = now;
        for (size_t s = 0; s < cost.stage_s.size(); ++s) {
          t = std::max(t, stage_free[s]) + cost.stage_s[s];
          stage_free[s] = t;
        }
        // Sampling and the step's bookkeeping run on the first stage's device at completion.
        sub.done_at = t + cost.overhead_s;
        sub.plan = std::move(plan);
        submitted.push_back(std::move(sub));
      }
      if (submitted.empty()) {
        if (sched->has_runnable_requests())
          return internal_error("simulation: the scheduler planned an empty step");
        STRATA_RETURN_IF_ERROR(idle());
        continue;
      }
      Submitted oldest = std::move(submitted.front());
      submitted.pop_front();
      now = std::max(now, oldest.done_at);
      if (!stage_free.empty()) stage_free[0] = std::max(stage_free[0], now);
      clock.set(now);
      complete(oldest.plan, oldest.tokens);
    }
    res.stats = sched->stats();
    return res;
  }

  while (done < n) {
    admit_until(now);
    if (!sched->has_runnable_requests()) {
      STRATA_RETURN_IF_ERROR(idle());
      continue;
    }
    if (res.num_steps >= config.max_steps)
      return internal_error("simulation: no end after " + std::to_string(config.max_steps) +
                            " steps (" + std::to_string(n - done) + " requests unfinished)");
    sched::StepPlan plan = sched->schedule();
    if (plan.empty()) return internal_error("simulation: the scheduler planned an empty step");
    batch_of(plan, &batch, &sampled);
    const double dt = step_time(batch);
    if (!(dt > 0) || !std::isfinite(dt))
      return invalid_argument("simulation: the step time of a batch of " +
                              std::to_string(plan.total_num_scheduled_tokens) +
                              " tokens is not a positive number of seconds");
    now += dt;
    clock.set(now);
    complete(plan, sampled);
  }
  res.stats = sched->stats();
  return res;
}

Result<std::vector<SweepPoint>> simulate_sweep(const SimulationConfig& config,
                                               std::span<const SimRequest> workload,
                                               const StepTimeFn& step_time,
                                               const SweepOptions& options) {
  std::vector<SweepPoint> points;
  for (const auto& c : options.concurrencies) {
    SimulationConfig point_config = config;
    point_config.max_concurrency = c;
    SweepPoint p;
    p.max_concurrency = c;
    STRATA_ASSIGN_OR_RETURN(p.result, simulate(point_config, workload, step_time));
    p.metrics =
        bench::compute_metrics(p.result.outputs, p.result.duration_s, options.percentiles, {});
    p.row = bench::make_sweep_row(p.metrics, p.result.outputs, p.result.duration_s, c,
                                  options.input_len, options.output_len);
    points.push_back(std::move(p));
  }
  return points;
}

}  // namespace strata::plan
