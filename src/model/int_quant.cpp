// AWQ / GPTQ / compressed-tensors checkpoints: reading and unpacking their quantized layers (see
// int_quant.h).
#include "model/int_quant.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "model/weight_source.h"

namespace strata {
namespace {

Result<io::TensorRef> get_typed(WeightSource& src, const std::string& name,
                                const std::vector<int64_t>& shape, DType want) {
  if (!src.has(name))
    return invalid_argument("quantized layer tensor '" + name + "' is missing from " +
                            src.describe());
  STRATA_ASSIGN_OR_RETURN(io::TensorRef t, src.get(name, shape));
  if (t.dtype != want)
    return unimplemented("'" + name + "' in " + src.describe() + " has dtype " +
                         dtype_name(t.dtype) + "; this checkpoint format stores it as " +
                         dtype_name(want));
  return t;
}

uint32_t word(const io::TensorRef& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.data + i * 4, 4);
  return v;
}

// `name` (int32 [k], the group of each input) into w->g_idx when it is not the contiguous c /
// group.
Status read_g_idx(WeightSource& src, const std::string& name, UnpackedIntWeight* w) {
  const int64_t k = w->k, G = w->ngroups;
  STRATA_ASSIGN_OR_RETURN(auto gi, get_typed(src, name, {k}, DType::kI32));
  bool trivial = true;
  std::vector<int32_t> idx(k);
  for (int64_t c = 0; c < k; ++c) {
    idx[c] = static_cast<int32_t>(word(gi, c));
    if (idx[c] < 0 || idx[c] >= G)
      return invalid_argument("'" + name + "' names group " + std::to_string(idx[c]) +
                              " for input " + std::to_string(c) + "; the layer has " +
                              std::to_string(G) + " groups");
    trivial = trivial && idx[c] == c / w->group;
  }
  src.release(gi);
  if (!trivial) w->g_idx = std::move(idx);
  return ok_status();
}

// out[i] = f16(f[i]); whether every one is exact.
bool to_f16_exactly(const float* f, int64_t count, uint16_t* out) {
  bool exact = true;
  for (int64_t i = 0; i < count; ++i) {
    out[i] = f32_to_f16(f[i]);
    exact = exact && f32_to_bits(f16_to_f32(out[i])) == f32_to_bits(f[i]);
  }
  return exact;
}

// compressed-tensors pack-quantized (int_quant.h): codes and zero points stored as
// signed + 2^(bits-1), packed low bits first along inputs (codes) or outputs (zero points).
Status read_compressed_tensors(WeightSource& src, const std::string& base,
                               const IntQuantization& quant, UnpackedIntWeight* w) {
  const int64_t n = w->n, k = w->k, G = w->ngroups;
  const int bits = quant.bits;
  const int64_t per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const uint16_t offset = static_cast<uint16_t>(1u << (bits - 1));
  if (src.has(base + ".weight_shape")) {
    STRATA_ASSIGN_OR_RETURN(auto ws, src.get(base + ".weight_shape", {2}));
    int64_t dims[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      if (ws.dtype == DType::kI64)
        std::memcpy(&dims[i], ws.data + 8 * i, 8);
      else if (ws.dtype == DType::kI32)
        dims[i] = static_cast<int32_t>(word(ws, i));
      else
        return unimplemented("'" + base + ".weight_shape' has dtype " + dtype_name(ws.dtype) +
                             " (int64 or int32 expected)");
    }
    src.release(ws);
    if (dims[0] != n || dims[1] != k)
      return invalid_argument("'" + base + ".weight_shape' says [" + std::to_string(dims[0]) +
                              ", " + std::to_string(dims[1]) + "]; the model expects [" +
                              std::to_string(n) + ", " + std::to_string(k) + "]");
  }
  const int64_t kw = (k + per_word - 1) / per_word;
  STRATA_ASSIGN_OR_RETURN(auto qw, get_typed(src, base + ".weight_packed", {n, kw}, DType::kI32));
  for (int64_t o = 0; o < n; ++o)
    for (int64_t j = 0; j < kw; ++j) {
      const uint32_t v = word(qw, o * kw + j);
      for (int64_t i = 0; i < per_word && j * per_word + i < k; ++i)
        w->q[o * k + j * per_word + i] = static_cast<uint8_t>((v >> (bits * i)) & mask);
    }
  src.release(qw);
  if (quant.sym) {
    std::fill(w->zeros.begin(), w->zeros.end(), offset);
  } else {
    const std::string zname = base + ".weight_zero_point";
    if (!src.has(zname))
      return invalid_argument("quantized layer tensor '" + zname + "' is missing from " +
                              src.describe() + " (the config says the weights are asymmetric)");
    const int64_t nw = (n + per_word - 1) / per_word;
    STRATA_ASSIGN_OR_RETURN(auto zp, get_typed(src, zname, {nw, G}, DType::kI32));
    for (int64_t j = 0; j < nw; ++j)
      for (int64_t g = 0; g < G; ++g) {
        const uint32_t v = word(zp, j * G + g);
        for (int64_t i = 0; i < per_word && j * per_word + i < n; ++i)
          w->zeros[(j * per_word + i) * G + g] = static_cast<uint16_t>((v >> (bits * i)) & mask);
      }
    src.release(zp);
  }
  // Scales: kept as f16 when every one converts exactly, else as f32 (the exact F32 fallback).
  STRATA_ASSIGN_OR_RETURN(auto sc, src.get(base + ".weight_scale", {n, G}));
  if (sc.dtype != DType::kF16 && sc.dtype != DType::kBF16 && sc.dtype != DType::kF32)
    return unimplemented("'" + base + ".weight_scale' in " + src.describe() + " has dtype " +
                         dtype_name(sc.dtype) + " (f16, bf16 or f32 expected)");
  std::vector<float> f(n * G);
  dequantize_row(sc.dtype, sc.data, f.data(), n * G);
  src.release(sc);
  if (!to_f16_exactly(f.data(), n * G, w->scales.data())) {
    w->scales.clear();
    w->scales_f32 = std::move(f);
  }
  if (src.has(base + ".weight_g_idx"))
    STRATA_RETURN_IF_ERROR(read_g_idx(src, base + ".weight_g_idx", w));
  return ok_status();
}

}  // namespace

