// strata serve MODEL [options]: the OpenAI-compatible server (vLLM's flags). SIGINT/SIGTERM shut
// it down gracefully (exit 0); a second signal exits at once.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "apps/command.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "core/strings.h"
#include "dist/deployment.h"
#include "engine/engine.h"  // EngineConfig and its options
#include "net/event_loop.h"
#include "server/openai_server.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& o) {
  server::add_server_options(o);
  engine::add_engine_options(o);
  dist::add_parallel_options(o);
}

// A rank of a multi-process deployment failed: g_failure says why, and the signal thread (once
// it runs) gets SIGUSR2. Guarded by g_failure_mu.
std::mutex g_failure_mu;
std::string g_failure;
bool g_signal_thread_started = false;
pthread_t g_signal_thread;

void on_rank_failure(const Status& why) {
  std::lock_guard<std::mutex> lock(g_failure_mu);
  g_failure = why.message();
  if (g_signal_thread_started) pthread_kill(g_signal_thread, SIGUSR2);
}

// Testing aid: with STRATA_DEBUG_HOLD_AFTER_FAILURE_FILE=PATH a server whose ranks failed keeps
// answering (/health: 503) until PATH exists, so a test can see the unhealthy state before the
// exit. Never set in production.
void hold_after_failure() {
  const char* path = std::getenv("STRATA_DEBUG_HOLD_AFTER_FAILURE_FILE");
  if (path == nullptr || *path == '\0') return;
  STRATA_LOG(WARNING) << "STRATA_DEBUG_HOLD_AFTER_FAILURE_FILE is set: waiting for " << path
                      << " before stopping (a testing aid)";
  while (!file_exists(path)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// Waits for SIGINT/SIGTERM (blocked in every thread) and starts the shutdown; SIGUSR1 ends it.
// SIGUSR2: a rank failed (g_failure): the server shuts down and the process exits non-zero.
void signal_loop(server::OpenAiServer* server, net::EventLoop* loop) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  bool shutting_down = false;
  for (;;) {
    siginfo_t info{};
    const int sig = sigwaitinfo(&set, &info);
    if (sig < 0) continue;
    // SIGUSR1/SIGUSR2 are this process's own wake-ups (pthread_kill): one from outside (mpirun
    // and schedulers pass these on to the ranks) is not a rank failure and ends nothing.
    if ((sig == SIGUSR1 || sig == SIGUSR2) && info.si_pid != getpid()) {
      STRATA_LOG(WARNING) << "ignoring " << (sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2")
                          << " from outside (process " << info.si_pid << ")";
      continue;
    }
    if (sig == SIGUSR1) return;
    if (sig == SIGUSR2) {
      {
        std::lock_guard<std::mutex> lock(g_failure_mu);
        STRATA_LOG(ERROR) << "stopping the server: " << g_failure;
      }
      hold_after_failure();
      if (!shutting_down) server->shutdown([loop] { loop->stop(); });
      shutting_down = true;
      continue;
    }
    if (shutting_down) {
      STRATA_LOG(WARNING) << "second " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
                          << ": exiting now without waiting for requests";
      std::_Exit(1);
    }
    shutting_down = true;
    STRATA_LOG(INFO) << "received " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
                     << ": shutting down gracefully (send it again to exit at once)";
    server->shutdown([loop] { loop->stop(); });
  }
}

// Testing aid (docs/server.md): with STRATA_DEBUG_STEP_LIMIT_FILE=PATH the engine runs no step
// beyond the number PATH holds (EngineClient::set_step_limit; negative, empty or missing: no
// limit). The file is read at start-up and re-read every 10 ms; each new value is applied and
// logged. Tests write it atomically (a temporary file renamed over it).
class StepLimitFile {
 public:
  StepLimitFile(std::string path, engine::EngineClient* engine)
      : path_(std::move(path)), engine_(engine) {
    STRATA_LOG(WARNING) << "STRATA_DEBUG_STEP_LIMIT_FILE is set: engine steps are limited by the "
                           "number in "
                        << path_ << " (a testing aid; never use it in production)";
    apply();
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::milliseconds(10), [this] { return stop_; })) {
        lock.unlock();
        apply();
        lock.lock();
      }
    });
  }
  ~StepLimitFile() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void apply() {
    int64_t limit = -1;
    auto text = read_file(path_);
    if (text.ok()) {
      std::string_view t = trim(*text);
      if (!t.empty()) {
        auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), limit);
        if (ec != std::errc() || end != t.data() + t.size()) return;  // keep the last value
      }
    }
    if (limit < 0) limit = -1;
    if (applied_ && limit == last_) return;
    applied_ = true;
    last_ = limit;
    engine_->set_step_limit(limit);
    STRATA_LOG(INFO) << "debug step limit set to " << limit
                     << " (steps run so far: " << engine_->steps_run() << ")";
  }

  std::string path_;
  engine::EngineClient* engine_;
  bool applied_ = false;
  int64_t last_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

