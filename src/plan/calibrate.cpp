#include "plan/calibrate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <sstream>

#include "core/clock.h"
#include "core/rng.h"
#include "engine/engine.h"

namespace strata::plan {
namespace {

// One phase of the grid: `n` requests of `prompt_len` random tokens, `max_tokens` each, all
// submitted at once and run to completion.
struct Phase {
  int64_t n = 1;
  int64_t prompt_len = 1;
  int64_t max_tokens = 1;
  int64_t cost() const { return n * (prompt_len + max_tokens); }
  std::string describe() const {
    std::ostringstream s;
    s << n << (n == 1 ? " request" : " requests") << " of " << prompt_len << " prompt tokens, "
      << max_tokens << " output";
    return s.str();
  }
};

std::vector<Phase> make_grid(const sched::SchedulerConfig& c) {
  std::vector<Phase> grid;
  const int64_t max_prompt = c.max_model_len - 2;
  // Prefill steps of growing size (each followed by one decode step at that context).
  const int64_t largest = std::max<int64_t>(1, std::min(c.max_num_batched_tokens, max_prompt));
  for (int64_t p = 16; p < largest; p *= 4) grid.push_back({1, p, 2});
  grid.push_back({1, largest, 2});
  // A prompt longer than the token budget: chunks at growing context.
  if (max_prompt > c.max_num_batched_tokens)
    grid.push_back({1, std::min(max_prompt, 4 * c.max_num_batched_tokens), 1});
  // Decode steps of growing batch at a short and a longer context: 16 decode-only steps after
  // the prompts' prefill steps (during which the first requests already decode).
  const int64_t prefill_per_step =
      c.max_prefill_tokens_with_decode > 0
          ? std::min(c.max_prefill_tokens_with_decode, c.max_num_batched_tokens)
          : c.max_num_batched_tokens;
  for (int64_t ctx : {int64_t{64}, int64_t{512}}) {
    for (int64_t b = 1; b <= c.max_num_seqs; b *= 2) {
      const int64_t prefill_steps = (b * ctx + prefill_per_step - 1) / prefill_per_step + b;
      const int64_t out = 16 + prefill_steps;
      if (ctx + out > c.max_model_len) break;
      grid.push_back({b, ctx, out});
      if (b >= 64) break;
    }
  }
  std::stable_sort(grid.begin(), grid.end(),
                   [](const Phase& a, const Phase& b) { return a.cost() < b.cost(); });
  return grid;
}

// Solves the k x k system a x = b in place (Gaussian elimination, partial pivoting); false when
// singular.
bool solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>* x) {
  const size_t k = b.size();
  for (size_t col = 0; col < k; ++col) {
    size_t piv = col;
    for (size_t r = col + 1; r < k; ++r)
      if (std::fabs(a[r][col]) > std::fabs(a[piv][col])) piv = r;
    if (std::fabs(a[piv][col]) < 1e-12) return false;
    std::swap(a[piv], a[col]);
    std::swap(b[piv], b[col]);
    for (size_t r = col + 1; r < k; ++r) {
      const double f = a[r][col] / a[col][col];
      for (size_t j = col; j < k; ++j) a[r][j] -= f * a[col][j];
      b[r] -= f * b[col];
    }
  }
  x->assign(k, 0);
  for (size_t i = k; i-- > 0;) {
    double s = b[i];
    for (size_t j = i + 1; j < k; ++j) s -= a[i][j] * (*x)[j];
    (*x)[i] = s / a[i][i];
  }
  return true;
}

constexpr size_t kTerms = 5;  // overhead, sequences, matmul FLOPs, attention FLOPs, bytes
using Features = std::array<double, kTerms>;

Features features(const StepCost& c) {
  return {1.0, static_cast<double>(c.num_logits_rows), c.matmul_flops, c.attention_flops,
          c.bytes()};
}

std::array<double, kTerms> coefficients(const CalibrationFit& f) {
  return {f.step_overhead_s, f.per_sequence_s, f.per_matmul_flop_s, f.per_attention_flop_s,
          f.per_byte_s};
}

double predict_features(const std::array<double, kTerms>& coef, const Features& f) {
  double t = 0;
  for (size_t j = 0; j < kTerms; ++j) t += coef[j] * f[j];
  return t;
}

// Non-negative least squares of sum_i (f_i . x / t_i - 1)^2 over the rows, by trying every set of
// free terms (2^5 - 1 of them) and keeping the best solution with no negative term.
std::array<double, kTerms> nnls_relative(const std::vector<Features>& f,
                                         const std::vector<double>& t) {
  // Columns scaled to unit maximum for conditioning.
  Features scale{};
  for (size_t i = 0; i < f.size(); ++i)
    for (size_t j = 0; j < kTerms; ++j) scale[j] = std::max(scale[j], std::fabs(f[i][j] / t[i]));
  std::array<double, kTerms> best{};
  double best_err = INFINITY;
  for (unsigned mask = 1; mask < (1u << kTerms); ++mask) {
    std::vector<size_t> cols;
    for (size_t j = 0; j < kTerms; ++j)
      if ((mask >> j & 1) && scale[j] > 0) cols.push_back(j);
    if (cols.empty()) continue;
    const size_t k = cols.size();
    std::vector<std::vector<double>> ata(k, std::vector<double>(k, 0));
    std::vector<double> atb(k, 0), x;
    for (size_t i = 0; i < f.size(); ++i) {
      for (size_t p = 0; p < k; ++p) {
        const double ap = f[i][cols[p]] / t[i] / scale[cols[p]];
        atb[p] += ap;
        for (size_t q = 0; q < k; ++q) ata[p][q] += ap * f[i][cols[q]] / t[i] / scale[cols[q]];
      }
    }
    if (!solve(ata, atb, &x)) continue;
    if (std::any_of(x.begin(), x.end(), [](double v) { return v < 0; })) continue;
    std::array<double, kTerms> coef{};
    for (size_t p = 0; p < k; ++p) coef[cols[p]] = x[p] / scale[cols[p]];
    double err = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      const double rel = predict_features(coef, f[i]) / t[i] - 1;
      err += rel * rel;
    }
    if (err < best_err) {
      best_err = err;
      best = coef;
    }
  }
  return best;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

Result<std::vector<CalibrationPoint>> measure_steps(
    engine::Engine& engine, const CalibrationOptions& options,
    const std::function<void(const std::string&)>& progress) {
  if (engine.has_unfinished_requests())
    return failed_precondition("calibration needs an idle engine");
  const sched::SchedulerConfig& sc = engine.config().scheduler;
  const int64_t vocab = engine.model_config().vocab_size;
  if (vocab <= 0) return invalid_argument("the model has no vocabulary size");
  std::vector<CalibrationPoint> points;
  bool recording = false;
  engine.set_step_observer([&](const engine::StepTraceRecord& r) {
    if (!recording) return;
    CalibrationPoint p;
    p.seconds = r.duration;
    for (const engine::StepTraceEvent& ev : r.events)
      if (ev.tokens > 0) p.batch.push_back({ev.tokens, ev.context, ev.sample});
    if (!p.batch.empty()) points.push_back(std::move(p));
  });
  struct ObserverOff {
    engine::Engine& e;
    ~ObserverOff() { e.set_step_observer({}); }
  } observer_off{engine};

  Rng rng(options.seed);
  int64_t next_id = 0;
  auto run = [&](const Phase& ph) -> Status {
    for (int64_t i = 0; i < ph.n; ++i) {
      engine::EngineRequest r;
      r.request_id = "calibrate-" + std::to_string(next_id++);
      r.prompt_token_ids.resize(ph.prompt_len);
      // Fresh random prompts: no prefix-cache hits between phases or passes.
      for (int32_t& t : r.prompt_token_ids)
        t = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab));
      r.params = engine.default_sampling_params();
      r.params.max_tokens = static_cast<int>(ph.max_tokens);
      r.params.ignore_eos = true;
      r.params.stop.clear();
      r.params.stop_token_ids.clear();
      r.detokenize = engine.tokenizer() != nullptr;
      STRATA_RETURN_IF_ERROR(engine.validate(r));
      auto stream = std::make_shared<engine::RequestStream>(r.request_id, 1);
      STRATA_RETURN_IF_ERROR(engine.add_request(std::move(r), stream));
    }
    while (engine.has_unfinished_requests()) STRATA_RETURN_IF_ERROR(engine.step());
    return ok_status();
  };

  STRATA_RETURN_IF_ERROR(run({1, std::min<int64_t>(16, sc.max_model_len - 2), 4}));  // warm-up
  const std::vector<Phase> grid = make_grid(sc);
  const Stopwatch clock;
  recording = true;
  bool out_of_time = false;
  for (int pass = 0; pass < options.passes && !out_of_time; ++pass) {
    for (const Phase& ph : grid) {
      if (clock.elapsed() > options.budget_s) {
        if (progress)
          progress("budget of " + std::to_string(static_cast<int>(options.budget_s)) +
                   " s spent: skipping " + ph.describe() + " and the rest");
        out_of_time = true;
        break;
      }
      const size_t before = points.size();
      const double t0 = clock.elapsed();
      STRATA_RETURN_IF_ERROR(run(ph));
      if (progress) {
        std::ostringstream s;
        s.precision(3);
        s << "pass " << pass + 1 << ": " << ph.describe() << ": " << points.size() - before
          << " steps in " << clock.elapsed() - t0 << " s";
        progress(s.str());
      }
    }
  }
  return points;
}

