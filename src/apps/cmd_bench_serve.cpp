// `strata bench serve`: the serving benchmark (see bench/serve.h).
#include <cstdio>
#include <iostream>

#include "apps/command.h"
#include "bench/serve.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& options) {
  bench::add_serve_bench_options(options);
}

int run(const Args& args) {
  auto config = bench::parse_serve_bench_config(args);
  if (!config.ok()) {
    std::cerr << "strata bench serve: " << config.status().message() << "\n";
    return 2;
  }
  return bench::run_serve_bench(*config, stdout);
}

}  // namespace

STRATA_REGISTER_COMMAND(kBenchServe, "bench serve", "[options]",
                        "Benchmark an OpenAI-compatible server (vllm bench serve's options and "
                        "report; sweeps with a table and an SVG chart)",
                        add_options, run);

}  // namespace strata::apps
