#include "dist/deployment.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "core/logging.h"
#include "model/model_config.h"

namespace strata::dist {
namespace {

int64_t routed_experts(const ModelConfig& mc) {
  if (mc.raw == nullptr) return 0;
  for (const char* key : {"n_routed_experts", "num_local_experts", "num_experts"}) {
    auto it = mc.raw->find(key);
    if (it != mc.raw->end() && it->is_number_integer()) return it->get<int64_t>();
  }
  return 0;
}

double start_timeout_seconds(double timeout) {
  const char* v = std::getenv("STRATA_DIST_START_TIMEOUT");
  if (v != nullptr && *v != '\0') {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (end != v && *end == '\0' && t > 0 && t <= 1e6) return t;  // else the default
  }
  return std::max(600.0, timeout);
}

DistStart done(int code) {
  DistStart s;
  s.exit_code = code;
  return s;
}

}  // namespace

Deployment::~Deployment() {
  // A rank 0 that returns early (an error while starting) ends the job: the other ranks would
  // otherwise wait for it until their start-up deadline.
  if (world_ != nullptr && !finished_) {
    report_exit_code(1);
    world_->abort(1);
  }
}

RankReport Deployment::report_for(engine::Worker& worker) const {
  RankReport r;
  r.num_blocks = worker.info().memory.num_blocks;
  r.state_slots = static_cast<int32_t>(worker.info().memory.num_state_slots);
  r.snapshot_slots = static_cast<int32_t>(worker.info().memory.num_snapshot_slots);
  r.weight_bytes = worker.model().weight_bytes_total();
  r.first_layer = parallel_.first_layer;
  r.end_layer = parallel_.end_layer;
  if (options_.enable_expert_parallel && num_experts_ > 0) {
    const ShardRange e = shard_range(num_experts_, parallel_.tp_size, parallel_.tp_rank);
    r.first_expert = e.begin;
    r.end_expert = e.end;
  }
  r.threads = worker.info().threads;
  std::strncpy(r.interface, interface_.c_str(), sizeof(r.interface) - 1);
  return r;
}

engine::ExecutorFactory Deployment::executor_factory(
    std::function<void(const Status&)> on_failure) {
  return [this, on_failure = std::move(on_failure)](
             const engine::WorkerConfig& config) -> Result<std::unique_ptr<engine::Executor>> {
    engine::WorkerConfig wc = config;
    wc.parallel = parallel_;
    // While this rank loads its own shard it waits on nobody: the keep-alive thread watches the
    // others meanwhile, so a rank lost during the loads is named within the timeout, not after
    // this rank's load.
    world_->watch([this](const std::string& lost) {
      STRATA_LOG(ERROR) << "waiting for every rank to load: " << lost << "; ending the job";
      report_exit_code(1);
      world_->abort(1);
    });
    auto worker = engine::Worker::create(wc);
    world_->watch(nullptr);
    if (!worker.ok()) return worker.status();
    auto reports = exchange_reports(world_->world(), report_for(**worker));
    if (!reports.ok()) return reports.status().with_context("waiting for every rank to load");
    world_->set_timeout(timeout_);
    STRATA_LOG(INFO) << "tensor parallel " << parallel_.tp_size << " x pipeline parallel "
                     << parallel_.pp_size
                     << (options_.enable_expert_parallel ? " with expert parallelism" : "")
                     << "; network interface " << interface_choice_ << "; timeout " << timeout_
                     << " s\n"
                     << format_world_table(world_->world(), *reports);
    DistExecutorOptions eo;
    eo.heartbeat_seconds = std::clamp(timeout_ / 6, 0.1, 5.0);
    STRATA_ASSIGN_OR_RETURN(auto exec,
                            DistExecutor::create(&world_->world(), std::move(worker).value(),
                                                 std::move(reports).value(), eo));
    exec->set_failure_callback([this, on_failure](const Status& s) {
      failed_ = true;
      if (on_failure) on_failure(s);
    });
    executor_ = exec.get();
    return std::unique_ptr<engine::Executor>(std::move(exec));
  };
}

int Deployment::finish(int code) {
  if (failed_) {
    STRATA_LOG(ERROR) << "ending every rank after the failure (exit code 1)";
    report_exit_code(1);
    world_->abort(1);
  }
  report_exit_code(code);
  finished_ = true;
  return code;
}

int Deployment::run_worker(const engine::EngineConfig& config) {
  const std::string me = world_->world().describe_rank(world_->rank());
  auto fail = [&](const Status& s, const char* what) {
    STRATA_LOG(ERROR) << me << ": " << what << ": " << s.message() << "; ending the job";
    world_->abort(1);
  };
  auto wc = engine::resolve_worker_config(config);
  if (!wc.ok()) fail(wc.status(), "cannot start");
  wc->parallel = parallel_;
  auto worker = engine::Worker::create(*wc);
  if (!worker.ok()) fail(worker.status(), "cannot load the model");
  auto reports = exchange_reports(world_->world(), report_for(**worker));
  if (!reports.ok()) fail(reports.status(), "waiting for every rank to load");
  world_->set_timeout(timeout_);
  Status s = run_worker_loop(world_->world(), **worker);
  if (!s.ok()) fail(s, "stopped");
  worker->reset();
  finished_ = true;
  world_.reset();  // MPI_Finalize
  return 0;
}

DistStart start_distributed(const Args& args, engine::EngineConfig* config, const char* command) {
  auto options = parallel_options_from_args(args);
  if (!options.ok()) {
    std::cerr << command << ": " << options.status().message() << "\n";
    return done(2);
  }
  const LaunchEnv env = detect_launch_env();
  const int n = options->world_size();
  if (n == 1 && env.world_size == 1) return {};
  if (!have_mpi()) {
    std::cerr << command << ": --tensor-parallel-size x --pipeline-parallel-size = " << n
              << " ranks, but this build has no MPI: run scripts/install-deps.sh (it installs "
                 "OpenMPI) and rebuild\n";
    return done(2);
  }
  if (!env.under_launcher()) return done(self_launch(*options));
  report_started();
  // Errors before MPI starts: every rank prints them; rank 0 reports the code to a self-launcher.
  auto early = [&](int code) {
    if (env.world_rank == 0) report_exit_code(code);
    return done(code);
  };
  if (env.world_size != n) {
    std::cerr << command << ": " << env.launcher << " started " << env.world_size
              << " ranks, but --tensor-parallel-size " << options->tensor_parallel_size
              << " x --pipeline-parallel-size " << options->pipeline_parallel_size << " = " << n
              << ": start " << n << " ranks (mpirun -np " << n << ") or change the sizes\n";
    return early(2);
  }
  // The ranks on one host share its cores and memory: each takes its share of the cores (unless
  // --threads says) and of the memory --gpu-memory-utilization gives (--kv-cache-memory is per
  // rank, as vLLM's is per GPU).
  if (config->threads == 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    config->threads = std::max(1, cores / env.local_size);
  }
  config->cache.gpu_memory_utilization /= env.local_size;
  std::string chosen, why;
  {
    auto c = choose_rank_interface(options->interface, &why);
    if (!c.ok()) {
      std::cerr << command << ": " << c.status().message() << "\n";
      return early(2);
    }
    chosen = *c;
    if (Status s = use_interface(chosen); !s.ok()) {
      std::cerr << command << ": " << s.message() << "\n";
      return early(2);
    }
  }
  auto timeout = dist_timeout_seconds();
  if (!timeout.ok()) {
    std::cerr << command << ": " << timeout.status().message() << "\n";
    return early(2);
  }
  // The model's layer count before MPI starts: a bad model path is an error on every rank alike.
  auto mc = load_model_config(config->model);
  if (!mc.ok()) {
    std::cerr << command << ": " << mc.status().message() << "\n";
    return early(2);
  }
  auto ranges = pipeline_layer_ranges(
      mc->num_hidden_layers, options->pipeline_parallel_size,
      std::getenv("STRATA_PP_LAYER_PARTITION") ? std::getenv("STRATA_PP_LAYER_PARTITION") : "");
  if (!ranges.ok()) {
    std::cerr << command << ": " << ranges.status().message() << "\n";
    return early(2);
  }

  std::unique_ptr<Deployment> d(new Deployment());
  d->options_ = *options;
  d->interface_choice_ =
      chosen.empty() ? "chosen by OpenMPI (" + why + ")" : chosen + " (" + why + ")";
  d->timeout_ = *timeout;
  d->start_timeout_ = start_timeout_seconds(*timeout);
  d->num_experts_ = routed_experts(*mc);
  // MPI_Init starts OpenMPI's own threads: they must not take the signals the command handles
  // (SIGINT/SIGTERM for a graceful stop, SIGUSR1/SIGUSR2 for its own wake-ups), or a signal
  // aimed at the process could land there. They inherit this thread's mask, blocked here around
  // the call.
  sigset_t blocked, previous;
  sigemptyset(&blocked);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2}) sigaddset(&blocked, sig);
  pthread_sigmask(SIG_BLOCK, &blocked, &previous);
  // Reaching every rank (the host exchange, the groups' split) gets the ordinary timeout: a rank
  // that cannot be reached at start is named within it, not after the long load allowance.
  auto world = MpiWorld::init(d->timeout_);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (!world.ok()) {
    std::cerr << command << ": " << world.status().message() << "\n";
    return early(1);
  }
  d->world_ = std::move(world).value();
  d->parallel_.tp_size = options->tensor_parallel_size;
  d->parallel_.pp_size = options->pipeline_parallel_size;
  d->parallel_.expert_parallel = options->enable_expert_parallel;
  if (Status s = d->world_->split(&d->parallel_); !s.ok()) {
    std::cerr << command << ": " << s.message() << "\n";
    d->world_->abort(1);
  }
  d->parallel_.first_layer = (*ranges)[d->parallel_.pp_rank].begin;
  d->parallel_.end_layer = (*ranges)[d->parallel_.pp_rank].end;
  // Every rank answered; now each loads its shard, and the slowest load bounds the next wait.
  // With the keep-alive, a rank that dies while loading is named after the ordinary timeout and
  // a live one is waited for up to the start allowance; without it, every wait gets the allowance.
  // After the load the allowance stays the bound on a wait for a live but busy rank (a later
  // pipeline stage's long forward).
  if (d->world_->has_keep_alive()) {
    d->world_->set_wait_limit(d->start_timeout_);
  } else {
    d->world_->set_timeout(d->start_timeout_);
  }
  if (d->world_->rank() == 0) {
    auto sec = [](double t) {
      std::ostringstream o;
      o << t << " s";
      return o.str();
    };
    STRATA_LOG(INFO) << "all " << n << " ranks started; loading the shards ("
                     << (d->world_->has_keep_alive()
                             ? "a rank silent for " + sec(d->timeout_) +
                                   " is taken for lost, a live one waited for up to " +
                                   sec(d->start_timeout_) + ")"
                             : "waiting up to " + sec(d->start_timeout_) + ")");
  }

  // The interface each rank reaches rank 0 over (ranks on rank 0's host: shared memory).
  const auto& hosts = d->world_->hosts();
  const int rank = d->world_->rank();
  std::string towards;
  if (rank == 0) {
    for (const auto& h : hosts)
      if (h != hosts[0]) {
        towards = h;
        break;
      }
  } else if (hosts[rank] != hosts[0]) {
    towards = hosts[0];
  }
  if (towards.empty())
    d->interface_ = "shared memory";
  else if (!chosen.empty())
    d->interface_ = chosen;
  else
    d->interface_ = interface_towards(towards);

  if (rank != 0) {
    const int code = d->run_worker(*config);
    d.reset();
    return done(code);
  }
  if (const char* dir = std::getenv("STRATA_DIST_RUN_DIR"); dir != nullptr && *dir != '\0') {
    // Written whole, then renamed: the launching process reads it while it waits.
    const std::string path = std::string(dir) + "/rank0.pid";
    if (write_file(path + ".tmp", std::to_string(getpid()) + "\n").ok())
      std::rename((path + ".tmp").c_str(), path.c_str());
  }
  DistStart s;
  s.deployment = std::move(d);
  return s;
}

}  // namespace strata::dist
