#include "core/options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/check.h"

namespace strata {

namespace {

std::string normalize(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

bool parse_bool_text(const std::string& v, bool* out) {
  std::string t = v;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "1" || t == "true" || t == "yes" || t == "on")
    *out = true;
  else if (t == "0" || t == "false" || t == "no" || t == "off")
    *out = false;
  else
    return false;
  return true;
}

Status check_value(const OptionSpec& spec, const std::string& value) {
  switch (spec.kind) {
    case OptionKind::kInt: {
      auto r = parse_int(value, "--" + spec.name);
      return r.ok() ? ok_status() : r.status();
    }
    case OptionKind::kFloat: {
      auto r = parse_float(value, "--" + spec.name);
      return r.ok() ? ok_status() : r.status();
    }
    case OptionKind::kBool: {
      bool b;
      if (!parse_bool_text(value, &b))
        return invalid_argument("--" + spec.name + " expects true or false, got '" + value + "'");
      return ok_status();
    }
    case OptionKind::kString:
      return ok_status();
  }
  return ok_status();
}

}  // namespace

std::string OptionSet::env_name(const std::string& option_name) {
  std::string e = "STRATA_";
  for (char c : option_name) e += (c == '-') ? '_' : static_cast<char>(std::toupper(c));
  return e;
}

OptionSet& OptionSet::add(OptionSpec spec) {
  spec.name = normalize(spec.name);
  STRATA_CHECK(specs_.count(spec.name) == 0) << "option --" << spec.name << " declared twice";
  order_.push_back(spec.name);
  specs_[spec.name] = std::move(spec);
  return *this;
}

OptionSet& OptionSet::add_string(const std::string& name, const std::string& def,
                                 const std::string& help, const std::string& group) {
  return add({.name = name,
              .kind = OptionKind::kString,
              .default_value = def,
              .help = help,
              .group = group});
}
OptionSet& OptionSet::add_int(const std::string& name, int64_t def, const std::string& help,
                              const std::string& group) {
  return add({.name = name,
              .kind = OptionKind::kInt,
              .default_value = std::to_string(def),
              .help = help,
              .group = group});
}
OptionSet& OptionSet::add_float(const std::string& name, double def, const std::string& help,
                                const std::string& group) {
  std::ostringstream os;
  os << def;
  return add({.name = name,
              .kind = OptionKind::kFloat,
              .default_value = os.str(),
              .help = help,
              .group = group});
}
OptionSet& OptionSet::add_bool(const std::string& name, bool def, const std::string& help,
                               const std::string& group) {
  return add({.name = name,
              .kind = OptionKind::kBool,
              .default_value = def ? "true" : "false",
              .help = help,
              .group = group});
}
OptionSet& OptionSet::add_ignored(const std::string& name, bool takes_value,
                                  const std::string& reason, const std::string& group) {
  return add({.name = name,
              .kind = takes_value ? OptionKind::kString : OptionKind::kBool,
              .default_value = "",
              .help = "accepted, no effect: " + reason,
              .group = group,
              .repeated = true,
              .ignored_reason = reason});
}

const OptionSpec* OptionSet::find(const std::string& name) const {
  auto it = specs_.find(normalize(name));
  return it == specs_.end() ? nullptr : &it->second;
}

Result<Args> OptionSet::parse(const std::vector<std::string>& argv) const {
  Args args;
  args.set_ = this;
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (only_positional || a.size() < 2 || a[0] != '-' || a == "-" ||
        (a[1] != '-' && !std::isalpha(static_cast<unsigned char>(a[1])))) {
      args.positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    if (a[1] != '-') return invalid_argument("unknown option '" + a + "' (options start with --)");
    std::string body = a.substr(2), value;
    bool has_value = false;
    if (auto eq = body.find('='); eq != std::string::npos) {
      value = body.substr(eq + 1);
      body = body.substr(0, eq);
      has_value = true;
    }
    std::string name = normalize(body);
    const OptionSpec* spec = find(name);
    bool negated = false;
    if (spec == nullptr && name.rfind("no-", 0) == 0) {
      spec = find(name.substr(3));
      if (spec != nullptr && spec->kind == OptionKind::kBool) {
        negated = true;
        name = name.substr(3);
      } else {
        spec = nullptr;
      }
    }
    if (spec == nullptr) {
      return invalid_argument("unknown option '--" + body + "'; run with --help for the list");
    }
    if (spec->kind == OptionKind::kBool) {
      if (negated) {
        if (has_value) return invalid_argument("--no-" + name + " takes no value");
        value = "false";
      } else if (!has_value) {
        // Also accept "--flag true" / "--flag false" as a separate word.
        bool b;
        if (i + 1 < argv.size() && parse_bool_text(argv[i + 1], &b) &&
            spec->ignored_reason.empty()) {
          value = argv[++i];
        } else {
          value = "true";
        }
      }
    } else if (!has_value) {
      if (i + 1 >= argv.size()) return invalid_argument("option --" + name + " needs a value");
      value = argv[++i];
    }
    if (!spec->ignored_reason.empty()) {
      args.warnings_.push_back("--" + name +
                               " is accepted but has no effect: " + spec->ignored_reason);
      continue;
    }
    STRATA_RETURN_IF_ERROR(check_value(*spec, value));
    auto& slot = args.values_[name];
    if (!spec->repeated) slot.clear();
    slot.push_back(value);
  }
  // Environment variables fill options not given on the command line.
  for (const auto& [name, spec] : specs_) {
    if (!spec.ignored_reason.empty() || args.values_.count(name)) continue;
    if (const char* env = std::getenv(env_name(name).c_str()); env != nullptr) {
      Status s = check_value(spec, env);
      if (!s.ok()) return s.with_context("environment variable " + env_name(name));
      args.values_[name].push_back(env);
    }
  }
  return args;
}

std::string OptionSet::help_text() const {
  std::vector<std::string> groups;
  for (const auto& name : order_) {
    const auto& g = specs_.at(name).group;
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
  }
  std::ostringstream os;
  for (const auto& g : groups) {
    os << g << ":\n";
    for (const auto& name : order_) {
      const OptionSpec& s = specs_.at(name);
      if (s.group != g) continue;
      std::string lhs = "  --" + name;
      if (s.kind == OptionKind::kBool) {
        if (s.ignored_reason.empty()) lhs += ", --no-" + name;
      } else {
        std::string mv = s.metavar;
        if (mv.empty()) {
          mv = s.kind == OptionKind::kInt ? "N" : s.kind == OptionKind::kFloat ? "X" : "VALUE";
        }
        lhs += " " + mv;
      }
      os << lhs;
      if (lhs.size() < 38)
        os << std::string(38 - lhs.size(), ' ');
      else
        os << "\n" << std::string(38, ' ');
      os << s.help;
      if (s.ignored_reason.empty()) {
        os << " (default: " << (s.default_value.empty() ? "none" : s.default_value) << "; env "
           << env_name(name) << ")";
      }
      os << "\n";
    }
    os << "\n";
  }
  return os.str();
}

bool Args::is_set(const std::string& name) const {
  return values_.count(normalize(name)) != 0;
}

std::string Args::get(const std::string& name) const {
  std::string n = normalize(name);
  auto it = values_.find(n);
  if (it != values_.end() && !it->second.empty()) return it->second.back();
  const OptionSpec* spec = set_ ? set_->find(n) : nullptr;
  STRATA_CHECK(spec != nullptr) << "option --" << n << " was never declared";
  return spec->default_value;
}

int64_t Args::get_int(const std::string& name) const {
  auto r = parse_int(get(name), "--" + name);
  STRATA_CHECK(r.ok()) << r.status().to_string();
  return *r;
}

double Args::get_float(const std::string& name) const {
  auto r = parse_float(get(name), "--" + name);
  STRATA_CHECK(r.ok()) << r.status().to_string();
  return *r;
}

bool Args::get_bool(const std::string& name) const {
  bool b = false;
  STRATA_CHECK(parse_bool_text(get(name), &b)) << "--" << name << " is not a boolean";
  return b;
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  auto it = values_.find(normalize(name));
  if (it != values_.end()) return it->second;
  std::string d = get(name);
  if (d.empty()) return {};
  return {d};
}

Result<int64_t> parse_int(const std::string& text, const std::string& what) {
  if (text.empty()) return invalid_argument(what + " expects an integer, got an empty value");
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0')
    return invalid_argument(what + " expects an integer, got '" + text + "'");
  return static_cast<int64_t>(v);
}

Result<double> parse_float(const std::string& text, const std::string& what) {
  if (text.empty()) return invalid_argument(what + " expects a number, got an empty value");
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(v))
    return invalid_argument(what + " expects a number, got '" + text + "'");
  return v;
}

