// Hardware files: every shipped file loads (from the binary, in any directory), names itself as
// its file does, and gives a source for every figure; bad files are refused with the field named;
// --hardware DEVICExCOUNT parses.
#include "plan/hardware.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/file_util.h"
#include "test_util.h"

namespace strata::plan {
namespace {

const char* kGood = R"({
  "name": "toy", "kind": "gpu", "memory_bytes": 1000, "memory_bandwidth_bytes_per_s": 2e9,
  "peak_flops": {"bf16": 4e12, "fp8": 8e12},
  "devices_per_node": 4,
  "intra_node_link": {"bandwidth_bytes_per_s": 1e9, "latency_s": 1e-6},
  "inter_node_link": {"bandwidth_bytes_per_s": 1e8, "latency_s": 1e-5},
  "step_overhead_s": 0.001
})";

std::string with(const std::string& from, const std::string& to) {
  std::string s = kGood;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

// The error message of parsing `text`, which must fail.
std::string error_of(const std::string& text) {
  auto r = parse_hardware_json(text, "bad.json");
  EXPECT_FALSE(r.ok()) << text;
  return r.ok() ? "" : r.status().message();
}

TEST(HardwareTest, EveryShippedFileLoadsByNameWithASourceForEachFigure) {
  const auto names = builtin_hardware_names();
  const std::set<std::string> expected = {"a100", "b200", "cpu-xeon-avx512-2core", "h100", "h200",
                                          "l20",  "l40s"};
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), expected);
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    auto hw = load_hardware(name);
    ASSERT_TRUE(hw.ok()) << hw.status().to_string();
    EXPECT_EQ(hw->name, name) << "a file's \"name\" is its file name";
    EXPECT_EQ(hw->origin, "built-in " + name);
    // The built-in copy is the file in hardware/ (the binary embeds it at build time).
    auto from_file = load_hardware(testing::repo_path("hardware/" + name + ".json"));
    ASSERT_TRUE(from_file.ok()) << from_file.status().to_string();
    EXPECT_EQ(from_file->memory_bytes, hw->memory_bytes);
    EXPECT_EQ(from_file->peak_flops, hw->peak_flops);
    std::vector<std::string> figures = {"memory_bytes",
                                        "memory_bandwidth_bytes_per_s",
                                        "devices_per_node",
                                        "intra_node_link.bandwidth_bytes_per_s",
                                        "intra_node_link.latency_s",
                                        "inter_node_link.bandwidth_bytes_per_s",
                                        "inter_node_link.latency_s",
                                        "step_overhead_s",
                                        "efficiency.flops",
                                        "efficiency.memory_bandwidth",
                                        "efficiency.link_bandwidth"};
    for (const auto& [t, v] : hw->peak_flops)
      figures.push_back(std::string("peak_flops.") + compute_type_name(t));
    for (const auto& f : figures) EXPECT_TRUE(hw->sources.count(f)) << "no source for " << f;
    for (const auto& [key, text] : hw->sources) {
      (void)text;
      EXPECT_TRUE(std::find(figures.begin(), figures.end(), key) != figures.end())
          << "a source for an unknown figure: " << key;
    }
    EXPECT_TRUE(hw->peak_flops.count(ComputeType::kBF16));
    EXPECT_GT(hw->memory_bytes, int64_t{16} << 30);
  }
  auto cpu = load_hardware("cpu-xeon-avx512-2core");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->kind, DeviceKind::kCpu);
  EXPECT_TRUE(cpu->placeholder) << "the CPU file is an estimate until --calibrate replaces it";
  auto h200 = load_hardware("h200");
  ASSERT_TRUE(h200.ok());
  EXPECT_FALSE(h200->placeholder);
  EXPECT_EQ(h200->memory_bandwidth_bytes_per_s, 4.8e12);
  EXPECT_EQ(h200->devices_per_node, 8);
}

