#include "plan/hardware.h"

#include <algorithm>
#include <cmath>

#include "core/file_util.h"
#include "core/json.h"
#include "core/strings.h"
#include "plan/builtin_hardware.h"

namespace strata::plan {

const char* device_kind_name(DeviceKind k) {
  return k == DeviceKind::kCpu ? "cpu" : "gpu";
}

const char* compute_type_name(ComputeType t) {
  switch (t) {
    case ComputeType::kBF16:
      return "bf16";
    case ComputeType::kFP16:
      return "fp16";
    case ComputeType::kFP8:
      return "fp8";
    case ComputeType::kINT8:
      return "int8";
    case ComputeType::kFP32:
      return "fp32";
  }
  return "?";
}

double HardwareSpec::peak_flops_for(ComputeType t) const {
  static constexpr ComputeType kOrder[] = {ComputeType::kBF16, ComputeType::kFP16,
                                           ComputeType::kFP32};
  if (auto it = peak_flops.find(t); it != peak_flops.end()) return it->second;
  for (ComputeType f : kOrder)
    if (auto it = peak_flops.find(f); it != peak_flops.end()) return it->second;
  return 0;  // validation guarantees bf16, fp16 or fp32
}

namespace {

constexpr ComputeType kComputeTypes[] = {ComputeType::kBF16, ComputeType::kFP16, ComputeType::kFP8,
                                         ComputeType::kINT8, ComputeType::kFP32};

// Reads the fields of one JSON object that has a known set of keys; an unknown key (a typo) is an
// error reported before anything else, so "memory_byte" is not reported as "memory_bytes missing".
class Fields {
 public:
  Fields(const Json& obj, std::string origin, std::string prefix, std::vector<std::string> known)
      : obj_(obj),
        origin_(std::move(origin)),
        prefix_(std::move(prefix)),
        known_(std::move(known)) {}

  Status error(const std::string& field, const std::string& what) const {
    return invalid_argument("hardware file " + origin_ + ": field '" + prefix_ + field + "' " +
                            what + " (docs/plan.md lists the fields)");
  }
  const Json* find(const std::string& field) {
    auto it = obj_.find(field);
    return it == obj_.end() ? nullptr : &*it;
  }
  Result<double> number(const std::string& field, bool required, double fallback,
                        bool allow_zero = false) {
    const Json* v = find(field);
    if (v == nullptr) {
      if (required) return error(field, "is missing");
      return fallback;
    }
    if (!v->is_number()) return error(field, "must be a number, got " + v->dump());
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < 0 || (d == 0 && !allow_zero))
      return error(field, std::string("must be a ") + (allow_zero ? "non-negative" : "positive") +
                              " number, got " + v->dump());
    return d;
  }
  Result<std::string> string(const std::string& field, bool required) {
    const Json* v = find(field);
    if (v == nullptr) {
      if (required) return error(field, "is missing");
      return std::string();
    }
    if (!v->is_string()) return error(field, "must be a string, got " + v->dump());
    return v->get<std::string>();
  }
  Result<const Json*> object(const std::string& field, bool required) {
    const Json* v = find(field);
    if (v == nullptr) {
      if (required) return error(field, "is missing");
      return static_cast<const Json*>(nullptr);
    }
    if (!v->is_object()) return error(field, "must be an object, got " + v->dump());
    return v;
  }
  Status no_unknown_fields() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (std::find(known_.begin(), known_.end(), it.key()) == known_.end()) {
        return invalid_argument("hardware file " + origin_ + ": unknown field '" + prefix_ +
                                it.key() + "' (known here: " + join(known_, ", ") + ")");
      }
    }
    return ok_status();
  }
  std::string sub(const std::string& field) const { return prefix_ + field + "."; }
  const std::string& origin() const { return origin_; }

 private:
  const Json& obj_;
  std::string origin_;
  std::string prefix_;
  std::vector<std::string> known_;
};

Result<LinkSpec> parse_link(Fields& parent, const std::string& field) {
  STRATA_ASSIGN_OR_RETURN(const Json* obj, parent.object(field, /*required=*/true));
  Fields f(*obj, parent.origin(), parent.sub(field),
           {"name", "bandwidth_bytes_per_s", "latency_s"});
  STRATA_RETURN_IF_ERROR(f.no_unknown_fields());
  LinkSpec link;
  STRATA_ASSIGN_OR_RETURN(link.name, f.string("name", false));
  STRATA_ASSIGN_OR_RETURN(link.bandwidth_bytes_per_s, f.number("bandwidth_bytes_per_s", true, 0));
  STRATA_ASSIGN_OR_RETURN(link.latency_s, f.number("latency_s", true, 0, /*allow_zero=*/true));
  return link;
}

Result<double> fraction(Fields& f, const std::string& field, double fallback) {
  STRATA_ASSIGN_OR_RETURN(double v, f.number(field, false, fallback));
  if (v > 1) return f.error(field, "must be a fraction in (0, 1], got " + std::to_string(v));
  return v;
}

}  // namespace