float UnpackedIntWeight::value(int64_t r, int64_t c) const {
  const int64_t g = r * ngroups + (g_idx.empty() ? c / group : g_idx[c]);
  const float s = scales_f32.empty() ? f16_to_f32(scales[g]) : scales_f32[g];
  return s * static_cast<float>(int{q[r * k + c]} - int{zeros[g]});
}

bool int_quantizes_layer(const IntQuantization& quant, const std::string& base) {
  for (const std::string& m : quant.modules_to_not_convert)
    if (!m.empty() && base.find(m) != std::string::npos) return false;
  if (base == "lm_head") return quant.lm_head;
  static const std::string kLayers = "model.layers.";
  if (base.rfind(kLayers, 0) != 0) return false;
  const std::string leaf = base.substr(base.rfind('.') + 1);
  return leaf.find("norm") == std::string::npos && leaf != "gate" && leaf != "shared_expert_gate" &&
         leaf != "embed_tokens" && leaf != "eh_proj" && leaf != "head";
}

std::string int_quantized_base(const WeightSource& src, const std::string& name) {
  if (src.int_quant() == nullptr) return {};
  static const std::string kSuffix = ".weight";
  if (name.size() <= kSuffix.size() ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return {};
  std::string base = name.substr(0, name.size() - kSuffix.size());
  const char* packed =
      src.int_quant()->method == "compressed-tensors" ? ".weight_packed" : ".qweight";
  return src.has(base + packed) ? base : std::string();
}

// The shape and grouping of an integer weight: [n, k] in groups of group_size inputs (a whole
// row when negative).
static Status set_int_groups(const std::string& base, int64_t n, int64_t k,
                             const IntQuantization& quant, UnpackedIntWeight* w) {
  w->n = n;
  w->k = k;
  w->group = quant.group_size < 0 ? k : quant.group_size;
  if (w->group <= 0 || k % w->group != 0)
    return unimplemented("'" + base + "': rows of " + std::to_string(k) +
                         " inputs are not a whole number of groups of " + std::to_string(w->group));
  w->ngroups = k / w->group;
  return ok_status();
}

Result<UnpackedIntWeight> read_int_weight(WeightSource& src, const std::string& base, int64_t n,
                                          int64_t k, const IntQuantization& quant) {
  const bool awq = quant.method == "awq";
  const int bits = quant.bits;
  const int per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  UnpackedIntWeight w;
  STRATA_RETURN_IF_ERROR(set_int_groups(base, n, k, quant, &w));
  const bool ct = quant.method == "compressed-tensors";
  if (!ct && (n % per_word != 0 || (!awq && k % per_word != 0)))
    return invalid_argument("'" + base + "': a [" + std::to_string(n) + ", " + std::to_string(k) +
                            "] layer cannot be packed " + std::to_string(per_word) +
                            " codes per int32");
  const int64_t G = w.ngroups;
  w.q.resize(n * k);
  w.zeros.resize(n * G);
  w.scales.resize(n * G);
  if (ct) {
    STRATA_RETURN_IF_ERROR(read_compressed_tensors(src, base, quant, &w));
    return w;
  }
  if (awq) {
    STRATA_ASSIGN_OR_RETURN(auto qw, get_typed(src, base + ".qweight", {k, n / 8}, DType::kI32));
    STRATA_ASSIGN_OR_RETURN(auto qz, get_typed(src, base + ".qzeros", {G, n / 8}, DType::kI32));
    for (int64_t c = 0; c < k; ++c)
      for (int64_t j = 0; j < n / 8; ++j) {
        const uint32_t v = word(qw, c * (n / 8) + j);
        for (int i = 0; i < 8; ++i) w.q[(8 * j + kAwqOrder[i]) * k + c] = (v >> (4 * i)) & 0xF;
      }
    for (int64_t g = 0; g < G; ++g)
      for (int64_t j = 0; j < n / 8; ++j) {
        const uint32_t v = word(qz, g * (n / 8) + j);
        for (int i = 0; i < 8; ++i) w.zeros[(8 * j + kAwqOrder[i]) * G + g] = (v >> (4 * i)) & 0xF;
      }
    src.release(qw);
    src.release(qz);
  } else {
    STRATA_ASSIGN_OR_RETURN(auto qw,
                            get_typed(src, base + ".qweight", {k / per_word, n}, DType::kI32));
    STRATA_ASSIGN_OR_RETURN(auto qz,
                            get_typed(src, base + ".qzeros", {G, n / per_word}, DType::kI32));
    for (int64_t wr = 0; wr < k / per_word; ++wr)
      for (int64_t o = 0; o < n; ++o) {
        const uint32_t v = word(qw, wr * n + o);
        for (int i = 0; i < per_word; ++i)
          w.q[o * k + wr * per_word + i] = static_cast<uint8_t>((v >> (bits * i)) & mask);
      }
    const int plus = quant.zeros_plus_one ? 1 : 0;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t j = 0; j < n / per_word; ++j) {
        const uint32_t v = word(qz, g * (n / per_word) + j);
        for (int i = 0; i < per_word; ++i)
          w.zeros[(j * per_word + i) * G + g] =
              static_cast<uint16_t>(((v >> (bits * i)) & mask) + plus);
      }
    src.release(qw);
    src.release(qz);
    if (src.has(base + ".g_idx")) STRATA_RETURN_IF_ERROR(read_g_idx(src, base + ".g_idx", &w));
  }
  STRATA_ASSIGN_OR_RETURN(auto sc, get_typed(src, base + ".scales", {G, n}, DType::kF16));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t o = 0; o < n; ++o) std::memcpy(&w.scales[o * G + g], sc.data + (g * n + o) * 2, 2);
  src.release(sc);
  return w;
}