TEST(HardwareTest, ParsesEveryFieldAndDefaultsTheEfficiencies) {
  auto hw = parse_hardware_json(kGood, "toy.json");
  ASSERT_TRUE(hw.ok()) << hw.status().to_string();
  EXPECT_EQ(hw->name, "toy");
  EXPECT_EQ(hw->kind, DeviceKind::kGpu);
  EXPECT_EQ(hw->memory_bytes, 1000);
  EXPECT_EQ(hw->memory_bandwidth_bytes_per_s, 2e9);
  EXPECT_EQ(hw->devices_per_node, 4);
  EXPECT_EQ(hw->intra_node_link.bandwidth_bytes_per_s, 1e9);
  EXPECT_EQ(hw->inter_node_link.latency_s, 1e-5);
  EXPECT_EQ(hw->step_overhead_s, 0.001);
  EXPECT_EQ(hw->efficiency.flops, 0.6);
  EXPECT_EQ(hw->efficiency.memory_bandwidth, 0.8);
  EXPECT_EQ(hw->efficiency.link_bandwidth, 0.8);
  EXPECT_FALSE(hw->placeholder);
  // Peaks, and the fallback for types the device lacks (int8, fp32 -> bf16).
  EXPECT_EQ(hw->peak_flops_for(ComputeType::kFP8), 8e12);
  EXPECT_EQ(hw->peak_flops_for(ComputeType::kBF16), 4e12);
  EXPECT_EQ(hw->peak_flops_for(ComputeType::kINT8), 4e12);
  EXPECT_EQ(hw->peak_flops_for(ComputeType::kFP32), 4e12);
  auto a100 = load_hardware("a100");
  ASSERT_TRUE(a100.ok());
  EXPECT_FALSE(a100->peak_flops.count(ComputeType::kFP8)) << "A100 has no FP8 tensor cores";
  EXPECT_EQ(a100->peak_flops_for(ComputeType::kFP8), a100->peak_flops_for(ComputeType::kBF16));
}

TEST(HardwareTest, StepModelFieldsParseAndDefault) {
  auto plain = parse_hardware_json(kGood, "toy.json");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->roofline, Roofline::kMax);
  EXPECT_EQ(plain->per_sequence_s, 0);
  EXPECT_EQ(plain->attention_flops_per_s, 0);
  EXPECT_EQ(plain->request_admission_s, 1e-4);
  auto hw = parse_hardware_json(
      with(R"("step_overhead_s": 0.001)",
           R"("step_overhead_s": 0.001, "roofline": "sum", "per_sequence_s": 3e-4,
              "attention_flops_per_s": 5e10, "request_admission_s": 0)"),
      "toy.json");
  ASSERT_TRUE(hw.ok()) << hw.status().to_string();
  EXPECT_EQ(hw->roofline, Roofline::kSum);
  EXPECT_EQ(hw->per_sequence_s, 3e-4);
  EXPECT_EQ(hw->attention_flops_per_s, 5e10);
  EXPECT_EQ(hw->request_admission_s, 0);
}

TEST(HardwareTest, WritingAFileAndReadingItBackGivesTheSameSpec) {
  for (const std::string& name : builtin_hardware_names()) {
    SCOPED_TRACE(name);
    auto hw = load_hardware(name);
    ASSERT_TRUE(hw.ok());
    auto back = parse_hardware_json(hardware_to_json(*hw), "copy.json");
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(hardware_to_json(*back), hardware_to_json(*hw));
    EXPECT_EQ(back->peak_flops, hw->peak_flops);
    EXPECT_EQ(back->memory_bytes, hw->memory_bytes);
    EXPECT_EQ(back->sources, hw->sources);
    EXPECT_EQ(back->intra_node_link.latency_s, hw->intra_node_link.latency_s);
  }
}

