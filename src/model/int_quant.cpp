// AWQ / GPTQ checkpoints: reading and unpacking their quantized layers (see int_quant.h).
#include "model/int_quant.h"

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
                         dtype_name(t.dtype) + "; AWQ/GPTQ checkpoints store it as " +
                         dtype_name(want));
  return t;
}

uint32_t word(const io::TensorRef& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.data + i * 4, 4);
  return v;
}

}  // namespace

float UnpackedIntWeight::value(int64_t r, int64_t c) const {
  const int64_t g = r * ngroups + (g_idx.empty() ? c / group : g_idx[c]);
  return f16_to_f32(scales[g]) * static_cast<float>(int{q[r * k + c]} - int{zeros[g]});
}

std::string int_quantized_base(const WeightSource& src, const std::string& name) {
  if (src.int_quant() == nullptr) return {};
  static const std::string kSuffix = ".weight";
  if (name.size() <= kSuffix.size() ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return {};
  std::string base = name.substr(0, name.size() - kSuffix.size());
  return src.has(base + ".qweight") ? base : std::string();
}

Result<UnpackedIntWeight> read_int_weight(WeightSource& src, const std::string& base, int64_t n,
                                          int64_t k, const IntQuantization& quant) {
  const bool awq = quant.method == "awq";
  const int bits = quant.bits;
  const int per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  UnpackedIntWeight w;
  w.n = n;
  w.k = k;
  w.group = quant.group_size < 0 ? k : quant.group_size;
  if (w.group <= 0 || k % w.group != 0)
    return unimplemented("'" + base + "': rows of " + std::to_string(k) +
                         " inputs are not a whole number of groups of " + std::to_string(w.group));
  if (n % per_word != 0 || (!awq && k % per_word != 0))
    return invalid_argument("'" + base + "': a [" + std::to_string(n) + ", " + std::to_string(k) +
                            "] layer cannot be packed " + std::to_string(per_word) +
                            " codes per int32");
  w.ngroups = k / w.group;
  const int64_t G = w.ngroups;
  w.q.resize(n * k);
  w.zeros.resize(n * G);
  w.scales.resize(n * G);
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
    if (src.has(base + ".g_idx")) {
      STRATA_ASSIGN_OR_RETURN(auto gi, get_typed(src, base + ".g_idx", {k}, DType::kI32));
      bool trivial = true;
      std::vector<int32_t> idx(k);
      for (int64_t c = 0; c < k; ++c) {
        idx[c] = static_cast<int32_t>(word(gi, c));
        if (idx[c] < 0 || idx[c] >= G)
          return invalid_argument("'" + base + ".g_idx' names group " + std::to_string(idx[c]) +
                                  " for input " + std::to_string(c) + "; the layer has " +
                                  std::to_string(G) + " groups");
        trivial = trivial && idx[c] == c / w.group;
      }
      if (!trivial) w.g_idx = std::move(idx);
    }
  }
  STRATA_ASSIGN_OR_RETURN(auto sc, get_typed(src, base + ".scales", {G, n}, DType::kF16));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t o = 0; o < n; ++o) std::memcpy(&w.scales[o * G + g], sc.data + (g * n + o) * 2, 2);
  src.release(sc);
  return w;
}

}  // namespace strata