Result<HardwareSpec> parse_hardware_json(const std::string& text, const std::string& origin) {
  const std::string quoted = "'" + origin + "'";
  auto parsed = parse_json(text, "hardware file " + quoted);
  if (!parsed.ok()) return parsed.status();
  const Json& root = *parsed;
  if (!root.is_object())
    return invalid_argument("hardware file " + quoted + ": the top level must be a JSON object");
  Fields f(root, quoted, "",
           {"name", "description", "kind", "memory_bytes", "memory_bandwidth_bytes_per_s",
            "peak_flops", "devices_per_node", "intra_node_link", "inter_node_link",
            "step_overhead_s", "per_sequence_s", "request_admission_s", "attention_flops_per_s",
            "roofline", "efficiency", "placeholder", "sources"});
  STRATA_RETURN_IF_ERROR(f.no_unknown_fields());
  HardwareSpec hw;
  hw.origin = origin;
  STRATA_ASSIGN_OR_RETURN(hw.name, f.string("name", true));
  if (hw.name.empty()) return f.error("name", "must not be empty");
  STRATA_ASSIGN_OR_RETURN(hw.description, f.string("description", false));
  STRATA_ASSIGN_OR_RETURN(std::string kind, f.string("kind", true));
  if (kind == "gpu") {
    hw.kind = DeviceKind::kGpu;
  } else if (kind == "cpu") {
    hw.kind = DeviceKind::kCpu;
  } else {
    return f.error("kind", "must be \"gpu\" or \"cpu\", got \"" + kind + "\"");
  }
  STRATA_ASSIGN_OR_RETURN(double memory, f.number("memory_bytes", true, 0));
  if (memory != std::floor(memory) || memory > 9.0e18)
    return f.error("memory_bytes", "must be a whole number of bytes");
  hw.memory_bytes = static_cast<int64_t>(memory);
  STRATA_ASSIGN_OR_RETURN(hw.memory_bandwidth_bytes_per_s,
                          f.number("memory_bandwidth_bytes_per_s", true, 0));

  STRATA_ASSIGN_OR_RETURN(const Json* flops, f.object("peak_flops", true));
  std::vector<std::string> types;
  for (ComputeType t : kComputeTypes) types.emplace_back(compute_type_name(t));
  Fields pf(*flops, quoted, "peak_flops.", types);
  STRATA_RETURN_IF_ERROR(pf.no_unknown_fields());
  for (ComputeType t : kComputeTypes) {
    STRATA_ASSIGN_OR_RETURN(double v, pf.number(compute_type_name(t), false, -1));
    if (v > 0) hw.peak_flops[t] = v;
  }
  if (!hw.peak_flops.count(ComputeType::kBF16) && !hw.peak_flops.count(ComputeType::kFP16) &&
      !hw.peak_flops.count(ComputeType::kFP32))
    return f.error("peak_flops", "needs at least one of bf16, fp16 or fp32");

  STRATA_ASSIGN_OR_RETURN(double per_node, f.number("devices_per_node", false, 1));
  if (per_node != std::floor(per_node) || per_node > 1e6)
    return f.error("devices_per_node", "must be a whole number >= 1");
  hw.devices_per_node = static_cast<int64_t>(per_node);
  STRATA_ASSIGN_OR_RETURN(hw.intra_node_link, parse_link(f, "intra_node_link"));
  STRATA_ASSIGN_OR_RETURN(hw.inter_node_link, parse_link(f, "inter_node_link"));
  STRATA_ASSIGN_OR_RETURN(hw.step_overhead_s,
                          f.number("step_overhead_s", false, 0, /*allow_zero=*/true));

  STRATA_ASSIGN_OR_RETURN(hw.per_sequence_s,
                          f.number("per_sequence_s", false, 0, /*allow_zero=*/true));
  STRATA_ASSIGN_OR_RETURN(hw.request_admission_s,
                          f.number("request_admission_s", false, 1e-4, /*allow_zero=*/true));
  STRATA_ASSIGN_OR_RETURN(hw.attention_flops_per_s,
                          f.number("attention_flops_per_s", false, 0, /*allow_zero=*/true));
  STRATA_ASSIGN_OR_RETURN(std::string roofline, f.string("roofline", false));
  if (roofline == "sum") {
    hw.roofline = Roofline::kSum;
  } else if (!roofline.empty() && roofline != "max") {
    return f.error("roofline", "must be \"max\" or \"sum\", got \"" + roofline + "\"");
  }

  STRATA_ASSIGN_OR_RETURN(const Json* eff, f.object("efficiency", false));
  if (eff != nullptr) {
    Fields ef(*eff, quoted, "efficiency.", {"flops", "memory_bandwidth", "link_bandwidth"});
    STRATA_RETURN_IF_ERROR(ef.no_unknown_fields());
    STRATA_ASSIGN_OR_RETURN(hw.efficiency.flops, fraction(ef, "flops", 0.6));
    STRATA_ASSIGN_OR_RETURN(hw.efficiency.memory_bandwidth, fraction(ef, "memory_bandwidth", 0.8));
    STRATA_ASSIGN_OR_RETURN(hw.efficiency.link_bandwidth, fraction(ef, "link_bandwidth", 0.8));
  }
  if (const Json* p = f.find("placeholder")) {
    if (!p->is_boolean()) return f.error("placeholder", "must be true or false");
    hw.placeholder = p->get<bool>();
  }
  STRATA_ASSIGN_OR_RETURN(const Json* sources, f.object("sources", false));
  if (sources != nullptr) {
    for (auto it = sources->begin(); it != sources->end(); ++it) {
      if (!it->is_string() || it->get<std::string>().empty())
        return f.error("sources." + it.key(), "must be a non-empty string");
      hw.sources[it.key()] = it->get<std::string>();
    }
  }
  return hw;
}

