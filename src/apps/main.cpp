// strata: the command-line entry point. See `strata --help`.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "apps/command.h"
#include "core/logging.h"

namespace strata::apps {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

bool register_command(Command command) {
  registry().push_back(std::move(command));
  return true;
}

const std::vector<Command>& commands() {
  return registry();
}

namespace {

size_t word_count(const std::string& s) {
  return std::count(s.begin(), s.end(), ' ') + 1;
}

// The command whose (possibly multi-word) name matches the most leading words of argv.
const Command* match_command(const std::vector<std::string>& argv, size_t* consumed) {
  const Command* best = nullptr;
  for (const auto& c : commands()) {
    size_t words = word_count(c.name);
    if (words > argv.size()) continue;
    std::string joined;
    for (size_t i = 0; i < words; ++i) joined += (i ? " " : "") + argv[i];
    if (joined == c.name && (best == nullptr || words > word_count(best->name))) {
      best = &c;
      *consumed = words;
    }
  }
  return best;
}

std::string command_help(const Command& c) {
  OptionSet options;
  c.add_options(options);
  return "usage: strata " + c.name + " " + c.usage + "\n\n" + c.summary + "\n\n" +
         options.help_text();
}

void print_main_help(bool all_options) {
  std::vector<Command> sorted = commands();
  std::sort(sorted.begin(), sorted.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  std::cout << "usage: strata COMMAND [options]\n\n"
               "Strata serves large language models on CPU over an OpenAI-compatible API.\n\n"
               "Commands:\n";
  for (const auto& c : sorted) {
    std::string lhs = "  " + c.name;
    std::cout << lhs << std::string(lhs.size() < 24 ? 24 - lhs.size() : 1, ' ') << c.summary
              << "\n";
  }
  std::cout << "\nRun `strata COMMAND --help` for one command's options.\n";
  if (!all_options) return;
  for (const auto& c : sorted) {
    std::cout << "\n==== strata " << c.name << " ====\n" << command_help(c);
  }
}

}  // namespace

int main_impl(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_main_help(/*all_options=*/!args.empty());
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "version") {
    std::cout << "strata " << STRATA_VERSION << "\n";
    return 0;
  }
  size_t consumed = 0;
  const Command* cmd = match_command(args, &consumed);
  if (cmd == nullptr) {
    std::cerr << "strata: unknown command '" << args[0] << "'. Run `strata --help` for the list.\n";
    return 2;
  }
  std::vector<std::string> rest(args.begin() + consumed, args.end());
  if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
      std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
    std::cout << command_help(*cmd);
    return 0;
  }
  OptionSet options;
  cmd->add_options(options);
  auto parsed = options.parse(rest);
  if (!parsed.ok()) {
    std::cerr << "strata " << cmd->name << ": " << parsed.status().message() << "\n";
    return 2;
  }
  for (const auto& w : parsed->warnings()) STRATA_LOG(WARNING) << w;
  return cmd->run(*parsed);
}

}  // namespace strata::apps

int main(int argc, char** argv) {
  return strata::apps::main_impl(argc, argv);
}
