// Writes tiny DeepSeek-V4 checkpoints in the Hugging Face V4 layout for tests (shared by
// tests/model/deepseek_v4_checkpoint_test.cpp and tests/dist/dist_v4_checkpoint_test.cpp): the
// float64 reference weights of dsv4::random_model_weights as the published format stores them -
// every tensor of dsv4::checkpoint_tensors, FP8 e4m3 linears with ue8m0 (F8_E8M0) block scales
// (weight_block_size of the config), MXFP4 routed experts with e8m0 group scales, BF16 norms /
// compressors / router / embedding / head, F32 hc_* / sinks / ape / bias, I64 tid2eid, zeros for
// mtp.* - into model.safetensors (or shards with model.safetensors.index.json) beside
// config.json, in a temporary directory removed at exit.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/json.h"
#include "io/writers.h"
#include "model/deepseek_v4.h"

namespace strata::v4ckpt {

// The float64 values of a checkpoint tensor (by its HF V4 name) in the reference weights.
inline const std::vector<double>* values(const dsv4::ModelWeights& w, const std::string& name) {
  static const std::string kW = ".weight";
  std::string n = name;
  if (n.size() > kW.size() && n.compare(n.size() - kW.size(), kW.size(), kW) == 0)
    n.resize(n.size() - kW.size());
  if (n == "embed") return &w.embed;
  if (n == "head") return &w.head;
  if (n == "norm") return &w.norm;
  if (n == "hc_head_fn") return &w.hc_head_fn;
  if (n == "hc_head_base") return &w.hc_head_base;
  if (n == "hc_head_scale") return &w.hc_head_scale;
  const size_t dot = n.find('.', 7);  // "layers.N."
  const size_t l = std::stoul(n.substr(7, dot - 7));
  const std::string s = n.substr(dot + 1);
  const dsv4::BlockWeights& b = w.layers[l];
  const dsv4::AttnWeights& a = b.attn;
  const std::map<std::string, const std::vector<double>*> m = {
      {"attn_norm", &b.attn_norm},
      {"ffn_norm", &b.ffn_norm},
      {"hc_attn_fn", &b.hc_attn_fn},
      {"hc_attn_base", &b.hc_attn_base},
      {"hc_attn_scale", &b.hc_attn_scale},
      {"hc_ffn_fn", &b.hc_ffn_fn},
      {"hc_ffn_base", &b.hc_ffn_base},
      {"hc_ffn_scale", &b.hc_ffn_scale},
      {"attn.wq_a", &a.wq_a},
      {"attn.q_norm", &a.q_norm},
      {"attn.wq_b", &a.wq_b},
      {"attn.wkv", &a.wkv},
      {"attn.kv_norm", &a.kv_norm},
      {"attn.attn_sink", &a.attn_sink},
      {"attn.wo_a", &a.wo_a},
      {"attn.wo_b", &a.wo_b},
      {"attn.compressor.wkv", &a.c_wkv},
      {"attn.compressor.wgate", &a.c_wgate},
      {"attn.compressor.ape", &a.c_ape},
      {"attn.compressor.norm", &a.c_norm},
      {"attn.indexer.wq_b", &a.i_wq_b},
      {"attn.indexer.weights_proj", &a.i_weights},
      {"attn.indexer.compressor.wkv", &a.i_c_wkv},
      {"attn.indexer.compressor.wgate", &a.i_c_wgate},
      {"attn.indexer.compressor.ape", &a.i_c_ape},
      {"attn.indexer.compressor.norm", &a.i_c_norm},
      {"ffn.gate", &b.ffn.gate},
      {"ffn.gate.bias", &b.ffn.bias},
      {"ffn.shared_experts.w1", &b.ffn.shared_w1},
      {"ffn.shared_experts.w3", &b.ffn.shared_w3},
      {"ffn.shared_experts.w2", &b.ffn.shared_w2}};
  auto it = m.find(s);
  return it == m.end() ? nullptr : it->second;
}

// One tensor as the checkpoint stores it.
struct Stored {
  std::string dtype;  // safetensors dtype
  std::vector<int64_t> shape;
  std::string bytes;
};

template <typename T>
inline void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// The checkpoint of `w` in the published layout: FP8 blocks with e8m0 scales = the power of two
// >= amax / 448 of each block (as DeepSeek's ue8m0 quantiser rounds), values rounded to e4m3.
inline std::map<std::string, Stored> checkpoint(const dsv4::DeepseekV4Config& c,
                                                const dsv4::ModelWeights& w) {
  std::map<std::string, Stored> out;
  const auto specs = dsv4::checkpoint_tensors(c, false);
  for (size_t i = 0; i < specs.size(); ++i) {
    const dsv4::TensorSpec& t = specs[i];
    Stored s{t.dtype, t.shape, {}};
    if (t.dtype == "F8_E4M3") {
      const std::vector<double>& v = *values(w, t.name);
      const int64_t n = t.shape[0], k = t.shape[1], bn = c.weight_block_n, bk = c.weight_block_k;
      const int64_t nbn = (n + bn - 1) / bn, nbk = (k + bk - 1) / bk;
      std::vector<uint8_t> e(nbn * nbk);
      std::string q(n * k, '\0');
      for (int64_t rb = 0; rb < nbn; ++rb)
        for (int64_t cb = 0; cb < nbk; ++cb) {
          double amax = 0;
          for (int64_t r = rb * bn; r < std::min(n, rb * bn + bn); ++r)
            for (int64_t j = cb * bk; j < std::min(k, cb * bk + bk); ++j)
              amax = std::max(amax, std::abs(v[r * k + j]));
          const int exp = static_cast<int>(std::ceil(std::log2(amax / 448.0)));
          e[rb * nbk + cb] = static_cast<uint8_t>(exp + 127);
          for (int64_t r = rb * bn; r < std::min(n, rb * bn + bn); ++r)
            for (int64_t j = cb * bk; j < std::min(k, cb * bk + bk); ++j)
              q[r * k + j] = static_cast<char>(
                  f32_to_fp8_e4m3(static_cast<float>(std::ldexp(v[r * k + j], -exp))));
        }
      s.bytes = q;
      out[t.name] = s;
      const dsv4::TensorSpec& sc = specs[++i];
      EXPECT_EQ(sc.dtype, "F8_E8M0") << sc.name;
      out[sc.name] = Stored{sc.dtype, sc.shape, std::string(e.begin(), e.end())};
    } else if (t.dtype == "BF16" || t.dtype == "F32") {
      const std::vector<double>* v = values(w, t.name);
      EXPECT_NE(v, nullptr) << t.name;
      for (double x : *v) {
        if (t.dtype == "BF16")
          put<uint16_t>(s.bytes, f32_to_bf16(static_cast<float>(x)));
        else
          put<float>(s.bytes, static_cast<float>(x));
      }
      out[t.name] = s;
    } else if (t.dtype == "I8") {  // experts.E.wW.weight then .scale
      const std::string base = t.name.substr(0, t.name.size() - 7);  // "...wW"
      const size_t l = std::stoul(base.substr(7, base.find('.', 7) - 7));
      const size_t ep = base.find("experts.") + 8;
      const size_t e = std::stoul(base.substr(ep, base.find('.', ep) - ep));
      const char which = base.back();
      const dsv4::MoeWeights& f = w.layers[l].ffn;
      const auto& q = which == '1' ? f.w1[e] : which == '3' ? f.w3[e] : f.w2[e];
      const auto& sc = which == '1' ? f.w1_scale[e] : which == '3' ? f.w3_scale[e] : f.w2_scale[e];
      s.bytes.assign(q.begin(), q.end());
      out[t.name] = s;
      const dsv4::TensorSpec& st = specs[++i];
      out[st.name] = Stored{st.dtype, st.shape, std::string(sc.begin(), sc.end())};
    } else if (t.dtype == "I64") {
      for (int32_t id : w.layers[std::stoul(t.name.substr(7, 1))].ffn.tid2eid)
        put<int64_t>(s.bytes, id);
      out[t.name] = s;
    } else {
      ADD_FAILURE() << "unexpected " << t.name << " " << t.dtype;
    }
  }
  // mtp.0.* as the published checkpoints hold it (zeros here): the engine model skips it.
  for (const dsv4::TensorSpec& t : dsv4::checkpoint_tensors(c, true))
    if (t.name.rfind("mtp.", 0) == 0)
      out[t.name] = Stored{t.dtype, t.shape, std::string(t.bytes(), '\0')};
  return out;
}

inline io::TensorToWrite to_write(const std::string& name, const Stored& s) {
  io::TensorToWrite t;
  t.name = name;
  t.shape = s.shape;
  t.bytes = s.bytes;
  if (s.dtype == "F8_E4M3") {
    t.dtype = DType::kF8E4M3;
  } else if (s.dtype == "F8_E8M0") {
    t.dtype = DType::kU8;
    t.st_dtype = "F8_E8M0";
  } else if (s.dtype == "I8") {
    t.dtype = DType::kI8;
  } else if (s.dtype == "U8") {
    t.dtype = DType::kU8;
  } else if (s.dtype == "BF16") {
    t.dtype = DType::kBF16;
  } else if (s.dtype == "F32") {
    t.dtype = DType::kF32;
  } else if (s.dtype == "I64") {
    t.dtype = DType::kI64;
  } else if (s.dtype == "F64") {
    t.dtype = DType::kF64;
  } else {
    ADD_FAILURE() << name << ": " << s.dtype;
  }
  return t;
}

// The checkpoint directories written, removed at exit.
struct TempDirs {
  std::vector<std::string> dirs;
  ~TempDirs() {
    for (const std::string& d : dirs) std::filesystem::remove_all(d);
  }
};
inline TempDirs temp_dirs;

inline std::string make_dir(const std::string& tag) {
  std::string tmpl = "/tmp/strata_v4_ckpt_" + tag + "_XXXXXX";
  const char* d = ::mkdtemp(tmpl.data());
  EXPECT_NE(d, nullptr);
  temp_dirs.dirs.push_back(d);
  return d;
}

// Writes config.json and the tensors (`shards` files; > 1 with model.safetensors.index.json).
inline std::string write_checkpoint(const std::map<std::string, Stored>& ckpt,
                                    const std::string& tag, const std::string& config_json,
                                    int shards = 1) {
  const std::string dir = make_dir(tag);
  std::ofstream(dir + "/config.json") << config_json;
  std::vector<std::vector<io::TensorToWrite>> files(shards);
  Json map = Json::object();
  int i = 0;
  for (const auto& [name, s] : ckpt) {
    const int f = (i++ * shards) / static_cast<int>(ckpt.size());
    files[f].push_back(to_write(name, s));
    map[name] = shards == 1 ? std::string("model.safetensors")
                            : "model-0000" + std::to_string(f + 1) + "-of-0000" +
                                  std::to_string(shards) + ".safetensors";
  }
  for (int f = 0; f < shards; ++f) {
    const std::string file = shards == 1 ? std::string("model.safetensors")
                                         : "model-0000" + std::to_string(f + 1) + "-of-0000" +
                                               std::to_string(shards) + ".safetensors";
    Status st = io::write_safetensors(dir + "/" + file, files[f], {{"format", "pt"}});
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  if (shards > 1) {
    Json index = Json::object();
    index["metadata"] = Json::object();
    index["weight_map"] = map;
    std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  }
  return dir;
}

// The float64 weights the reference loader reads from the checkpoint's bytes.
inline dsv4::ModelWeights reference_weights(const dsv4::DeepseekV4Config& c,
                                            const std::map<std::string, Stored>& ckpt) {
  auto w =
      dsv4::load_model_weights(c, [&](const dsv4::TensorSpec& t) -> Result<std::vector<uint8_t>> {
        auto it = ckpt.find(t.name);
        if (it == ckpt.end()) return not_found(t.name);
        return std::vector<uint8_t>(it->second.bytes.begin(), it->second.bytes.end());
      });
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  return std::move(w).value();
}

}  // namespace strata::v4ckpt