std::string hardware_to_json(const HardwareSpec& hw) {
  Json j = Json::object();
  j["name"] = hw.name;
  if (!hw.description.empty()) j["description"] = hw.description;
  j["kind"] = device_kind_name(hw.kind);
  j["memory_bytes"] = hw.memory_bytes;
  j["memory_bandwidth_bytes_per_s"] = hw.memory_bandwidth_bytes_per_s;
  Json flops = Json::object();
  for (const auto& [t, v] : hw.peak_flops) flops[compute_type_name(t)] = v;
  j["peak_flops"] = flops;
  j["devices_per_node"] = hw.devices_per_node;
  auto link = [](const LinkSpec& l) {
    Json o = Json::object();
    if (!l.name.empty()) o["name"] = l.name;
    o["bandwidth_bytes_per_s"] = l.bandwidth_bytes_per_s;
    o["latency_s"] = l.latency_s;
    return o;
  };
  j["intra_node_link"] = link(hw.intra_node_link);
  j["inter_node_link"] = link(hw.inter_node_link);
  j["step_overhead_s"] = hw.step_overhead_s;
  if (hw.per_sequence_s > 0) j["per_sequence_s"] = hw.per_sequence_s;
  j["request_admission_s"] = hw.request_admission_s;
  if (hw.attention_flops_per_s > 0) j["attention_flops_per_s"] = hw.attention_flops_per_s;
  j["roofline"] = hw.roofline == Roofline::kSum ? "sum" : "max";
  Json eff = Json::object();
  eff["flops"] = hw.efficiency.flops;
  eff["memory_bandwidth"] = hw.efficiency.memory_bandwidth;
  eff["link_bandwidth"] = hw.efficiency.link_bandwidth;
  j["efficiency"] = eff;
  j["placeholder"] = hw.placeholder;
  if (!hw.sources.empty()) {
    Json src = Json::object();
    for (const auto& [k, v] : hw.sources) src[k] = v;
    j["sources"] = src;
  }
  return j.dump(2) + "\n";
}

std::vector<std::string> builtin_hardware_names() {
  std::vector<std::string> names;
  for (const auto& f : builtin_hardware_files()) names.emplace_back(f.name);
  return names;
}

Result<HardwareSpec> load_hardware(const std::string& name_or_path) {
  if (name_or_path.find('/') == std::string::npos && !ends_with(name_or_path, ".json")) {
    for (const auto& f : builtin_hardware_files()) {
      if (name_or_path == f.name) return parse_hardware_json(f.text, "built-in " + name_or_path);
    }
    return not_found("unknown hardware '" + name_or_path + "': give a hardware file (a path to a " +
                     ".json file, see docs/plan.md) or one of the built-in devices: " +
                     join(builtin_hardware_names(), ", "));
  }
  auto text = read_file(name_or_path);
  if (!text.ok())
    return Status(text.status().code(),
                  "cannot read hardware file '" + name_or_path + "': " + text.status().message());
  return parse_hardware_json(*text, name_or_path);
}

Result<HardwareArg> parse_hardware_arg(const std::string& text) {
  if (text.empty())
    return invalid_argument("--hardware: empty; give DEVICE or DEVICExCOUNT, e.g. h200x8");
  for (const auto& f : builtin_hardware_files())
    if (text == f.name) return HardwareArg{text, 1};
  HardwareArg arg{text, 1};
  const size_t x = text.rfind('x');
  if (x == std::string::npos) return arg;
  const std::string count = text.substr(x + 1);
  const bool digits =
      std::all_of(count.begin(), count.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) return arg;  // an 'x' inside the name ("cpu-xeon-...")
  if (count.empty() || x == 0 || count.size() > 6 || std::stoll(count) < 1)
    return invalid_argument("--hardware '" + text +
                            "': expected DEVICE or DEVICExCOUNT with COUNT >= 1, e.g. h200x8");
  arg.device = text.substr(0, x);
  arg.count = std::stoll(count);
  return arg;
}

}  // namespace strata::plan
