// `strata bench fake-server`: a scripted OpenAI-compatible server streaming at fixed delays, for
// measuring benchmark clients (see bench/fake_openai_server.h).
#include <csignal>
#include <cstdio>
#include <iostream>

#include "apps/command.h"
#include "bench/fake_openai_server.h"
#include "net/event_loop.h"

namespace strata::apps {
namespace {

net::EventLoop* g_loop = nullptr;

void on_signal(int) {
  if (g_loop != nullptr) g_loop->stop();
}

void add_options(OptionSet& o) {
  o.add_string("host", "127.0.0.1", "address to listen on");
  o.add_int("port", 8000, "port to listen on (0 picks a free one)");
  o.add_string("model", "fake-model", "model name served on /v1/models");
  o.add_float("ttft-ms", 20, "delay before the first token chunk");
  o.add_float("itl-ms", 5, "delay between token chunks");
  o.add_int("default-max-tokens", 16, "tokens per response when a request gives no max_tokens");
}

int run(const Args& args) {
  auto loop = net::EventLoop::create();
  if (!loop.ok()) {
    std::cerr << "strata bench fake-server: " << loop.status().message() << "\n";
    return 1;
  }
  bench::FakeServerOptions o;
  o.model = args.get("model");
  o.ttft_s = args.get_float("ttft-ms") / 1000.0;
  o.itl_s = args.get_float("itl-ms") / 1000.0;
  o.default_max_tokens = args.get_int("default-max-tokens");
  if (o.ttft_s < 0 || o.itl_s < 0) {
    std::cerr << "strata bench fake-server: --ttft-ms and --itl-ms must not be negative\n";
    return 2;
  }
  bench::FakeOpenAiServer server(loop->get(), o);
  Status s = server.listen(args.get("host"), static_cast<int>(args.get_int("port")));
  if (!s.ok()) {
    std::cerr << "strata bench fake-server: " << s.message() << "\n";
    return 1;
  }
  std::cout << "fake OpenAI server for model '" << o.model << "' listening on http://"
            << args.get("host") << ":" << server.port() << " (TTFT " << o.ttft_s * 1000
            << " ms, ITL " << o.itl_s * 1000 << " ms)" << std::endl;
  g_loop = loop->get();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  (*loop)->run();
  g_loop = nullptr;
  return 0;
}

}  // namespace

STRATA_REGISTER_COMMAND(kBenchFakeServer, "bench fake-server", "[options]",
                        "Run a scripted OpenAI-compatible server that streams at fixed delays "
                        "(for testing benchmark clients)",
                        add_options, run);

}  // namespace strata::apps