Result<bool> int_weight_has_plain_groups(WeightSource& src, const std::string& base, int64_t n,
                                         int64_t k, const IntQuantization& quant) {
  UnpackedIntWeight w;
  STRATA_RETURN_IF_ERROR(set_int_groups(base, n, k, quant, &w));
  const bool ct = quant.method == "compressed-tensors";
  const std::string g_idx = base + (ct ? ".weight_g_idx" : ".g_idx");
  if (src.has(g_idx)) STRATA_RETURN_IF_ERROR(read_g_idx(src, g_idx, &w));
  if (!w.g_idx.empty()) return false;
  if (!ct) return true;  // AWQ / GPTQ scales are f16
  STRATA_ASSIGN_OR_RETURN(auto sc, src.get(base + ".weight_scale", {n, w.ngroups}));
  if (sc.dtype == DType::kF16) return true;
  if (sc.dtype != DType::kBF16 && sc.dtype != DType::kF32)
    return unimplemented("'" + base + ".weight_scale' in " + src.describe() + " has dtype " +
                         dtype_name(sc.dtype) + " (f16, bf16 or f32 expected)");
  std::vector<float> f(n * w.ngroups);
  std::vector<uint16_t> h(n * w.ngroups);
  dequantize_row(sc.dtype, sc.data, f.data(), n * w.ngroups);
  src.release(sc);
  return to_f16_exactly(f.data(), n * w.ngroups, h.data());
}

}  // namespace strata