Result<std::vector<int64_t>> parse_int_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    STRATA_ASSIGN_OR_RETURN(int64_t v, parse_int(item, "list item"));
    out.push_back(v);
  }
  return out;
}

Result<std::vector<double>> parse_float_list(const std::string& text) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    STRATA_ASSIGN_OR_RETURN(double v, parse_float(item, "list item"));
    out.push_back(v);
  }
  return out;
}

Result<int64_t> parse_byte_size(const std::string& text, const std::string& what) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return invalid_argument(what + " expects a size like 4GiB, got '" + text + "'");
  STRATA_ASSIGN_OR_RETURN(double v, parse_float(text.substr(0, i), what));
  std::string unit = text.substr(i);
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  double mult;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "k" || unit == "kib")
    mult = 1024.0;
  else if (unit == "kb")
    mult = 1e3;
  else if (unit == "m" || unit == "mib")
    mult = 1024.0 * 1024;
  else if (unit == "mb")
    mult = 1e6;
  else if (unit == "g" || unit == "gib")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "gb")
    mult = 1e9;
  else if (unit == "t" || unit == "tib")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "tb")
    mult = 1e12;
  else
    return invalid_argument(what + ": unknown size unit '" + unit + "' in '" + text + "'");
  // 2^63 bytes and more do not fit a byte count (llround's result would be unspecified).
  if (!(v * mult < 9223372036854775808.0))
    return invalid_argument(what + " '" + text + "' is too large");
  return static_cast<int64_t>(std::llround(v * mult));
}

}  // namespace strata
