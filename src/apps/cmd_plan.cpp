// `strata plan MODEL_OR_CONFIG --hardware h200x8 [serving flags]`: the memory of a deployment per
// device, and the engine's refusal when it does not fit, before any device is rented
// (plan/deployment.h); with --simulate, its serving speed over a concurrency sweep from the real
// scheduler on a virtual clock and the step cost model (plan/simulator.h, plan/cost_model.h),
// printed as `strata bench serve` prints a sweep.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "apps/command.h"
#include "bench/report.h"
#include "core/file_util.h"
#include "core/strings.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/engine_config.h"
#include "plan/calibrate.h"
#include "plan/deployment.h"
#include "plan/simulator.h"

namespace strata::apps {
namespace {

constexpr const char* kGroup = "Plan";

void add_options(OptionSet& o) {
  engine::add_engine_options(o);
  o.add_string("hardware", "local",
               "the devices: local (this machine: its RAM, and the built-in CPU figures), a "
               "built-in device and count (h100, h200, b200, a100, l20, l40s: h200x8, l20x24) "
               "or a hardware JSON file (docs/plan.md)",
               kGroup);
  o.add_int("tensor-parallel-size", 1, "tensor-parallel ranks", kGroup);
  o.add_int("pipeline-parallel-size", 1, "pipeline stages", kGroup);
  o.add_bool("enable-expert-parallel", false, "experts placed whole over the tensor-parallel ranks",
             kGroup);
  o.add_bool("simulate", false,
             "also simulate serving: the real scheduler on a virtual clock with the step cost "
             "model",
             kGroup);
  o.add_string("workload", "random:in=1024,out=128,n=200",
               "simulated requests: random:in=N,out=M[,range=R][,prefix=P][,n=NUM][,rate=QPS]"
               "[,burstiness=B][,seed=S] (vLLM's random dataset) or sharegpt:path=FILE[,n=NUM]"
               "[,output-len=M][,tokenizer=PATH][,rate=QPS][,burstiness=B][,seed=S] (the "
               "requests bench serve sends from a ShareGPT JSON; lengths from the model's "
               "tokenizer or tokenizer=), with bench serve's arrivals",
               kGroup);
  o.add_string("max-concurrency", "1,8,32",
               "simulated client concurrency levels, comma-separated (a sweep)", kGroup);
  o.add_string("save-sweep", "", "write the simulated sweep as STEM.json and an SVG chart STEM.svg",
               kGroup);
  o.add_bool("calibrate", false,
             "measure this machine through the engine (the model and flags given) and write its "
             "hardware file (--calibrate-output); with --simulate, simulate with it",
             kGroup);
  o.add_string("calibrate-output", "calibrated-local.json",
               "the hardware file --calibrate writes (use it as --hardware FILE)", kGroup);
  o.add_string("calibrate-steps", "",
               "also write every measured step to this CSV file (its batch, its time and the "
               "fitted prediction)",
               kGroup);
  o.add_float("calibrate-budget", 120,
              "seconds --calibrate may spend measuring (larger batches are skipped past it)",
              kGroup);
}

// A folder with a config.json and no weights is planned as its config alone.
void plan_config_only(engine::EngineConfig* c) {
  if (c->model.load_format != "auto" || !is_directory(c->model.model)) return;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(c->model.model, ec)) {
    const std::string n = e.path().filename().string();
    if (ends_with(n, ".safetensors") || ends_with(n, ".gguf") || ends_with(n, ".bin")) return;
  }
  c->model.load_format = "dummy";
}

int fail(const Status& s) {
  std::cerr << "strata plan: " << s.message() << "\n";
  return 2;
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(digits);
  s << v;
  return s.str();
}

// A rate with an SI prefix: "412.3 G".
std::string si(double v) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (v >= 1000 && i < 5) {
    v /= 1000;
    ++i;
  }
  return fixed(v, 1) + " " + prefixes[i];
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

// --calibrate: runs the calibration grid through an engine built from the flags, fits the cost
// model's figures and writes them as a hardware file (plan/calibrate.h).
Result<plan::HardwareSpec> calibrate_local(const Args& args, const plan::Deployment& d,
                                           const plan::ModelShape& shape,
                                           const plan::PrecisionConfig& prec) {
  plan::CalibrationOptions opt;
  opt.budget_s = args.get_float("calibrate-budget");
  if (!(opt.budget_s >= 0)) return invalid_argument("--calibrate-budget must be >= 0 seconds");
  std::cout << "\nCalibrating: timing engine steps of " << d.engine.model.model << "\n";
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> e, engine::Engine::create(d.engine));
  STRATA_ASSIGN_OR_RETURN(std::vector<plan::CalibrationPoint> points,
                          plan::measure_steps(*e, opt, [](const std::string& line) {
                            std::cout << "  " << line << "\n" << std::flush;
                          }));
  e.reset();
  STRATA_ASSIGN_OR_RETURN(plan::CostModel counts,
                          plan::CostModel::create(shape, d.hardware, {}, prec));
  STRATA_ASSIGN_OR_RETURN(plan::CalibrationFit fit, plan::fit_step_times(counts, points));
  if (const std::string csv = args.get("calibrate-steps"); !csv.empty()) {
    std::ostringstream f;
    f << "seconds,predicted,sequences,tokens,sampled,context_tokens,matmul_flops,attention_flops,"
         "bytes\n";
    for (const plan::CalibrationPoint& p : points) {
      const plan::StepCost c = counts.step_cost(p.batch);
      int64_t ctx = 0;
      for (const plan::SequenceWork& w : p.batch) ctx += w.context_len;
      f << p.seconds << "," << fit.predict(c) << "," << p.batch.size() << "," << c.num_tokens << ","
        << c.num_logits_rows << "," << ctx << "," << c.matmul_flops << "," << c.attention_flops
        << "," << c.bytes() << "\n";
    }
    STRATA_RETURN_IF_ERROR(write_file(csv, f.str()));
  }
  const plan::ComputeType mm_type =
      plan::matmul_compute_type(prec.weight_dtype, prec.activation_dtype);
  std::ostringstream what;
  what << d.model.architecture << " "
       << std::filesystem::path(d.engine.model.model).filename().string() << ", "
       << dtype_name(prec.weight_dtype) << " weights, " << d.threads << " threads, "
       << "on " << today_utc();
  STRATA_ASSIGN_OR_RETURN(plan::HardwareSpec base, plan::load_hardware("cpu-xeon-avx512-2core"));
  base.memory_bytes = d.device_memory_bytes;
  base.sources["memory_bytes"] = "available memory when calibrated";
  plan::HardwareSpec hw = plan::calibrated_hardware(base, fit, mm_type, what.str());
  const std::string out = args.get("calibrate-output");
  hw.name = std::filesystem::path(out).stem().string();
  hw.description = "Measured by `strata plan --calibrate` (" + what.str() + ")";
  STRATA_RETURN_IF_ERROR(write_file(out, plan::hardware_to_json(hw)));
  auto rate = [](double per, const char* unit) {
    return per > 0 ? si(1.0 / per) + unit
                   : std::string("no time of its own (the fit put it elsewhere)");
  };
  std::cout << "Fitted to " << fit.num_points << " steps (" << fit.num_dropped
            << " outliers dropped): median error " << fixed(fit.median_error * 100, 1) << " %, p90 "
            << fixed(fit.p90_error * 100, 1) << " %, max " << fixed(fit.max_error * 100, 1)
            << " %\n"
            << "  step overhead " << fixed(fit.step_overhead_s * 1e3, 3) << " ms, per "
            << "sampled sequence " << fixed(fit.per_sequence_s * 1e3, 3) << " ms\n"
            << "  matmuls " << rate(fit.per_matmul_flop_s, "FLOP/s") << ", attention "
            << rate(fit.per_attention_flop_s, "FLOP/s") << ", memory "
            << rate(fit.per_byte_s, "B/s") << "\n"
            << "Wrote " << out << " (use it as --hardware " << out << ")\n";
  if (fit.num_points < 30)
    std::cout << "Note: only " << fit.num_points << " steps were measured (small --max-model-len, "
              << "--max-num-seqs or --calibrate-budget); the figures outside them are guesses\n";
  hw.origin = out;
  return hw;
}