TEST(HardwareTest, BadFilesAreRefusedNamingTheFileAndTheField) {
  std::string e = error_of(with(R"("memory_bytes": 1000, )", ""));
  EXPECT_NE(e.find("'bad.json'"), std::string::npos) << e;
  EXPECT_NE(e.find("'memory_bytes' is missing"), std::string::npos) << e;

  e = error_of(
      with(R"("memory_bandwidth_bytes_per_s": 2e9)", R"("memory_bandwidth_bytes_per_s": -2e9)"));
  EXPECT_NE(e.find("'memory_bandwidth_bytes_per_s' must be a positive number"), std::string::npos)
      << e;
  e = error_of(with(R"("bandwidth_bytes_per_s": 1e9)", R"("bandwidth_bytes_per_s": -1)"));
  EXPECT_NE(e.find("'intra_node_link.bandwidth_bytes_per_s' must be a positive"), std::string::npos)
      << e;
  e = error_of(with(R"("latency_s": 1e-5)", R"("latency_s": "fast")"));
  EXPECT_NE(e.find("'inter_node_link.latency_s' must be a number"), std::string::npos) << e;
  e = error_of(with(R"("fp8": 8e12)", R"("fp8": 0)"));
  EXPECT_NE(e.find("'peak_flops.fp8' must be a positive number"), std::string::npos) << e;
  e = error_of(with(R"("fp8": 8e12)", R"("fp4": 8e12)"));
  EXPECT_NE(e.find("unknown field 'peak_flops.fp4'"), std::string::npos) << e;
  e = error_of(with(R"("memory_bytes": 1000)", R"("memory_byte": 1000)"));
  EXPECT_NE(e.find("unknown field 'memory_byte'"), std::string::npos) << e;
  e = error_of(with(R"("memory_bytes": 1000)", R"("memory_bytes": 10.5)"));
  EXPECT_NE(e.find("'memory_bytes' must be a whole number"), std::string::npos) << e;
  e = error_of(with(R"("kind": "gpu")", R"("kind": "tpu")"));
  EXPECT_NE(e.find("'kind' must be \"gpu\" or \"cpu\""), std::string::npos) << e;
  e = error_of(with(R"("step_overhead_s": 0.001)",
                    R"("step_overhead_s": 0.001, "efficiency": {"flops": 1.5})"));
  EXPECT_NE(e.find("'efficiency.flops' must be a fraction in (0, 1]"), std::string::npos) << e;
  e = error_of(with(R"("bf16": 4e12, "fp8": 8e12)", R"("fp8": 8e12)"));
  EXPECT_NE(e.find("'peak_flops' needs at least one of bf16, fp16 or fp32"), std::string::npos)
      << e;
  e = error_of(
      with(R"("inter_node_link": {"bandwidth_bytes_per_s": 1e8, "latency_s": 1e-5},)", ""));
  EXPECT_NE(e.find("'inter_node_link' is missing"), std::string::npos) << e;
  e = error_of(
      with(R"("step_overhead_s": 0.001)", R"("step_overhead_s": 0.001, "sources": {"x": 1})"));
  EXPECT_NE(e.find("'sources.x' must be a non-empty string"), std::string::npos) << e;
  e = error_of(
      with(R"("step_overhead_s": 0.001)", R"("step_overhead_s": 0.001, "roofline": "min")"));
  EXPECT_NE(e.find("'roofline' must be \"max\" or \"sum\""), std::string::npos) << e;
  e = error_of(
      with(R"("step_overhead_s": 0.001)", R"("step_overhead_s": 0.001, "per_sequence_s": -1e-3)"));
  EXPECT_NE(e.find("'per_sequence_s' must be a non-negative number"), std::string::npos) << e;
  e = error_of("[1, 2]");
  EXPECT_NE(e.find("top level must be a JSON object"), std::string::npos) << e;
  e = error_of("{\"name\": ");
  EXPECT_NE(e.find("bad.json"), std::string::npos) << e;
}

TEST(HardwareTest, UnknownNamesAndMissingFilesSayWhatExists) {
  auto r = load_hardware("h300");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("h100, h200"), std::string::npos) << r.status().message();
  r = load_hardware("/nonexistent/gpu.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/gpu.json"), std::string::npos);
}

TEST(HardwareTest, LoadsAUserFileByPath) {
  const std::string path = std::string(STRATA_BINARY_DIR) + "/plan_hardware_test_toy.json";
  ASSERT_TRUE(write_file(path, kGood).ok());
  auto hw = load_hardware(path);
  ASSERT_TRUE(hw.ok()) << hw.status().to_string();
  EXPECT_EQ(hw->name, "toy");
  EXPECT_EQ(hw->origin, path);
  ASSERT_TRUE(write_file(path, with(R"("memory_bytes": 1000, )", "")).ok());
  hw = load_hardware(path);
  ASSERT_FALSE(hw.ok());
  EXPECT_NE(hw.status().message().find("'" + path + "': field 'memory_bytes' is missing"),
            std::string::npos)
      << hw.status().message();
}

TEST(HardwareTest, ParsesDeviceTimesCount) {
  auto a = parse_hardware_arg("h200x8");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->device, "h200");
  EXPECT_EQ(a->count, 8);
  a = parse_hardware_arg("l20x24");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->device, "l20");
  EXPECT_EQ(a->count, 24);
  a = parse_hardware_arg("b200");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->device, "b200");
  EXPECT_EQ(a->count, 1);
  // An 'x' inside a name is not a count; a built-in name is taken whole.
  a = parse_hardware_arg("cpu-xeon-avx512-2core");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->device, "cpu-xeon-avx512-2core");
  EXPECT_EQ(a->count, 1);
  a = parse_hardware_arg("cpu-xeon-avx512-2corex2");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->device, "cpu-xeon-avx512-2core");
  EXPECT_EQ(a->count, 2);
  a = parse_hardware_arg("./my gpus/box.jsonx4");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->device, "./my gpus/box.json");
  EXPECT_EQ(a->count, 4);
  for (const char* bad : {"", "h200x0", "h200x", "x8", "h200x99999999"}) {
    auto r = parse_hardware_arg(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

}  // namespace
}  // namespace strata::plan
