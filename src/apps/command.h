// The `strata` CLI's sub-command registry. Each apps/cmd_*.cpp file registers its commands with
// STRATA_REGISTER_COMMAND; main() picks the longest matching name ("bench latency" before
// "bench"), parses the command's options and calls it.
#pragma once

#include <string>
#include <vector>

#include "core/options.h"

namespace strata::apps {

struct Command {
  std::string name;     // "generate", "bench latency"
  std::string usage;    // "MODEL [options]"
  std::string summary;  // one line for `strata --help`
  void (*add_options)(OptionSet& options);
  int (*run)(const Args& args);  // process exit code
};

bool register_command(Command command);
const std::vector<Command>& commands();

}  // namespace strata::apps

#define STRATA_REGISTER_COMMAND(var, ...) \
  static const bool var = ::strata::apps::register_command(::strata::apps::Command{__VA_ARGS__})
