// strata serve MODEL [options]: the OpenAI-compatible server (vLLM's flags). SIGINT/SIGTERM shut
// it down gracefully (exit 0); a second signal exits at once.
#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <thread>

#include "apps/command.h"
#include "core/logging.h"
#include "engine/engine.h"  // EngineConfig and its options
#include "net/event_loop.h"
#include "server/openai_server.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& o) {
  server::add_server_options(o);
  engine::add_engine_options(o);
}

// Waits for SIGINT/SIGTERM (blocked in every thread) and starts the shutdown; SIGUSR1 ends it.
void signal_loop(server::OpenAiServer* server, net::EventLoop* loop) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  bool shutting_down = false;
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGUSR1) return;
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
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto client = engine::EngineClient::create(*ecfg);
  if (!client.ok()) {
    std::cerr << "strata serve: " << client.status().message() << "\n";
    return 1;
  }
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
  (*loop)->run();
  pthread_kill(signals.native_handle(), SIGUSR1);
  signals.join();
  server->reset();
  client->reset();
  STRATA_LOG(INFO) << "server stopped";
  return 0;
}

STRATA_REGISTER_COMMAND(kServe, "serve", "MODEL [options]",
                        "serve a model over the OpenAI API (vLLM's flags)", add_options, run);

}  // namespace
}  // namespace strata::apps
