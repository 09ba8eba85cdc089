// Command-line options declared once: name (vLLM's spelling), kind, default, help and the
// environment variable STRATA_<NAME>. Precedence: command line > environment > default.
// Accepted forms: --name value, --name=value, --name_with_underscores, and for booleans --name /
// --no-name / --name=true|false. `strata <cmd> --help` prints every option with its default.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace strata {

enum class OptionKind { kString, kInt, kFloat, kBool };

struct OptionSpec {
  std::string name;  // without leading dashes: "max-num-seqs"
  OptionKind kind = OptionKind::kString;
  std::string default_value;  // text form; empty = no default
  std::string help;
  std::string group = "Options";
  bool repeated = false;  // may be given several times; values are collected in order
  // Accepted for compatibility but has no effect here: parsing warns once with this reason.
  std::string ignored_reason;
  std::string metavar;  // shown in --help ("N", "PATH", ...)
};

class Args;

class OptionSet {
 public:
  OptionSet& add(OptionSpec spec);
  OptionSet& add_string(const std::string& name, const std::string& def, const std::string& help,
                        const std::string& group = "Options");
  OptionSet& add_int(const std::string& name, int64_t def, const std::string& help,
                     const std::string& group = "Options");
  OptionSet& add_float(const std::string& name, double def, const std::string& help,
                       const std::string& group = "Options");
  OptionSet& add_bool(const std::string& name, bool def, const std::string& help,
                      const std::string& group = "Options");
  // A flag accepted and ignored with a warning (see OptionSpec::ignored_reason).
  // `takes_value` says whether it consumes a value.
  OptionSet& add_ignored(const std::string& name, bool takes_value, const std::string& reason,
                         const std::string& group = "Accepted for compatibility");

  bool has(const std::string& name) const { return specs_.count(name) != 0; }
  const OptionSpec* find(const std::string& name) const;

  // Parses `argv` (options and positionals, without the program/command name).
  // Unknown options, missing values and values of the wrong type are errors naming the option.
  Result<Args> parse(const std::vector<std::string>& argv) const;

  // One line per option: "  --name VALUE   help (default: X) [env STRATA_NAME]", grouped.
  std::string help_text() const;

  static std::string env_name(const std::string& option_name);

 private:
  std::map<std::string, OptionSpec> specs_;
  std::vector<std::string> order_;
};

class Args {
 public:
  const std::vector<std::string>& positional() const { return positional_; }
  // True when given on the command line or in the environment.
  bool is_set(const std::string& name) const;
  std::string get(const std::string& name) const;  // value (last one) or default
  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  std::vector<std::string> get_all(const std::string& name) const;  // every value given
  // Warnings produced while parsing (ignored flags); the caller logs them.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  friend class OptionSet;
  const OptionSet* set_ = nullptr;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
  std::vector<std::string> warnings_;
};

// Helpers for list-valued options: "1,403,407" -> {1, 403, 407}.
Result<std::vector<int64_t>> parse_int_list(const std::string& text);
Result<std::vector<double>> parse_float_list(const std::string& text);
Result<int64_t> parse_int(const std::string& text, const std::string& what);
Result<double> parse_float(const std::string& text, const std::string& what);
// Parses byte sizes: "4096", "512MiB", "4GB", "2G", "1.5GiB".
Result<int64_t> parse_byte_size(const std::string& text, const std::string& what);

}  // namespace strata