int run(const Args& args) {
  auto ecfg = engine::engine_config_from_args(args);
  if (!ecfg.ok()) {
    std::cerr << "strata serve: " << ecfg.status().message() << "\n";
    return 2;
  }
  std::vector<std::string> warnings;
  auto scfg = server::server_config_from_args(args, &warnings);
  if (!scfg.ok()) {
    std::cerr << "strata serve: " << scfg.status().message() << "\n";
    return 2;
  }
  for (const auto& w : warnings) STRATA_LOG(WARNING) << w;
  scfg->version = STRATA_VERSION;
  // Several ranks: this process may be the launcher or a rank > 0, done when this returns.
  dist::DistStart dist = dist::start_distributed(args, &*ecfg, "strata serve");
  if (dist.exit_code) return *dist.exit_code;
  auto finish = [&](int code) { return dist.deployment ? dist.deployment->finish(code) : code; };

  // A shell starts background jobs with SIGINT ignored, and an ignored signal is discarded even
  // when blocked: install a (never run) handler so sigwait() sees it.
  struct sigaction sa {};
  sa.sa_handler = [](int) {};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // Every thread created from here on (engine, compute pool, HTTP loop) inherits the blocked
  // signals; only signal_loop receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Result<std::unique_ptr<engine::EngineClient>> client = internal_error("no engine");
  if (dist.deployment) {
    auto engine = engine::Engine::create(*ecfg, dist.deployment->executor_factory(on_rank_failure));
    if (engine.ok())
      client = engine::EngineClient::start(std::move(engine).value());
    else
      client = engine.status();
  } else {
    client = engine::EngineClient::create(*ecfg);
  }
  if (!client.ok()) {
    std::cerr << "strata serve: " << client.status().message() << "\n";
    return 1;
  }
  std::unique_ptr<StepLimitFile> step_limit;
  if (const char* path = std::getenv("STRATA_DEBUG_STEP_LIMIT_FILE"); path && *path)
    step_limit = std::make_unique<StepLimitFile>(path, client->get());
  auto loop = net::EventLoop::create();
  if (!loop.ok()) {
    std::cerr << "strata serve: " << loop.status().message() << "\n";
    return 1;
  }
  auto server = server::OpenAiServer::create(std::move(scfg).value(), client->get(), loop->get());
  if (!server.ok()) {
    std::cerr << "strata serve: " << server.status().message() << "\n";
    return 1;
  }
  if (Status s = (*server)->start(); !s.ok()) {
    std::cerr << "strata serve: cannot listen: " << s.message() << "\n";
    return 1;
  }
  std::thread signals(signal_loop, server->get(), loop->get());
  {
    // A failure before the signal thread ran is passed on now.
    std::lock_guard<std::mutex> lock(g_failure_mu);
    g_signal_thread = signals.native_handle();
    g_signal_thread_started = true;
    if (!g_failure.empty()) pthread_kill(g_signal_thread, SIGUSR2);
  }
  (*loop)->run();
  {
    std::lock_guard<std::mutex> lock(g_failure_mu);
    g_signal_thread_started = false;
    pthread_kill(signals.native_handle(), SIGUSR1);
  }
  signals.join();
  server->reset();
  step_limit.reset();
  client->reset();
  if (dist.deployment && dist.deployment->failed()) {
    std::lock_guard<std::mutex> lock(g_failure_mu);
    STRATA_LOG(ERROR) << "server stopped after a rank failed: " << g_failure;
    std::cerr << "strata serve: " << g_failure << "\n";
  } else {
    STRATA_LOG(INFO) << "server stopped";
  }
  return finish(0);
}

STRATA_REGISTER_COMMAND(kServe, "serve", "MODEL [options]",
                        "serve a model over the OpenAI API (vLLM's flags)", add_options, run);

}  // namespace
}  // namespace strata::apps