double CalibrationFit::predict(const StepCost& c) const {
  return predict_features(coefficients(*this), features(c));
}

Result<CalibrationFit> fit_step_times(const CostModel& model,
                                      std::span<const CalibrationPoint> points) {
  if (points.size() < 8)
    return invalid_argument("calibration needs at least 8 measured steps, got " +
                            std::to_string(points.size()));
  std::vector<Features> f;
  std::vector<double> t;
  for (const CalibrationPoint& p : points) {
    if (!(p.seconds > 0) || !std::isfinite(p.seconds))
      return invalid_argument("a calibration step took " + std::to_string(p.seconds) + " s");
    f.push_back(features(model.step_cost(p.batch)));
    t.push_back(p.seconds);
  }
  auto to_fit = [](const std::array<double, kTerms>& c) {
    CalibrationFit fit;
    fit.step_overhead_s = c[0];
    fit.per_sequence_s = c[1];
    fit.per_matmul_flop_s = c[2];
    fit.per_attention_flop_s = c[3];
    fit.per_byte_s = c[4];
    return fit;
  };
  auto errors = [&](const CalibrationFit& fit, const std::vector<Features>& ff,
                    const std::vector<double>& tt) {
    std::vector<double> e;
    for (size_t i = 0; i < ff.size(); ++i)
      e.push_back(std::fabs(predict_features(coefficients(fit), ff[i]) / tt[i] - 1));
    return e;
  };
  CalibrationFit first = to_fit(nnls_relative(f, t));
  // A shared machine stalls a step now and then: drop the worst 5 % of the first fit and refit.
  const std::vector<double> e0 = errors(first, f, t);
  const double cut = percentile(e0, 0.95);
  std::vector<Features> kept_f;
  std::vector<double> kept_t;
  for (size_t i = 0; i < f.size(); ++i) {
    if (e0[i] <= cut) {
      kept_f.push_back(f[i]);
      kept_t.push_back(t[i]);
    }
  }
  CalibrationFit fit = to_fit(nnls_relative(kept_f, kept_t));
  const std::vector<double> e = errors(fit, kept_f, kept_t);
  fit.num_points = static_cast<int64_t>(kept_f.size());
  fit.num_dropped = static_cast<int64_t>(f.size() - kept_f.size());
  fit.median_error = percentile(e, 0.5);
  fit.p90_error = percentile(e, 0.9);
  fit.max_error = percentile(e, 1.0);
  return fit;
}