int run(const Args& args) {
  auto cfg = engine::engine_config_from_args(args);
  if (!cfg.ok()) return fail(cfg.status());
  engine::EngineConfig c = std::move(cfg).value();
  plan_config_only(&c);
  plan::Deployment d;
  auto mc = load_model_config(c.model);
  if (!mc.ok()) return fail(mc.status());
  d.model = *mc;
  if (Status s = engine::resolve_engine_config(d.model, &c); !s.ok()) return fail(s);
  d.engine = c;

  const std::string hw = args.get("hardware");
  if (hw == "local") {
    auto cpu = plan::load_hardware("cpu-xeon-avx512-2core");
    if (!cpu.ok()) return fail(cpu.status());
    d.hardware = *cpu;
    d.hardware.name = "local (" + d.hardware.name + " figures)";
    d.device_memory_bytes = engine::available_memory_bytes();
    d.num_devices = 1;
    d.threads = c.threads > 0 ? c.threads : static_cast<int>(ThreadPool::hardware_threads());
  } else {
    auto arg = plan::parse_hardware_arg(hw);
    if (!arg.ok()) return fail(arg.status());
    auto spec = plan::load_hardware(arg->device);
    if (!spec.ok()) return fail(spec.status());
    d.hardware = *spec;
    d.num_devices = arg->count;
    d.device_memory_bytes = d.hardware.memory_bytes;
    d.threads = c.threads > 0 ? c.threads : 1;
  }
  d.parallel.tp = args.get_int("tensor-parallel-size");
  d.parallel.pp = args.get_int("pipeline-parallel-size");
  d.parallel.ep = args.get_bool("enable-expert-parallel") ? d.parallel.tp : 1;
  // The stage split the engine would use (model/parallel.h): STRATA_PP_LAYER_PARTITION.
  if (const char* v = std::getenv("STRATA_PP_LAYER_PARTITION"); v != nullptr)
    d.parallel.layer_partition = v;
  if (d.num_devices == 1 && d.parallel.tp * d.parallel.pp > 1 && hw != "local") {
    d.num_devices = d.parallel.tp * d.parallel.pp;  // "--hardware h200" with --tp 8: 8 of them
  }
  const bool calibrate = args.get_bool("calibrate");
  if (calibrate && hw != "local")
    return fail(
        invalid_argument("--calibrate measures this machine: leave --hardware at local "
                         "(got '" +
                         hw + "')"));
  auto mem = plan::plan_device_memory(d);
  if (!mem.ok()) return fail(mem.status());
  std::cout << plan::format_memory_report(d, *mem);
  if (!mem->plan.ok()) return 1;
  if (!args.get_bool("simulate") && !calibrate) return 0;

  // Serving speed: the cost model of this deployment, the real scheduler on a virtual clock.
  auto shape = plan::model_shape(d.model);
  if (!shape.ok()) return fail(shape.status());
  plan::PrecisionConfig prec;
  int64_t most = -1;
  for (const auto& [name, b] : mem->model_weights.by_dtype)
    if (DType t; parse_dtype(name, &t) && b > most) {
      most = b;
      prec.weight_dtype = t;
    }
  prec.kv_dtype = mem->kv_dtype;
  prec.kv_fp8_ds_mla = mem->kv_fp8_ds_mla;
  // The CPU engine keeps activations in f32 and computes in f32 (weights widened in the kernels).
  if (d.hardware.kind == plan::DeviceKind::kCpu) prec.activation_dtype = DType::kF32;
  if (calibrate) {
    auto hw_file = calibrate_local(args, d, *shape, prec);
    if (!hw_file.ok()) return fail(hw_file.status());
    d.hardware = *hw_file;
    if (!args.get_bool("simulate")) return 0;
  }
  auto cost = plan::CostModel::create(*shape, d.hardware, d.parallel, prec);
  if (!cost.ok()) return fail(cost.status());
  auto spec = plan::parse_workload(args.get("workload"));
  if (!spec.ok()) return fail(spec.status());
  // Prompt lengths are counted with the tokenizer the engine would serve with.
  auto wl = plan::make_workload(*spec, c.tokenizer.empty() ? c.model.model : c.tokenizer);
  if (!wl.ok()) return fail(wl.status());
  const auto& workload = wl->requests;
  plan::SimulationConfig sim;
  sim.scheduler = d.engine.scheduler;
  sim.cache = d.engine.cache;
  sim.num_kv_blocks = mem->plan->num_blocks + 1;
  sim.request_admission_s = d.hardware.request_admission_s;
  plan::SweepOptions so;
  auto levels = parse_int_list(args.get("max-concurrency"));
  if (!levels.ok() || levels->empty())
    return fail(invalid_argument("--max-concurrency expects a comma-separated list, got '" +
                                 args.get("max-concurrency") + "'"));
  so.concurrencies.clear();
  for (int64_t n : *levels) {
    if (n <= 0) return fail(invalid_argument("--max-concurrency values must be positive"));
    so.concurrencies.push_back(n);
  }
  so.input_len = wl->input_len;
  so.output_len = wl->output_len;
  const plan::CostModel& model = *cost;
  // The engine's pipeline overlap (engine.cpp, DistExecutor): up to PP micro-batches in flight
  // (STRATA_PP_MAX_INFLIGHT), none with speculative decoding or KV tiers.
  if (d.parallel.pp > 1 && !d.engine.scheduler.speculative.enabled() &&
      !d.engine.cache.has_kv_tiers()) {
    const char* env = std::getenv("STRATA_PP_MAX_INFLIGHT");
    int64_t depth = d.parallel.pp;
    if (env != nullptr && *env != '\0') {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (*end != '\0' || v < 1)
        return fail(invalid_argument(std::string("STRATA_PP_MAX_INFLIGHT=") + env +
                                     ": expected an integer >= 1"));
      depth = v;
    }
    sim.pipeline_depth = static_cast<int>(depth);
    sim.stage_cost = [&](std::span<const plan::SequenceWork> b) { return model.step_cost(b); };
  }
  auto sweep = plan::simulate_sweep(
      sim, workload, [&](std::span<const plan::SequenceWork> b) { return model.step_time(b); }, so);
  if (!sweep.ok()) return fail(sweep.status());
  std::vector<bench::SweepRow> rows;
  for (const auto& p : *sweep) rows.push_back(p.row);
  std::cout << "\nSimulated serving (" << args.get("workload") << "; step times from the cost "
            << "model of " << d.hardware.name << "):\n"
            << bench::format_sweep_table(rows);
  if (!wl->input_len) {  // lengths vary per request (ShareGPT): say what was simulated
    int64_t in = 0, out = 0;
    for (const auto& r : workload) {
      in += r.prompt_len;
      out += r.output_len;
    }
    const auto n = static_cast<int64_t>(workload.size());
    std::cout << n << " requests, mean prompt " << in / n << " tokens, mean output " << out / n
              << " tokens\n";
  }
  for (const std::string& note : wl->notes) std::cout << "Note: " << note << "\n";
  if (const std::string stem = args.get("save-sweep"); !stem.empty()) {
    Status a = write_file(stem + ".json", bench::sweep_json(rows));
    Status b = write_file(
        stem + ".svg",
        bench::render_sweep_svg(rows, "strata plan: " + d.model.architecture + " on " +
                                          std::to_string(d.num_devices) + " x " + d.hardware.name));
    if (!a.ok() || !b.ok()) return fail(a.ok() ? b : a);
    std::cout << "Saved the sweep to " << stem << ".json and " << stem << ".svg\n";
  }
  return 0;
}

STRATA_REGISTER_COMMAND(plan_command, "plan", "MODEL_OR_CONFIG [options]",
                        "memory per device and simulated serving speed of a deployment, before "
                        "running it",
                        add_options, run);

}  // namespace
}  // namespace strata::apps
