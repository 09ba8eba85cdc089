// Small AWQ / GPTQ safetensors checkpoints of any tiny config, written in C++ (no numpy): for
// the tests that compare a config alone with its checkpoint (memory estimates, plans).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/thread_pool.h"
#include "io/writers.h"
#include "model/deepseek.h"
#include "model/llama.h"
#include "model/model_config.h"
#include "recording_source.h"
#include "tiny_models.h"

namespace strata::testing {

// An AWQ or GPTQ checkpoint of `config` (its quantization_config: quant_method, bits,
// group_size, desc_act, modules_to_not_convert), written from the tensors the float model asks
// for, laid out as AutoAWQ / AutoGPTQ write them: every 2-D weight of the decoder layers but the
// MoE routers and the modules not to convert (and the output head with GPTQ's lm_head: true)
// becomes qweight / qzeros / scales (GPTQ: + g_idx,
// groups interleaved over the inputs with desc_act); the rest is f16. Values are constant: only
// dtypes, shapes and the g_idx decide what the engine holds. Returns the checkpoint's folder.
inline std::string write_int_quant_checkpoint(const Json& config, ThreadPool& pool) {
  Json plain = config;
  plain.erase("quantization_config");
  auto cfg = parse_hf_config(plain, nullptr);
  EXPECT_TRUE(cfg.ok()) << cfg.status().to_string();
  auto rec = std::make_unique<RecordingSource>(make_dummy_source(1, DType::kF32, 0.05));
  RecordingSource* recorder = rec.get();
  ModelBuildOptions build;
  build.storage = DType::kF32;
  build.keep_in_place = false;
  build.limits = {8, 8, 1};
  build.pool = &pool;
  auto recorded = cfg->architecture.find("Deepseek") != std::string::npos
                      ? create_deepseek_model(*cfg, std::move(rec), build)
                      : create_llama_model(*cfg, std::move(rec), build);
  EXPECT_TRUE(recorded.ok()) << recorded.status().to_string();
  const Json& q = config["quantization_config"];
  const bool awq = q["quant_method"] == "awq";
  const int64_t bits = q.value("bits", 4), group = q.value("group_size", 128);
  const bool desc_act = q.value("desc_act", false);
  std::vector<std::string> skip;
  if (q.contains("modules_to_not_convert"))
    for (const Json& m : q["modules_to_not_convert"]) skip.push_back(m.get<std::string>());
  const auto bytes_of = [](const void* p, size_t n) {
    return std::string(static_cast<const char*>(p), n);
  };
  std::vector<io::TensorToWrite> tensors;
  for (const auto& [name, t] : recorder->tensors) {
    const std::string base = name.substr(0, name.rfind('.'));
    bool quantized = t.shape.size() == 2 && name.rfind("model.layers.", 0) == 0 &&
                     name.substr(name.rfind('.')) == ".weight" &&
                     name.find(".gate.weight") == std::string::npos &&
                     name.find("shared_expert_gate") == std::string::npos;
    quantized = quantized || (name == "lm_head.weight" && q.value("lm_head", false));
    for (const std::string& m : skip) quantized = quantized && base.find(m) == std::string::npos;
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    if (!quantized) {
      tensors.push_back({name, DType::kF16, t.shape, std::string(numel * 2, '\0')});
      continue;
    }
    const int64_t n = t.shape[0], k = t.shape[1], g = group < 0 ? k : group, groups = k / g;
    const int64_t per_word = 32 / bits;
    const std::vector<int64_t> qw =
        awq ? std::vector<int64_t>{k, n / 8} : std::vector<int64_t>{k / per_word, n};
    const std::vector<int64_t> qz =
        awq ? std::vector<int64_t>{groups, n / 8} : std::vector<int64_t>{groups, n / per_word};
    tensors.push_back({base + ".qweight", DType::kI32, qw, std::string(qw[0] * qw[1] * 4, '\0')});
    tensors.push_back({base + ".qzeros", DType::kI32, qz, std::string(qz[0] * qz[1] * 4, '\0')});
    std::vector<uint16_t> scales(groups * n, f32_to_f16(0.01f));
    tensors.push_back(
        {base + ".scales", DType::kF16, {groups, n}, bytes_of(scales.data(), scales.size() * 2)});
    if (!awq) {
      std::vector<int32_t> g_idx(k);
      for (int64_t c = 0; c < k; ++c)
        g_idx[c] = static_cast<int32_t>(desc_act ? c % groups : c / g);
      tensors.push_back({base + ".g_idx", DType::kI32, {k}, bytes_of(g_idx.data(), k * 4)});
    }
  }
  const std::string dir = write_tiny_config(config.dump());
  EXPECT_TRUE(io::write_safetensors(dir + "/model.safetensors", tensors).ok());
  return dir;
}

}  // namespace strata::testing