HardwareSpec calibrated_hardware(const HardwareSpec& base, const CalibrationFit& fit,
                                 ComputeType matmul_type, const std::string& what) {
  constexpr double kFree = 1e18;  // the rate of a term whose time the fit put elsewhere
  auto rate = [&](double per_unit) { return per_unit > 0 ? 1.0 / per_unit : kFree; };
  HardwareSpec hw = base;
  hw.placeholder = false;
  hw.roofline = Roofline::kSum;
  hw.efficiency.flops = 1;
  hw.efficiency.memory_bandwidth = 1;
  hw.step_overhead_s = fit.step_overhead_s;
  hw.per_sequence_s = fit.per_sequence_s;
  hw.memory_bandwidth_bytes_per_s = rate(fit.per_byte_s);
  hw.attention_flops_per_s = rate(fit.per_attention_flop_s);
  hw.peak_flops.clear();
  hw.peak_flops[matmul_type] = rate(fit.per_matmul_flop_s);
  std::ostringstream fitted;
  fitted.precision(3);
  fitted << "fitted by `strata plan --calibrate` to " << fit.num_points << " engine steps (" << what
         << "); median error " << fit.median_error * 100 << " %, p90 " << fit.p90_error * 100
         << " %";
  auto source = [&](double per_unit) {
    return per_unit > 0 ? fitted.str()
                        : fitted.str() + "; the fit gave this term no time of its own (1e18)";
  };
  const std::string mm = std::string("peak_flops.") + compute_type_name(matmul_type);
  for (auto it = hw.sources.begin(); it != hw.sources.end();) {
    if (it->first.rfind("peak_flops.", 0) == 0)
      it = hw.sources.erase(it);
    else
      ++it;
  }
  hw.sources[mm] = source(fit.per_matmul_flop_s) +
                   ": the matmul rate of this model's weight type (other types fall back to it)";
  if (matmul_type == ComputeType::kFP8 || matmul_type == ComputeType::kINT8) {
    // A file needs one of bf16 / fp16 / fp32: the measured rate stands for them too.
    hw.peak_flops[ComputeType::kFP32] = hw.peak_flops[matmul_type];
    hw.sources["peak_flops.fp32"] = std::string("the rate measured for ") +
                                    compute_type_name(matmul_type) + " (not measured itself)";
  }
  hw.sources["attention_flops_per_s"] = source(fit.per_attention_flop_s);
  hw.sources["memory_bandwidth_bytes_per_s"] = source(fit.per_byte_s);
  hw.sources["step_overhead_s"] = source(fit.step_overhead_s);
  hw.sources["per_sequence_s"] = source(fit.per_sequence_s);
  hw.sources["roofline"] = "calibrated: compute and memory time add up on this device";
  hw.sources["efficiency.flops"] = "1: the rates are achieved ones";
  hw.sources["efficiency.memory_bandwidth"] = "1: the bandwidth is an achieved one";
  return hw;
}

}  // namespace strata::plan
