// DeepSeek-V4 building blocks; see deepseek_v4_ops.h for the definitions and the sources read.
#include "model/deepseek_v4_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "core/check.h"
#include "core/dtype.h"
#include "core/json.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/dsv4.h"

namespace strata::dsv4 {
namespace {

// ----------------------------------------------------------------------------- config helpers

void merge_into(Json& target, const Json& patch) {
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (it->is_object() && target.contains(it.key()) && target[it.key()].is_object())
      merge_into(target[it.key()], *it);
    else
      target[it.key()] = *it;
  }
}

std::string key_error(const std::string& key, const std::string& what) {
  return "DeepSeek-V4 config.json: '" + key + "' " + what;
}

// Reads config keys, keeping the first error.
class Reader {
 public:
  explicit Reader(const Json& c) : c_(c) {}
  const Status& status() const { return st_; }
  bool has(const char* key) const { return c_.contains(key) && !c_[key].is_null(); }

  int64_t integer(const char* key, int64_t min_value, std::optional<int64_t> fallback = {}) {
    return scalar<int64_t>(key, min_value, false, fallback);
  }
  double number(const char* key, double min_value, bool strict, std::optional<double> fallback) {
    return scalar<double>(key, min_value, strict, fallback);
  }
  // An integer (T integral) or a finite number >= min_value (> when strict); a missing key takes
  // `fallback`, or is an error without one.
  template <typename T>
  T scalar(const char* key, T min_value, bool strict, std::optional<T> fallback) {
    constexpr bool integral = std::is_integral_v<T>;
    if (!has(key)) {
      if (fallback) return *fallback;
      fail(key_error(key, "is missing (required for DeepseekV4ForCausalLM)"));
      return min_value;
    }
    const Json& v = c_[key];
    if (integral ? !v.is_number_integer() : !v.is_number()) {
      fail(key_error(key, std::string("must be ") + (integral ? "an integer" : "a number") +
                              ", got " + v.dump()));
      return min_value;
    }
    const T x = v.get<T>();
    if (!std::isfinite(static_cast<double>(x)) || x < min_value || (strict && x == min_value)) {
      fail(key_error(key, std::string("must be ") + (strict ? "> " : ">= ") +
                              std::to_string(min_value) + ", got " + v.dump()));
      return min_value;
    }
    return x;
  }
  bool boolean(const char* key, bool fallback) {
    if (!has(key)) return fallback;
    if (!c_[key].is_boolean()) {
      fail(key_error(key, "must be true or false, got " + c_[key].dump()));
      return fallback;
    }
    return c_[key].get<bool>();
  }
  std::string string(const char* key, const std::string& fallback) {
    if (!has(key)) return fallback;
    if (!c_[key].is_string()) {
      fail(key_error(key, "must be a string, got " + c_[key].dump()));
      return fallback;
    }
    return c_[key].get<std::string>();
  }
  void fail(const std::string& message) {
    if (st_.ok()) st_ = invalid_argument(message);
  }
  void fail(Status s) {
    if (st_.ok()) st_ = std::move(s);
  }

 private:
  const Json& c_;
  Status st_;
};

}  // namespace

AttnKind DeepseekV4Config::attn_kind(int64_t layer) const {
  const int r = compress_ratios[layer];
  return r == 4 ? AttnKind::kCsa : r == 128 ? AttnKind::kHca : AttnKind::kWindow;
}

Result<DeepseekV4Config> parse_deepseek_v4_config(const Json& config_in, const Json* overrides) {
  if (!config_in.is_object()) return invalid_argument("DeepSeek-V4 config.json must be an object");
  Json c = config_in;
  if (overrides != nullptr) {
    if (!overrides->is_object()) return invalid_argument("--hf-overrides must be a JSON object");
    merge_into(c, *overrides);
  }
  Reader r(c);
  DeepseekV4Config m;
  if (c.contains("architectures") && c["architectures"].is_array() && !c["architectures"].empty() &&
      c["architectures"][0].is_string())
    m.architecture = c["architectures"][0].get<std::string>();
  if (!m.architecture.empty() && m.architecture != "DeepseekV4ForCausalLM")
    return invalid_argument(
        key_error("architectures", "is " + m.architecture + ", expected DeepseekV4ForCausalLM"));

  m.vocab_size = r.integer("vocab_size", 1);
  m.hidden_size = r.integer("hidden_size", 1);
  m.num_hidden_layers = r.integer("num_hidden_layers", 1);
  m.num_attention_heads = r.integer("num_attention_heads", 1);
  const int64_t kv_heads = r.integer("num_key_value_heads", 1, 1);
  m.head_dim = r.integer("head_dim", 1);
  m.qk_rope_head_dim = r.integer("qk_rope_head_dim", 2);
  m.q_lora_rank = r.integer("q_lora_rank", 1);
  m.o_lora_rank = r.integer("o_lora_rank", 1);
  m.o_groups = r.integer("o_groups", 1);
  m.sliding_window = r.integer("sliding_window", 1);
  m.n_routed_experts = r.integer("n_routed_experts", 1);
  m.n_shared_experts = r.integer("n_shared_experts", 0, 1);
  m.num_experts_per_tok = r.integer("num_experts_per_tok", 1);
  m.moe_intermediate_size = r.integer("moe_intermediate_size", 1);
  m.norm_topk_prob = r.boolean("norm_topk_prob", true);
  m.routed_scaling_factor = r.number("routed_scaling_factor", 0.0, true, 1.0);
  m.swiglu_limit = r.number("swiglu_limit", 0.0, false, 0.0);
  m.num_hash_layers = r.integer("num_hash_layers", 0, 0);
  m.hc_mult = r.integer("hc_mult", 1);
  m.hc_sinkhorn_iters = r.integer("hc_sinkhorn_iters", 1);
  m.hc_eps = r.number("hc_eps", 0.0, false, 1e-6);
  m.rope_theta = r.number("rope_theta", 0.0, true, 10000.0);
  m.compress_rope_theta = r.number("compress_rope_theta", 0.0, true, m.rope_theta);
  m.rms_norm_eps = r.number("rms_norm_eps", 0.0, true, 1e-6);
  m.max_position_embeddings = r.integer("max_position_embeddings", 1, 4096);
  m.num_nextn_predict_layers = r.integer("num_nextn_predict_layers", 0, 0);
  if (!r.status().ok()) return r.status();

  if (kv_heads != 1)
    return invalid_argument(
        key_error("num_key_value_heads",
                  "must be 1 (V4 has one shared K=V head), got " + std::to_string(kv_heads)));
  if (m.qk_rope_head_dim % 2 != 0 || m.qk_rope_head_dim >= m.head_dim)
    return invalid_argument(
        key_error("qk_rope_head_dim", "must be even and smaller than head_dim (" +
                                          std::to_string(m.head_dim) + "), got " +
                                          std::to_string(m.qk_rope_head_dim)));
  if (m.num_attention_heads % m.o_groups != 0)
    return invalid_argument(key_error("o_groups", "(" + std::to_string(m.o_groups) +
                                                      ") must divide num_attention_heads (" +
                                                      std::to_string(m.num_attention_heads) + ")"));
  if (m.num_experts_per_tok > m.n_routed_experts)
    return invalid_argument(
        key_error("num_experts_per_tok", "(" + std::to_string(m.num_experts_per_tok) +
                                             ") must not exceed n_routed_experts (" +
                                             std::to_string(m.n_routed_experts) + ")"));
  if (m.num_hash_layers > m.num_hidden_layers)
    return invalid_argument(
        key_error("num_hash_layers", "(" + std::to_string(m.num_hash_layers) +
                                         ") must not exceed num_hidden_layers (" +
                                         std::to_string(m.num_hidden_layers) + ")"));
  if (m.hc_mult > 64)
    return invalid_argument(
        key_error("hc_mult", "must be at most 64, got " + std::to_string(m.hc_mult)));

  // compress_ratios: one entry per layer (the file may list the MTP layer's too).
  if (!r.has("compress_ratios"))
    return invalid_argument(key_error(
        "compress_ratios",
        "is missing (required for DeepseekV4ForCausalLM; one ratio per layer: 0, 4 or 128)"));
  const Json& ratios = c["compress_ratios"];
  if (!ratios.is_array())
    return invalid_argument(key_error("compress_ratios", "must be a list, got " + ratios.dump()));
  if (static_cast<int64_t>(ratios.size()) < m.num_hidden_layers)
    return invalid_argument(
        key_error("compress_ratios", "has " + std::to_string(ratios.size()) +
                                         " entries, fewer than num_hidden_layers (" +
                                         std::to_string(m.num_hidden_layers) + ")"));
  bool any_csa = false;
  for (int64_t i = 0; i < m.num_hidden_layers; ++i) {
    const Json& v = ratios[i];
    const int64_t x = v.is_number_integer() ? v.get<int64_t>() : -1;
    if (x != 0 && x != 1 && x != 4 && x != 128)
      return invalid_argument(key_error("compress_ratios[" + std::to_string(i) + "]",
                                        "must be 0, 1, 4 or 128, got " + v.dump()));
    m.compress_ratios.push_back(x == 1 ? 0 : static_cast<int>(x));
    any_csa = any_csa || x == 4;
  }

  // The lightning indexer (needed by ratio-4 layers).
  if (any_csa) {
    m.index_n_heads = r.integer("index_n_heads", 1);
    m.index_head_dim = r.integer("index_head_dim", 1);
    m.index_topk = r.integer("index_topk", 1);
    if (!r.status().ok()) return r.status();
    if (m.index_head_dim < m.qk_rope_head_dim)
      return invalid_argument(
          key_error("index_head_dim", "(" + std::to_string(m.index_head_dim) +
                                          ") must be at least qk_rope_head_dim (" +
                                          std::to_string(m.qk_rope_head_dim) + ")"));
  }

  const std::string scoring = r.string("scoring_func", "sqrtsoftplus");
  if (scoring == "sqrtsoftplus")
    m.scoring = Scoring::kSqrtSoftplus;
  else if (scoring == "sigmoid")
    m.scoring = Scoring::kSigmoid;
  else if (scoring == "softmax")
    m.scoring = Scoring::kSoftmax;
  else
    return invalid_argument(key_error(
        "scoring_func", "must be sqrtsoftplus, sigmoid or softmax, got '" + scoring + "'"));
  const std::string topk_method = r.string("topk_method", "noaux_tc");
  if (topk_method != "noaux_tc" && topk_method != "greedy")
    return unimplemented(
        key_error("topk_method", "'" + topk_method + "' is not supported (noaux_tc or greedy)"));
  m.noaux_tc = topk_method == "noaux_tc";

  const std::string expert_dtype = r.string("expert_dtype", "");
  if (expert_dtype == "fp4")
    m.expert_dtype = ExpertDtype::kFp4;
  else if (expert_dtype == "fp8")
    m.expert_dtype = ExpertDtype::kFp8;
  else if (expert_dtype.empty() || expert_dtype == "bf16" || expert_dtype == "bfloat16")
    m.expert_dtype = ExpertDtype::kBf16;
  else
    return invalid_argument(
        key_error("expert_dtype", "must be fp4, fp8 or absent, got '" + expert_dtype + "'"));

  if (r.has("rope_scaling")) {
    const Json& rs = c["rope_scaling"];
    if (!rs.is_object())
      return invalid_argument(key_error("rope_scaling", "must be an object, got " + rs.dump()));
    Reader y(rs);
    std::string type = y.string("type", "");
    if (type.empty()) type = y.string("rope_type", "");
    if (type != "yarn" && type != "deepseek_yarn")
      return unimplemented(key_error("rope_scaling.type", "'" + type +
                                                              "' is not supported for "
                                                              "DeepSeek-V4 (yarn only)"));
    m.yarn.factor = y.number("factor", 1.0, false, 1.0);
    m.yarn.beta_fast = y.number("beta_fast", 0.0, true, 32.0);
    m.yarn.beta_slow = y.number("beta_slow", 0.0, true, 1.0);
    m.yarn.original_max_position_embeddings = y.integer("original_max_position_embeddings", 1);
    if (!y.status().ok()) return invalid_argument("rope_scaling: " + y.status().message());
  }

  if (r.has("quantization_config")) {
    const Json& q = c["quantization_config"];
    if (!q.is_object())
      return invalid_argument(
          key_error("quantization_config", "must be an object, got " + q.dump()));
    Reader qr(q);
    const std::string method = qr.string("quant_method", "");
    if (method != "fp8")
      return unimplemented(key_error("quantization_config.quant_method",
                                     "'" + method + "' is not supported for DeepSeek-V4 (fp8)"));
    m.fp8_weights = true;
    const std::string fmt = qr.string("scale_fmt", "");
    if (!fmt.empty() && fmt != "ue8m0")
      return unimplemented(
          key_error("quantization_config.scale_fmt", "'" + fmt + "' is not supported (ue8m0)"));
    m.ue8m0_scales = fmt == "ue8m0";
    if (q.contains("weight_block_size")) {
      const Json& b = q["weight_block_size"];
      if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() ||
          !b[1].is_number_integer() || b[0].get<int64_t>() <= 0 || b[1].get<int64_t>() <= 0)
        return invalid_argument(key_error("quantization_config.weight_block_size",
                                          "must be two positive integers, got " + b.dump()));
      m.weight_block_n = b[0].get<int64_t>();
      m.weight_block_k = b[1].get<int64_t>();
    }
    if (!qr.status().ok()) return qr.status();
  }
  if (m.expert_dtype == ExpertDtype::kFp4 && m.hidden_size % kMxfp4Group != 0)
    return invalid_argument(
        key_error("expert_dtype", "fp4 needs hidden_size divisible by 32 (MXFP4 groups), got " +
                                      std::to_string(m.hidden_size)));
  if (m.expert_dtype == ExpertDtype::kFp4 && m.moe_intermediate_size % kMxfp4Group != 0)
    return invalid_argument(key_error(
        "expert_dtype", "fp4 needs moe_intermediate_size divisible by 32 (MXFP4 groups), got " +
                            std::to_string(m.moe_intermediate_size)));
  if (!r.status().ok()) return r.status();
  return m;
}

// ----------------------------------------------------------------------------------- RoPE

std::vector<double> rope_inv_freq(int64_t dim, double theta, const Yarn* yarn) {
  const int64_t half = dim / 2;
  std::vector<double> f(half);
  for (int64_t i = 0; i < half; ++i) f[i] = std::pow(theta, -static_cast<double>(2 * i) / dim);
  if (yarn != nullptr && yarn->original_max_position_embeddings > 0) {
    // The dim at which a frequency makes `rotations` turns over the original context.
    auto correction_dim = [&](double rotations) {
      return dim *
             std::log(static_cast<double>(yarn->original_max_position_embeddings) /
                      (rotations * 2 * M_PI)) /
             (2 * std::log(theta));
    };
    double low = std::max(std::floor(correction_dim(yarn->beta_fast)), 0.0);
    double high =
        std::min(std::ceil(correction_dim(yarn->beta_slow)), static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      f[i] = f[i] / yarn->factor * ramp + f[i] * (1 - ramp);
    }
  }
  return f;
}

std::vector<double> layer_rope_inv_freq(const DeepseekV4Config& c, int64_t layer) {
  if (c.compress_ratio(layer) != 0)
    return rope_inv_freq(c.qk_rope_head_dim, c.compress_rope_theta, &c.yarn);
  return rope_inv_freq(c.qk_rope_head_dim, c.rope_theta, nullptr);
}

void rope_interleaved_ref(double* x, int64_t rope_dim, int64_t pos, const double* inv_freq,
                          bool inverse) {
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    const double a = (inverse ? -1.0 : 1.0) * static_cast<double>(pos) * inv_freq[i];
    const double c = std::cos(a), s = std::sin(a);
    const double x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * c - x1 * s;
    x[2 * i + 1] = x0 * s + x1 * c;
  }
}

void rope_interleaved(float* x, int64_t rope_dim, int64_t pos, const double* inv_freq,
                      bool inverse) {
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    const double a = (inverse ? -1.0 : 1.0) * static_cast<double>(pos) * inv_freq[i];
    const float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
    const float x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = x0 * c - x1 * s;
    x[2 * i + 1] = x0 * s + x1 * c;
  }
}

// ------------------------------------------------------------------------------------ mHC

namespace {

double sigmoid_d(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
float sigmoid_f(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// The Sinkhorn part of hc_split_sinkhorn on m [hc, hc] in place (T = double or float).
template <typename T>
void sinkhorn(T* m, int hc, int iters, T eps) {
  for (int j = 0; j < hc; ++j) {  // row softmax + eps
    T* row = m + j * hc;
    const T mx = *std::max_element(row, row + hc);
    T sum = 0;
    for (int k = 0; k < hc; ++k) sum += row[k] = std::exp(row[k] - mx);
    for (int k = 0; k < hc; ++k) row[k] = row[k] / sum + eps;
  }
  auto columns = [&] {
    for (int k = 0; k < hc; ++k) {
      T sum = 0;
      for (int j = 0; j < hc; ++j) sum += m[j * hc + k];
      for (int j = 0; j < hc; ++j) m[j * hc + k] /= sum + eps;
    }
  };
  auto rows = [&] {
    for (int j = 0; j < hc; ++j) {
      T sum = 0;
      for (int k = 0; k < hc; ++k) sum += m[j * hc + k];
      for (int k = 0; k < hc; ++k) m[j * hc + k] /= sum + eps;
    }
  };
  columns();
  for (int it = 1; it < iters; ++it) {
    rows();
    columns();
  }
}

}  // namespace

void hc_split_sinkhorn_ref(const double* mixes, const double* scale, const double* base, int hc,
                           int iters, double eps, double* pre, double* post, double* comb) {
  for (int j = 0; j < hc; ++j) pre[j] = sigmoid_d(mixes[j] * scale[0] + base[j]) + eps;
  for (int j = 0; j < hc; ++j) post[j] = 2 * sigmoid_d(mixes[hc + j] * scale[1] + base[hc + j]);
  for (int i = 0; i < hc * hc; ++i) comb[i] = mixes[2 * hc + i] * scale[2] + base[2 * hc + i];
  sinkhorn(comb, hc, iters, eps);
}

namespace {

// mixes[r] = (fn[r] . flat) / rms(flat), flat = x [hc*dim] (double).
void hc_mixes_ref(const double* x, int64_t n, const double* fn, int64_t rows, double norm_eps,
                  double* mixes) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv_rms = 1.0 / std::sqrt(ss / n + norm_eps);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += fn[r * n + i] * x[i];
    mixes[r] = acc * inv_rms;
  }
}

}  // namespace

void hc_pre_ref(const double* x, int hc, int64_t dim, const double* fn, const double* scale,
                const double* base, int iters, double hc_eps, double norm_eps, double* y,
                double* post, double* comb) {
  const int64_t mix = (2 + hc) * hc;
  std::vector<double> mixes(mix), pre(hc);
  hc_mixes_ref(x, hc * dim, fn, mix, norm_eps, mixes.data());
  hc_split_sinkhorn_ref(mixes.data(), scale, base, hc, iters, hc_eps, pre.data(), post, comb);
  for (int64_t d = 0; d < dim; ++d) {
    double acc = 0;
    for (int j = 0; j < hc; ++j) acc += pre[j] * x[j * dim + d];
    y[d] = acc;
  }
}

void hc_post_ref(const double* f, const double* residual, const double* post, const double* comb,
                 int hc, int64_t dim, double* out) {
  for (int k = 0; k < hc; ++k)
    for (int64_t d = 0; d < dim; ++d) {
      double acc = post[k] * f[d];
      for (int j = 0; j < hc; ++j) acc += comb[j * hc + k] * residual[j * dim + d];
      out[k * dim + d] = acc;
    }
}

void hc_head_ref(const double* x, int hc, int64_t dim, const double* fn, const double* scale,
                 const double* base, double hc_eps, double norm_eps, double* y) {
  std::vector<double> mixes(hc);
  hc_mixes_ref(x, hc * dim, fn, hc, norm_eps, mixes.data());
  for (int j = 0; j < hc; ++j) mixes[j] = sigmoid_d(mixes[j] * scale[0] + base[j]) + hc_eps;
  for (int64_t d = 0; d < dim; ++d) {
    double acc = 0;
    for (int j = 0; j < hc; ++j) acc += mixes[j] * x[j * dim + d];
    y[d] = acc;
  }
}

namespace {

void for_tokens(int64_t n, ThreadPool* pool, FunctionRef<void(int64_t, int64_t)> fn) {
  if (pool == nullptr || n < 2)
    fn(0, n);
  else
    pool->parallel_for(n, 1, fn);
}

// mixes[r] = (fn[r] . x) / rms(x) in float32 (the sum of squares in double: hc*dim is large).
void hc_mixes(const float* x, int64_t n, const float* fn, int64_t rows, float norm_eps,
              float* mixes) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv_rms = static_cast<float>(1.0 / std::sqrt(ss / n + norm_eps));
  for (int64_t r = 0; r < rows; ++r) {
    const float* w = fn + r * n;
    float acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += w[i] * x[i];
    mixes[r] = acc * inv_rms;
  }
}

}  // namespace

void hc_pre(const float* x, int64_t n, int hc, int64_t dim, const HcWeights& w, int iters,
            float hc_eps, float norm_eps, float* y, float* post, float* comb, ThreadPool* pool) {
  const int64_t mix = (2 + hc) * hc;
  for_tokens(n, pool, [&](int64_t b, int64_t e) {
    std::vector<float> mixes(mix), pre(hc);
    for (int64_t t = b; t < e; ++t) {
      const float* xt = x + t * hc * dim;
      hc_mixes(xt, hc * dim, w.fn, mix, norm_eps, mixes.data());
      float* pt = post + t * hc;
      float* ct = comb + t * hc * hc;
      for (int j = 0; j < hc; ++j) pre[j] = sigmoid_f(mixes[j] * w.scale[0] + w.base[j]) + hc_eps;
      for (int j = 0; j < hc; ++j)
        pt[j] = 2 * sigmoid_f(mixes[hc + j] * w.scale[1] + w.base[hc + j]);
      for (int i = 0; i < hc * hc; ++i) ct[i] = mixes[2 * hc + i] * w.scale[2] + w.base[2 * hc + i];
      sinkhorn(ct, hc, iters, hc_eps);
      float* yt = y + t * dim;
      for (int64_t d = 0; d < dim; ++d) yt[d] = pre[0] * xt[d];
      for (int j = 1; j < hc; ++j)
        for (int64_t d = 0; d < dim; ++d) yt[d] += pre[j] * xt[j * dim + d];
    }
  });
}

void hc_post(const float* f, const float* residual, const float* post, const float* comb, int64_t n,
             int hc, int64_t dim, float* out, ThreadPool* pool) {
  for_tokens(n, pool, [&](int64_t b, int64_t e) {
    std::vector<float> tmp(hc * dim);
    for (int64_t t = b; t < e; ++t) {
      const float* ft = f + t * dim;
      const float* rt = residual + t * hc * dim;
      const float* pt = post + t * hc;
      const float* ct = comb + t * hc * hc;
      for (int k = 0; k < hc; ++k) {
        float* o = tmp.data() + k * dim;
        for (int64_t d = 0; d < dim; ++d) o[d] = pt[k] * ft[d];
        for (int j = 0; j < hc; ++j) {
          const float cjk = ct[j * hc + k];
          const float* rj = rt + j * dim;
          for (int64_t d = 0; d < dim; ++d) o[d] += cjk * rj[d];
        }
      }
      std::copy(tmp.begin(), tmp.end(), out + t * hc * dim);
    }
  });
}

void hc_head(const float* x, int64_t n, int hc, int64_t dim, const HcWeights& w, float hc_eps,
             float norm_eps, float* y, ThreadPool* pool) {
  for_tokens(n, pool, [&](int64_t b, int64_t e) {
    std::vector<float> pre(hc);
    for (int64_t t = b; t < e; ++t) {
      const float* xt = x + t * hc * dim;
      hc_mixes(xt, hc * dim, w.fn, hc, norm_eps, pre.data());
      for (int j = 0; j < hc; ++j) pre[j] = sigmoid_f(pre[j] * w.scale[0] + w.base[j]) + hc_eps;
      float* yt = y + t * dim;
      for (int64_t d = 0; d < dim; ++d) yt[d] = pre[0] * xt[d];
      for (int j = 1; j < hc; ++j)
        for (int64_t d = 0; d < dim; ++d) yt[d] += pre[j] * xt[j * dim + d];
    }
  });
}

// -------------------------------------------------------------------------------- routing

Status RoutingConfig::validate() const {
  if (num_experts < 1 || num_experts > 4096)
    return invalid_argument("MoE routing: n_routed_experts must be in [1, 4096], got " +
                            std::to_string(num_experts));
  if (top_k < 1 || top_k > num_experts)
    return invalid_argument(
        "MoE routing: num_experts_per_tok must be in [1, n_routed_experts], got " +
        std::to_string(top_k));
  if (!(scaling > 0) || !std::isfinite(scaling))
    return invalid_argument("MoE routing: routed_scaling_factor must be > 0");
  return ok_status();
}

RoutingConfig routing_config(const DeepseekV4Config& c) {
  RoutingConfig rc;
  rc.num_experts = static_cast<int>(c.n_routed_experts);
  rc.top_k = static_cast<int>(c.num_experts_per_tok);
  rc.scoring = c.scoring;
  rc.normalize = c.norm_topk_prob;
  rc.scaling = c.routed_scaling_factor;
  return rc;
}

namespace {

template <typename T>
void scores_of(Scoring s, const T* logits, int n, T* out) {
  switch (s) {
    case Scoring::kSqrtSoftplus:
      for (int e = 0; e < n; ++e) {
        const T x = logits[e];
        // softplus(x) = max(x, 0) + log1p(exp(-|x|)), stable for large |x|.
        out[e] = std::sqrt(std::max(x, T(0)) + std::log1p(std::exp(-std::abs(x))));
      }
      break;
    case Scoring::kSigmoid:
      for (int e = 0; e < n; ++e) out[e] = T(1) / (T(1) + std::exp(-logits[e]));
      break;
    case Scoring::kSoftmax: {
      const T mx = *std::max_element(logits, logits + n);
      T sum = 0;
      for (int e = 0; e < n; ++e) sum += out[e] = std::exp(logits[e] - mx);
      for (int e = 0; e < n; ++e) out[e] /= sum;
      break;
    }
  }
}

template <typename T>
void route(const RoutingConfig& rc, const T* logits, const T* bias, const int32_t* hash_ids,
           int32_t* ids, T* weights) {
  const int n = rc.num_experts;
  std::vector<T> scores(n);
  scores_of(rc.scoring, logits, n, scores.data());
  if (hash_ids != nullptr) {
    std::copy(hash_ids, hash_ids + rc.top_k, ids);
  } else {
    std::vector<T> sel(scores);
    if (bias != nullptr)
      for (int e = 0; e < n; ++e) sel[e] += bias[e];
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(
        order.begin(), order.begin() + rc.top_k, order.end(),
        [&](int32_t a, int32_t b) { return sel[a] > sel[b] || (sel[a] == sel[b] && a < b); });
    std::copy(order.begin(), order.begin() + rc.top_k, ids);
  }
  T sum = 0;
  for (int i = 0; i < rc.top_k; ++i) sum += weights[i] = scores[ids[i]];
  const bool renorm = rc.normalize && rc.scoring != Scoring::kSoftmax;
  for (int i = 0; i < rc.top_k; ++i)
    weights[i] = (renorm ? weights[i] / sum : weights[i]) * static_cast<T>(rc.scaling);
}

}  // namespace

void route_token_ref(const RoutingConfig& rc, const double* logits, const double* bias,
                     const int32_t* hash_ids, int32_t* ids, double* weights) {
  route(rc, logits, bias, hash_ids, ids, weights);
}

void route_token(const RoutingConfig& rc, const float* logits, const float* bias,
                 const int32_t* hash_ids, int32_t* ids, float* weights) {
  route(rc, logits, bias, hash_ids, ids, weights);
}

Status check_hash_table(const int32_t* t, int64_t vocab, int top_k, int num_experts) {
  for (int64_t v = 0; v < vocab; ++v)
    for (int i = 0; i < top_k; ++i) {
      const int32_t e = t[v * top_k + i];
      if (e < 0 || e >= num_experts)
        return data_loss("ffn.gate.tid2eid: token " + std::to_string(v) + " routes to expert " +
                         std::to_string(e) + ", outside [0, " + std::to_string(num_experts) + ")");
      for (int j = 0; j < i; ++j)
        if (t[v * top_k + j] == e)
          return data_loss("ffn.gate.tid2eid: token " + std::to_string(v) + " lists expert " +
                           std::to_string(e) + " twice");
    }
  return ok_status();
}

double swiglu_clamped_ref(double gate, double up, double limit) {
  if (limit > 0) {
    up = std::clamp(up, -limit, limit);
    gate = std::min(gate, limit);
  }
  return gate / (1.0 + std::exp(-gate)) * up;
}

void swiglu_clamped(const float* gate, const float* up, int64_t n, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    float g = gate[i], u = up[i];
    if (limit > 0) {
      u = std::clamp(u, -limit, limit);
      g = std::min(g, limit);
    }
    out[i] = g / (1.0f + std::exp(-g)) * u;
  }
}

// --------------------------------------------------------------------------- MXFP4 / FP8

namespace {
constexpr float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
}

double e2m1_value(uint8_t nibble) {
  // Decoded from the bit fields (the table above is checked against this in the tests).
  const int sign = (nibble >> 3) & 1, exp = (nibble >> 1) & 3, man = nibble & 1;
  const double mag = exp == 0 ? 0.5 * man : std::ldexp(1.0 + 0.5 * man, exp - 1);
  return sign ? -mag : mag;
}

double e8m0_value(uint8_t e) {
  if (e == 0xff) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, static_cast<int>(e) - 127);
}

Status check_mxfp4_shape(int64_t n, int64_t k) {
  if (n <= 0 || k <= 0 || k % kMxfp4Group != 0)
    return invalid_argument("MXFP4 weight [" + std::to_string(n) + ", " + std::to_string(k) +
                            "]: the input dim must be a positive multiple of 32");
  return ok_status();
}

void dequantize_mxfp4_ref(const uint8_t* packed, const uint8_t* scales, int64_t n, int64_t k,
                          double* w) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const uint8_t byte = packed[i * (k / 2) + j / 2];
      const uint8_t nib = (j % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
      w[i * k + j] = e2m1_value(nib) * e8m0_value(scales[i * (k / kMxfp4Group) + j / kMxfp4Group]);
    }
}

void mxfp4_matmul(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t m,
                  int64_t n, int64_t k, float* y, ThreadPool* pool) {
  kernels::mxfp4_matmul_plain(x, packed, scales, m, n, k, y, pool);
}

void quantize_mxfp4(const float* w, int64_t n, int64_t k, uint8_t* packed, uint8_t* scales) {
  const int64_t groups = k / kMxfp4Group;
  std::fill(packed, packed + n * (k / 2), 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t g = 0; g < groups; ++g) {
      const float* src = w + i * k + g * kMxfp4Group;
      float amax = 0;
      for (int j = 0; j < kMxfp4Group; ++j) amax = std::max(amax, std::abs(src[j]));
      int exp =
          amax > 0 ? static_cast<int>(std::ceil(std::log2(static_cast<double>(amax) / 6.0))) : -126;
      // log2 of an exact power of two can land a hair above the integer: step back when the
      // smaller power still covers amax.
      if (amax > 0 && std::ldexp(6.0, exp - 1) >= amax) --exp;
      exp = std::clamp(exp, -127, 127);
      scales[i * groups + g] = static_cast<uint8_t>(exp + 127);
      const double scale = std::ldexp(1.0, exp);
      for (int j = 0; j < kMxfp4Group; ++j) {
        const double v = std::clamp(src[j] / scale, -6.0, 6.0);
        int best = 0;
        double best_d = std::numeric_limits<double>::infinity();
        for (int c = 0; c < 8; ++c) {
          const double d = std::abs(std::abs(v) - kE2m1[c]);
          if (d < best_d || (d == best_d && (c & 1) == 0 && (best & 1) == 1)) {
            best = c;
            best_d = d;
          }
        }
        const uint8_t code = static_cast<uint8_t>(best | (v < 0 && best != 0 ? 8 : 0));
        const int64_t idx = i * (k / 2) + (g * kMxfp4Group + j) / 2;
        packed[idx] |= (j % 2 == 0) ? code : static_cast<uint8_t>(code << 4);
      }
    }
}

void dequantize_fp8_ue8m0_ref(const uint8_t* q, const uint8_t* scales, int64_t n, int64_t k,
                              int64_t bn, int64_t bk, double* w) {
  const int64_t kb = (k + bk - 1) / bk;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j)
      w[i * k + j] = static_cast<double>(fp8_e4m3_to_f32_reference(q[i * k + j])) *
                     e8m0_value(scales[(i / bn) * kb + j / bk]);
}

Status f32_scales_to_e8m0(const float* s, int64_t count, const std::string& what, uint8_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    int e = 0;
    const double m = std::frexp(static_cast<double>(s[i]), &e);  // s = m * 2^e, m in [0.5, 1)
    const int exp = e - 1;
    if (!(s[i] > 0) || m != 0.5 || exp < -127 || exp > 127)
      return data_loss(what + ": scale " + std::to_string(i) + " (" + std::to_string(s[i]) +
                       ") is not a power of two in e8m0's range (scale_fmt ue8m0)");
    out[i] = static_cast<uint8_t>(exp + 127);
  }
  return ok_status();
}

// ------------------------------------------------------------------------- checkpoint

int64_t TensorSpec::bytes() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const int64_t size = dtype == "F32" ? 4 : dtype == "BF16" ? 2 : dtype == "I64" ? 8 : 1;
  return n * size;
}

std::vector<TensorSpec> checkpoint_tensors(const DeepseekV4Config& c, bool include_mtp) {
  std::vector<TensorSpec> t;
  const int64_t dim = c.hidden_size, h = c.num_attention_heads, hd = c.head_dim;
  const int64_t ql = c.q_lora_rank, inter = c.moe_intermediate_size, hc = c.hc_mult;
  auto add = [&](const std::string& name, const char* dtype, std::vector<int64_t> shape) {
    t.push_back({name, dtype, std::move(shape)});
  };
  auto blocks = [](int64_t n, int64_t b) { return (n + b - 1) / b; };
  // FP8 block scales: e8m0 bytes in the MXFP4-expert checkpoints, f32 in the FP8-expert (Base)
  // ones (vLLM deepseek_v4.py, DeepseekV4FP8Config.is_scale_e8m0).
  const char* block_scale = c.expert_dtype == ExpertDtype::kFp4 ? "F8_E8M0" : "F32";
  auto linear = [&](const std::string& name, int64_t n, int64_t k) {
    if (!c.fp8_weights) return add(name + ".weight", "BF16", {n, k});
    add(name + ".weight", "F8_E4M3", {n, k});
    add(name + ".scale", block_scale, {blocks(n, c.weight_block_n), blocks(k, c.weight_block_k)});
  };
  auto expert = [&](const std::string& name, int64_t n, int64_t k) {
    switch (c.expert_dtype) {
      case ExpertDtype::kFp4:
        add(name + ".weight", "I8", {n, k / 2});
        add(name + ".scale", "F8_E8M0", {n, k / kMxfp4Group});
        return;
      case ExpertDtype::kFp8:
        add(name + ".weight", "F8_E4M3", {n, k});
        add(name + ".scale", block_scale,
            {blocks(n, c.weight_block_n), blocks(k, c.weight_block_k)});
        return;
      case ExpertDtype::kBf16:
        return linear(name, n, k);
    }
  };
  auto hc_set = [&](const std::string& p, const std::string& kind, int64_t rows, int64_t scales) {
    add(p + "hc_" + kind + "_base", "F32", {rows});
    add(p + "hc_" + kind + "_fn", "F32", {rows, hc * dim});
    add(p + "hc_" + kind + "_scale", "F32", {scales});
  };
  auto compressor = [&](const std::string& p, int ratio, int64_t d) {
    const int64_t coff = ratio == 4 ? 2 : 1;
    add(p + "ape", "F32", {ratio, coff * d});
    add(p + "norm.weight", "BF16", {d});
    add(p + "wgate.weight", "BF16", {coff * d, dim});
    add(p + "wkv.weight", "BF16", {coff * d, dim});
  };
  auto layer = [&](const std::string& p, int ratio, bool hash) {
    add(p + "attn.attn_sink", "F32", {h});
    add(p + "attn.q_norm.weight", "BF16", {ql});
    add(p + "attn.kv_norm.weight", "BF16", {hd});
    linear(p + "attn.wq_a", ql, dim);
    linear(p + "attn.wq_b", h * hd, ql);
    linear(p + "attn.wkv", hd, dim);
    linear(p + "attn.wo_a", c.o_groups * c.o_lora_rank, h * hd / c.o_groups);
    linear(p + "attn.wo_b", dim, c.o_groups * c.o_lora_rank);
    if (ratio != 0) compressor(p + "attn.compressor.", ratio, hd);
    if (ratio == 4) {
      compressor(p + "attn.indexer.compressor.", 4, c.index_head_dim);
      add(p + "attn.indexer.weights_proj.weight", "BF16", {c.index_n_heads, dim});
      linear(p + "attn.indexer.wq_b", c.index_n_heads * c.index_head_dim, ql);
    }
    for (int64_t e = 0; e < c.n_routed_experts; ++e) {
      const std::string q = p + "ffn.experts." + std::to_string(e) + ".";
      expert(q + "w1", inter, dim);
      expert(q + "w3", inter, dim);
      expert(q + "w2", dim, inter);
    }
    add(p + "ffn.gate.weight", "BF16", {c.n_routed_experts, dim});
    if (hash)
      add(p + "ffn.gate.tid2eid", "I64", {c.vocab_size, c.num_experts_per_tok});
    else
      add(p + "ffn.gate.bias", "F32", {c.n_routed_experts});
    const int64_t shared = inter * c.n_shared_experts;
    if (shared > 0) {
      linear(p + "ffn.shared_experts.w1", shared, dim);
      linear(p + "ffn.shared_experts.w3", shared, dim);
      linear(p + "ffn.shared_experts.w2", dim, shared);
    }
    add(p + "attn_norm.weight", "BF16", {dim});
    add(p + "ffn_norm.weight", "BF16", {dim});
    hc_set(p, "attn", c.hc_mix_dim(), 3);
    hc_set(p, "ffn", c.hc_mix_dim(), 3);
  };
  add("embed.weight", "BF16", {c.vocab_size, dim});
  add("head.weight", "BF16", {c.vocab_size, dim});
  add("norm.weight", "BF16", {dim});
  hc_set("", "head", hc, 1);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    layer("layers." + std::to_string(l) + ".", c.compress_ratio(l), c.hash_routed(l));
  if (include_mtp)
    for (int64_t k = 0; k < c.num_nextn_predict_layers; ++k) {
      const std::string p = "mtp." + std::to_string(k) + ".";
      layer(p, 0, false);  // the MTP layer: ratio 1 (window only), never hash-routed
      linear(p + "e_proj", dim, dim);
      linear(p + "h_proj", dim, dim);
      add(p + "enorm.weight", "BF16", {dim});
      add(p + "hnorm.weight", "BF16", {dim});
      add(p + "norm.weight", "BF16", {dim});
      hc_set(p, "head", hc, 1);
    }
  return t;
}

// ------------------------------------------------------------------------------ KV sizes

Result<int64_t> kv_token_bytes_fp8(int64_t head_dim, int64_t rope_dim) {
  const int64_t nope = head_dim - rope_dim;
  if (rope_dim <= 0 || nope <= 0 || nope % 64 != 0)
    return invalid_argument(
        "DeepSeek-V4 FP8 KV layout needs head_dim - qk_rope_head_dim to be a "
        "positive multiple of 64 (one ue8m0 scale per 64 values), got " +
        std::to_string(head_dim) + " - " + std::to_string(rope_dim));
  return nope + 2 * rope_dim + nope / 64 + 1;  // vLLM's head_bytes: one pad byte
}

int64_t Fp8KvBlockLayout::block_bytes() const {
  const int64_t raw = block_tokens * (data_bytes() + scale_bytes());
  return (raw + data_bytes() - 1) / data_bytes() * data_bytes();
}

Result<Fp8KvBlockLayout> fp8_kv_block_layout(int64_t head_dim, int64_t rope_dim,
                                             int64_t block_tokens) {
  STRATA_ASSIGN_OR_RETURN(const int64_t token_bytes, kv_token_bytes_fp8(head_dim, rope_dim));
  (void)token_bytes;
  if (block_tokens <= 0)
    return invalid_argument("FP8 KV block size must be positive, got " +
                            std::to_string(block_tokens));
  Fp8KvBlockLayout l;
  l.block_tokens = block_tokens;
  l.nope = head_dim - rope_dim;
  l.rope = rope_dim;
  return l;
}

void pack_kv_token_fp8(const Fp8KvBlockLayout& l, const float* row, int64_t slot, uint8_t* block) {
  uint8_t* data = block + l.data_offset(slot);
  uint8_t* scales = block + l.scale_offset(slot);
  for (int64_t g = 0; g < l.nope / 64; ++g) {
    float amax = 1e-4f;
    for (int i = 0; i < 64; ++i) amax = std::max(amax, std::abs(row[g * 64 + i]));
    const int exp = static_cast<int>(std::ceil(std::log2(static_cast<double>(amax) / 448.0)));
    const int e = std::clamp(exp, -127, 127);
    scales[g] = static_cast<uint8_t>(e + 127);
    const float inv = static_cast<float>(std::ldexp(1.0, -e));
    for (int i = 0; i < 64; ++i) data[g * 64 + i] = f32_to_fp8_e4m3(row[g * 64 + i] * inv);
  }
  scales[l.nope / 64] = 0;
  for (int64_t i = 0; i < l.rope; ++i) {
    const uint16_t b = f32_to_bf16(row[l.nope + i]);
    std::memcpy(data + l.nope + 2 * i, &b, 2);
  }
}

void unpack_kv_token_fp8(const Fp8KvBlockLayout& l, const uint8_t* block, int64_t slot,
                         float* row) {
  const uint8_t* data = block + l.data_offset(slot);
  const uint8_t* scales = block + l.scale_offset(slot);
  for (int64_t g = 0; g < l.nope / 64; ++g) {
    const float s = static_cast<float>(e8m0_value(scales[g]));
    for (int i = 0; i < 64; ++i) row[g * 64 + i] = fp8_e4m3_to_f32(data[g * 64 + i]) * s;
  }
  for (int64_t i = 0; i < l.rope; ++i) {
    uint16_t b;
    std::memcpy(&b, data + l.nope + 2 * i, 2);
    row[l.nope + i] = bf16_to_f32(b);
  }
}

KvCounts kv_counts(const DeepseekV4Config& c, int64_t context_len) {
  KvCounts k;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    k.window_rows += std::min(context_len, c.sliding_window);
    switch (c.attn_kind(l)) {
      case AttnKind::kWindow:
        ++k.window_layers;
        break;
      case AttnKind::kCsa:
        ++k.csa_layers;
        k.c4_rows += context_len / 4;
        k.indexer_rows += context_len / 4;
        break;
      case AttnKind::kHca:
        ++k.hca_layers;
        k.c128_rows += context_len / 128;
        break;
    }
  }
  return k;
}

Result<KvBytes> kv_bytes(const DeepseekV4Config& c, int64_t context_len) {
  STRATA_ASSIGN_OR_RETURN(const int64_t row, kv_token_bytes_fp8(c.head_dim, c.qk_rope_head_dim));
  const int64_t index_row = c.index_head_dim + 4 * ((c.index_head_dim + 127) / 128);
  const KvCounts n = kv_counts(c, context_len);
  KvBytes b;
  b.window = n.window_rows * row;
  b.c4 = n.c4_rows * row;
  b.c128 = n.c128_rows * row;
  b.indexer = n.indexer_rows * index_row;
  const int64_t per_csa = (8 * 2 * c.head_dim + 8 * 2 * c.index_head_dim) * 2 * 4;
  const int64_t per_hca = 128 * c.head_dim * 2 * 4;
  b.compressor_state = n.csa_layers * per_csa + n.hca_layers * per_hca;
  const int64_t window_rows = std::min(context_len, c.sliding_window);
  b.decode_read = n.window_layers * window_rows * row +
                  n.csa_layers * ((window_rows + std::min(c.index_topk, context_len / 4)) * row +
                                  (context_len / 4) * index_row) +
                  n.hca_layers * (window_rows + context_len / 128) * row;
  return b;
}

int64_t full_attention_kv_bytes(int64_t num_layers, int64_t context_len) {
  return num_layers * context_len * 656;
}

Result<int64_t> max_context_for_kv_budget(const DeepseekV4Config& c, int64_t budget_bytes) {
  STRATA_ASSIGN_OR_RETURN(const KvBytes one, kv_bytes(c, 1));
  if (one.total() > budget_bytes) return int64_t{0};
  int64_t lo = 1, hi = 2;  // total(lo) fits; find hi that does not
  while (true) {
    STRATA_ASSIGN_OR_RETURN(const KvBytes b, kv_bytes(c, hi));
    if (b.total() > budget_bytes) break;
    lo = hi;
    if (hi > (int64_t{1} << 40)) return lo;  // beyond any context we would serve
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    STRATA_ASSIGN_OR_RETURN(const KvBytes b, kv_bytes(c, mid));
    (b.total() <= budget_bytes ? lo : hi) = mid;
  }
  return lo;
}

std::string kv_summary(const DeepseekV4Config& c, int64_t context_len) {
  auto row = kv_token_bytes_fp8(c.head_dim, c.qk_rope_head_dim);
  auto b = kv_bytes(c, context_len);
  if (!row.ok() || !b.ok())
    return "DeepSeek-V4 KV: " + (row.ok() ? b.status() : row.status()).message();
  const KvCounts n = kv_counts(c, context_len);
  const int64_t index_row = c.index_head_dim + 4 * ((c.index_head_dim + 127) / 128);
  auto mib = [](int64_t x) { return std::to_string(x / (1024 * 1024)) + " MiB"; };
  return "DeepSeek-V4 KV (fp8): " + std::to_string(*row) + " B per window/c4/c128 row, " +
         std::to_string(index_row) +
         " B per indexer key; layers: " + std::to_string(n.window_layers) + " window-only, " +
         std::to_string(n.csa_layers) + " c4+indexer, " + std::to_string(n.hca_layers) +
         " c128; at " + std::to_string(context_len) + " tokens per sequence: window " +
         mib(b->window) + ", c4 " + mib(b->c4) + ", c128 " + mib(b->c128) + ", indexer " +
         mib(b->indexer) + ", compressor state " + mib(b->compressor_state) +
         ", decode step reads " + mib(b->decode_read);
}

// ----------------------------------------------------------------------- attention (ref)

namespace {

// y [out] = w [out, in] @ x [in]
void matvec_ref(const double* w, const double* x, int64_t out, int64_t in, double* y) {
  for (int64_t o = 0; o < out; ++o) {
    double acc = 0;
    for (int64_t i = 0; i < in; ++i) acc += w[o * in + i] * x[i];
    y[o] = acc;
  }
}

void rms_norm_ref(double* x, int64_t n, const double* weight, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * (weight != nullptr ? weight[i] : 1.0);
}

std::vector<double> random_vec(Rng& rng, int64_t n, double lo, double hi) {
  std::vector<double> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

}  // namespace

AttnWeights random_attn_weights(const DeepseekV4Config& c, int64_t layer, uint64_t seed) {
  Rng rng(seed * 1000003 + static_cast<uint64_t>(layer));
  const int64_t dim = c.hidden_size, hd = c.head_dim, h = c.num_attention_heads;
  auto mat = [&](int64_t out, int64_t in) {
    const double a = std::sqrt(3.0 / static_cast<double>(in));  // unit-variance outputs
    return random_vec(rng, out * in, -a, a);
  };
  auto norm = [&](int64_t n) { return random_vec(rng, n, 0.8, 1.2); };
  AttnWeights w;
  w.wq_a = mat(c.q_lora_rank, dim);
  w.q_norm = norm(c.q_lora_rank);
  w.wq_b = mat(h * hd, c.q_lora_rank);
  w.wkv = mat(hd, dim);
  w.kv_norm = norm(hd);
  w.attn_sink = random_vec(rng, h, -1.0, 1.0);
  w.wo_a = mat(c.o_groups * c.o_lora_rank, h * hd / c.o_groups);
  w.wo_b = mat(dim, c.o_groups * c.o_lora_rank);
  const int ratio = c.compress_ratio(layer);
  if (ratio != 0) {
    const int64_t coff = ratio == 4 ? 2 : 1;
    // Larger gate weights make the pooling clearly non-uniform.
    w.c_wkv = mat(coff * hd, dim);
    w.c_wgate = random_vec(rng, coff * hd * dim, -2.0 / std::sqrt(dim), 2.0 / std::sqrt(dim));
    w.c_ape = random_vec(rng, ratio * coff * hd, -1.0, 1.0);
    w.c_norm = norm(hd);
  }
  if (ratio == 4) {
    const int64_t ih = c.index_n_heads, id = c.index_head_dim;
    w.i_wq_b = mat(ih * id, c.q_lora_rank);
    w.i_weights = mat(ih, dim);
    w.i_c_wkv = mat(2 * id, dim);
    w.i_c_wgate = random_vec(rng, 2 * id * dim, -2.0 / std::sqrt(dim), 2.0 / std::sqrt(dim));
    w.i_c_ape = random_vec(rng, 4 * 2 * id, -1.0, 1.0);
    w.i_c_norm = norm(id);
  }
  return w;
}

Status check_attn_weights(const DeepseekV4Config& c, int64_t layer, const AttnWeights& w) {
  const int64_t dim = c.hidden_size, hd = c.head_dim, h = c.num_attention_heads;
  const int ratio = c.compress_ratio(layer);
  const int64_t coff = ratio == 4 ? 2 : 1;
  const int64_t ih = c.index_n_heads, id = c.index_head_dim;
  struct Item {
    const char* name;
    const std::vector<double>* v;
    int64_t size;
  };
  std::vector<Item> items = {
      {"wq_a", &w.wq_a, c.q_lora_rank * dim},
      {"q_norm", &w.q_norm, c.q_lora_rank},
      {"wq_b", &w.wq_b, h * hd * c.q_lora_rank},
      {"wkv", &w.wkv, hd * dim},
      {"kv_norm", &w.kv_norm, hd},
      {"attn_sink", &w.attn_sink, h},
      {"wo_a", &w.wo_a, c.o_groups * c.o_lora_rank * (h * hd / c.o_groups)},
      {"wo_b", &w.wo_b, dim * c.o_groups * c.o_lora_rank},
  };
  if (ratio != 0) {
    items.push_back({"compressor.wkv", &w.c_wkv, coff * hd * dim});
    items.push_back({"compressor.wgate", &w.c_wgate, coff * hd * dim});
    items.push_back({"compressor.ape", &w.c_ape, ratio * coff * hd});
    items.push_back({"compressor.norm", &w.c_norm, hd});
  }
  if (ratio == 4) {
    items.push_back({"indexer.wq_b", &w.i_wq_b, ih * id * c.q_lora_rank});
    items.push_back({"indexer.weights_proj", &w.i_weights, ih * dim});
    items.push_back({"indexer.compressor.wkv", &w.i_c_wkv, 2 * id * dim});
    items.push_back({"indexer.compressor.wgate", &w.i_c_wgate, 2 * id * dim});
    items.push_back({"indexer.compressor.ape", &w.i_c_ape, 4 * 2 * id});
    items.push_back({"indexer.compressor.norm", &w.i_c_norm, id});
  }
  for (const auto& it : items)
    if (static_cast<int64_t>(it.v->size()) != it.size)
      return invalid_argument("layers." + std::to_string(layer) + ".attn." + it.name + " has " +
                              std::to_string(it.v->size()) + " values, expected " +
                              std::to_string(it.size));
  return ok_status();
}

int64_t compress_ref(const double* x, int64_t t, int64_t dim, int ratio, int64_t d,
                     int64_t rope_dim, const double* wkv, const double* wgate, const double* ape,
                     const double* norm, double eps, const double* inv_freq,
                     std::vector<double>* rows) {
  const bool overlap = ratio == 4;
  const int64_t coff = overlap ? 2 : 1, width = coff * d;
  std::vector<double> kv(t * width), sc(t * width);
  for (int64_t i = 0; i < t; ++i) {
    matvec_ref(wkv, x + i * dim, width, dim, &kv[i * width]);
    matvec_ref(wgate, x + i * dim, width, dim, &sc[i * width]);
    for (int64_t ch = 0; ch < width; ++ch) sc[i * width + ch] += ape[(i % ratio) * width + ch];
  }
  const int64_t n = t / ratio;
  rows->assign(n * d, 0.0);
  std::vector<double> ks, ss;
  for (int64_t r = 0; r < n; ++r) {
    double* out = rows->data() + r * d;
    for (int64_t ch = 0; ch < d; ++ch) {
      ks.clear();
      ss.clear();
      if (overlap && r > 0)  // the previous window, through the first half of the channels
        for (int64_t i = (r - 1) * ratio; i < r * ratio; ++i) {
          ks.push_back(kv[i * width + ch]);
          ss.push_back(sc[i * width + ch]);
        }
      const int64_t off = overlap ? d : 0;
      for (int64_t i = r * ratio; i < (r + 1) * ratio; ++i) {
        ks.push_back(kv[i * width + off + ch]);
        ss.push_back(sc[i * width + off + ch]);
      }
      const double mx = *std::max_element(ss.begin(), ss.end());
      double num = 0, den = 0;
      for (size_t e = 0; e < ks.size(); ++e) {
        const double p = std::exp(ss[e] - mx);
        num += p * ks[e];
        den += p;
      }
      out[ch] = num / den;
    }
    rms_norm_ref(out, d, norm, eps);
    rope_interleaved_ref(out + d - rope_dim, rope_dim, r * ratio, inv_freq, false);
  }
  return n;
}

std::vector<int64_t> indexer_topk_ref(const double* q, const double* w, const double* keys,
                                      int64_t pos, int64_t heads, int64_t hd, int64_t topk) {
  const int64_t visible = (pos + 1) / 4;
  std::vector<double> score(visible, 0.0);
  const double scale =
      1.0 / std::sqrt(static_cast<double>(hd)) / std::sqrt(static_cast<double>(heads));
  for (int64_t r = 0; r < visible; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      double dot = 0;
      for (int64_t i = 0; i < hd; ++i) dot += q[h * hd + i] * keys[r * hd + i];
      score[r] += std::max(dot, 0.0) * w[h] * scale;
    }
  std::vector<int64_t> order(visible);
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = std::min(topk, visible);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

void attention_ref(const DeepseekV4Config& c, int64_t layer, const AttnWeights& w, const double* x,
                   int64_t t, double* out) {
  const int64_t dim = c.hidden_size, hd = c.head_dim, h = c.num_attention_heads;
  const int64_t rd = c.qk_rope_head_dim, ql = c.q_lora_rank, win = c.sliding_window;
  const int ratio = c.compress_ratio(layer);
  const double eps = c.rms_norm_eps;
  const std::vector<double> inv = layer_rope_inv_freq(c, layer);

  // Per-token q (after the per-head weightless norm and RoPE), qr and the window KV row.
  std::vector<double> qr(t * ql), q(t * h * hd), kv(t * hd);
  for (int64_t p = 0; p < t; ++p) {
    double* qrp = &qr[p * ql];
    matvec_ref(w.wq_a.data(), x + p * dim, ql, dim, qrp);
    rms_norm_ref(qrp, ql, w.q_norm.data(), eps);
    matvec_ref(w.wq_b.data(), qrp, h * hd, ql, &q[p * h * hd]);
    for (int64_t hh = 0; hh < h; ++hh) {
      double* qh = &q[(p * h + hh) * hd];
      rms_norm_ref(qh, hd, nullptr, eps);
      rope_interleaved_ref(qh + hd - rd, rd, p, inv.data(), false);
    }
    double* kvp = &kv[p * hd];
    matvec_ref(w.wkv.data(), x + p * dim, hd, dim, kvp);
    rms_norm_ref(kvp, hd, w.kv_norm.data(), eps);
    rope_interleaved_ref(kvp + hd - rd, rd, p, inv.data(), false);
  }

  // Compressed rows of the whole sequence (a token only sees the complete ones).
  std::vector<double> crow, ikeys;
  if (ratio != 0)
    compress_ref(x, t, dim, ratio, hd, rd, w.c_wkv.data(), w.c_wgate.data(), w.c_ape.data(),
                 w.c_norm.data(), eps, inv.data(), &crow);
  if (ratio == 4)
    compress_ref(x, t, dim, 4, c.index_head_dim, rd, w.i_c_wkv.data(), w.i_c_wgate.data(),
                 w.i_c_ape.data(), w.i_c_norm.data(), eps, inv.data(), &ikeys);

  const double softmax_scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const int64_t group_in = h * hd / c.o_groups;
  std::vector<const double*> keys;
  std::vector<double> o(h * hd), u(c.o_groups * c.o_lora_rank), logits;
  for (int64_t p = 0; p < t; ++p) {
    keys.clear();
    for (int64_t j = std::max<int64_t>(0, p - win + 1); j <= p; ++j) keys.push_back(&kv[j * hd]);
    if (ratio == 128) {
      for (int64_t r = 0; r < (p + 1) / ratio; ++r) keys.push_back(&crow[r * hd]);
    } else if (ratio == 4) {
      const int64_t ih = c.index_n_heads, id = c.index_head_dim;
      std::vector<double> iq(ih * id), iw(ih);
      matvec_ref(w.i_wq_b.data(), &qr[p * ql], ih * id, ql, iq.data());
      for (int64_t hh = 0; hh < ih; ++hh)
        rope_interleaved_ref(&iq[hh * id + id - rd], rd, p, inv.data(), false);
      matvec_ref(w.i_weights.data(), x + p * dim, ih, dim, iw.data());
      for (int64_t r :
           indexer_topk_ref(iq.data(), iw.data(), ikeys.data(), p, ih, id, c.index_topk))
        keys.push_back(&crow[r * hd]);
    }
    for (int64_t hh = 0; hh < h; ++hh) {
      const double* qh = &q[(p * h + hh) * hd];
      logits.assign(keys.size(), 0.0);
      double mx = w.attn_sink[hh];
      for (size_t k = 0; k < keys.size(); ++k) {
        double dot = 0;
        for (int64_t i = 0; i < hd; ++i) dot += qh[i] * keys[k][i];
        logits[k] = dot * softmax_scale;
        mx = std::max(mx, logits[k]);
      }
      double den = std::exp(w.attn_sink[hh] - mx);
      double* oh = &o[hh * hd];
      std::fill(oh, oh + hd, 0.0);
      for (size_t k = 0; k < keys.size(); ++k) {
        const double pk = std::exp(logits[k] - mx);
        den += pk;
        for (int64_t i = 0; i < hd; ++i) oh[i] += pk * keys[k][i];
      }
      for (int64_t i = 0; i < hd; ++i) oh[i] /= den;
      rope_interleaved_ref(oh + hd - rd, rd, p, inv.data(), true);
    }
    for (int64_t g = 0; g < c.o_groups; ++g)
      matvec_ref(&w.wo_a[g * c.o_lora_rank * group_in], &o[g * group_in], c.o_lora_rank, group_in,
                 &u[g * c.o_lora_rank]);
    matvec_ref(w.wo_b.data(), u.data(), dim, c.o_groups * c.o_lora_rank, out + p * dim);
  }
}

// ------------------------------------------------------------------- attention (float32)

namespace {

std::vector<float> to_f32(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

void matvec(const std::vector<float>& w, const float* x, int64_t out, int64_t in, float* y,
            int64_t row0 = 0) {
  for (int64_t o = 0; o < out; ++o) {
    const float* wr = w.data() + (row0 + o) * in;
    float acc = 0;
    for (int64_t i = 0; i < in; ++i) acc += wr[i] * x[i];
    y[o] = acc;
  }
}

void rms_norm(float* x, int64_t n, const float* weight, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * (weight != nullptr ? weight[i] : 1.0f);
}

}  // namespace

void AttentionDecoder::Compressor::init(int r, int64_t d, const std::vector<double>& wkv_d,
                                        const std::vector<double>& wgate_d,
                                        const std::vector<double>& ape_d,
                                        const std::vector<double>& norm_d) {
  ratio = r;
  out_dim = d;
  overlap = r == 4;
  const int64_t coff = overlap ? 2 : 1;
  wkv = to_f32(wkv_d);
  wgate = to_f32(wgate_d);
  ape = to_f32(ape_d);
  norm = to_f32(norm_d);
  kv_state.assign(coff * r * coff * d, 0.0f);
  score_state.assign(coff * r * coff * d, -std::numeric_limits<float>::infinity());
}

void AttentionDecoder::Compressor::push(const float* x, int64_t dim, int64_t pos, float eps,
                                        int64_t rope_dim, const double* inv_freq,
                                        const Fp8KvBlockLayout* fp8) {
  const int64_t coff = overlap ? 2 : 1, width = coff * out_dim;
  const int64_t slot = (overlap ? ratio : 0) + pos % ratio;
  float* kv = &kv_state[slot * width];
  float* sc = &score_state[slot * width];
  matvec(wkv, x, width, dim, kv);
  matvec(wgate, x, width, dim, sc);
  for (int64_t ch = 0; ch < width; ++ch) sc[ch] += ape[(pos % ratio) * width + ch];
  if ((pos + 1) % ratio != 0) return;
  std::vector<float> row(out_dim);
  for (int64_t ch = 0; ch < out_dim; ++ch) {
    // Entries: (overlap) the previous window's first-half channel, then this window's.
    float mx = -std::numeric_limits<float>::infinity();
    const int64_t n = coff * ratio;
    auto entry = [&](int64_t e, float* k, float* s) {
      const int64_t off = (overlap && e >= ratio) ? out_dim : 0;
      *k = kv_state[e * width + off + ch];
      *s = score_state[e * width + off + ch];
    };
    for (int64_t e = 0; e < n; ++e) {
      float k, s;
      entry(e, &k, &s);
      mx = std::max(mx, s);
    }
    float num = 0, den = 0;
    for (int64_t e = 0; e < n; ++e) {
      float k, s;
      entry(e, &k, &s);
      const float p = std::exp(s - mx);
      num += p * k;
      den += p;
    }
    row[ch] = num / den;
  }
  if (overlap) {  // this window becomes the previous one
    std::copy(kv_state.begin() + ratio * width, kv_state.end(), kv_state.begin());
    std::copy(score_state.begin() + ratio * width, score_state.end(), score_state.begin());
  }
  rms_norm(row.data(), out_dim, norm.data(), eps);
  rope_interleaved(row.data() + out_dim - rope_dim, rope_dim, pos + 1 - ratio, inv_freq, false);
  if (fp8 != nullptr) {  // through the cache's bytes
    std::vector<uint8_t> block(fp8->block_bytes());
    pack_kv_token_fp8(*fp8, row.data(), 0, block.data());
    unpack_kv_token_fp8(*fp8, block.data(), 0, row.data());
  }
  rows.insert(rows.end(), row.begin(), row.end());
}

AttentionDecoder::AttentionDecoder(const DeepseekV4Config& c, int64_t layer, const AttnWeights& w,
                                   bool fp8_kv)
    : c_(c),
      layer_(layer),
      ratio_(c.compress_ratio(layer)),
      inv_freq_(layer_rope_inv_freq(c, layer)),
      fp8_kv_(fp8_kv) {
  STRATA_CHECK(check_attn_weights(c, layer, w).ok());
  if (fp8_kv) {
    auto l = fp8_kv_block_layout(c.head_dim, c.qk_rope_head_dim, 1);
    STRATA_CHECK(l.ok());
    fp8_layout_ = *l;
  }
  wq_a_ = to_f32(w.wq_a);
  q_norm_ = to_f32(w.q_norm);
  wq_b_ = to_f32(w.wq_b);
  wkv_ = to_f32(w.wkv);
  kv_norm_ = to_f32(w.kv_norm);
  sink_ = to_f32(w.attn_sink);
  wo_a_ = to_f32(w.wo_a);
  wo_b_ = to_f32(w.wo_b);
  if (ratio_ != 0) comp_.init(ratio_, c.head_dim, w.c_wkv, w.c_wgate, w.c_ape, w.c_norm);
  if (ratio_ == 4) {
    icomp_.init(4, c.index_head_dim, w.i_c_wkv, w.i_c_wgate, w.i_c_ape, w.i_c_norm);
    i_wq_b_ = to_f32(w.i_wq_b);
    i_weights_ = to_f32(w.i_weights);
  }
  window_.assign(c.sliding_window * c.head_dim, 0.0f);
}

int64_t AttentionDecoder::compressed_rows() const {
  return ratio_ == 0 ? 0 : static_cast<int64_t>(comp_.rows.size()) / c_.head_dim;
}

void AttentionDecoder::step(const float* x, float* out) {
  const int64_t dim = c_.hidden_size, hd = c_.head_dim, h = c_.num_attention_heads;
  const int64_t rd = c_.qk_rope_head_dim, ql = c_.q_lora_rank, win = c_.sliding_window;
  const float eps = static_cast<float>(c_.rms_norm_eps);
  const int64_t p = pos_;

  std::vector<float> qr(ql), q(h * hd);
  matvec(wq_a_, x, ql, dim, qr.data());
  rms_norm(qr.data(), ql, q_norm_.data(), eps);
  matvec(wq_b_, qr.data(), h * hd, ql, q.data());
  for (int64_t hh = 0; hh < h; ++hh) {
    rms_norm(&q[hh * hd], hd, nullptr, eps);
    rope_interleaved(&q[hh * hd + hd - rd], rd, p, inv_freq_.data(), false);
  }
  float* kv = &window_[(p % win) * hd];
  matvec(wkv_, x, hd, dim, kv);
  rms_norm(kv, hd, kv_norm_.data(), eps);
  rope_interleaved(kv + hd - rd, rd, p, inv_freq_.data(), false);
  if (fp8_kv_) {  // stored as the FP8 cache stores it
    std::vector<uint8_t> block(fp8_layout_.block_bytes());
    pack_kv_token_fp8(fp8_layout_, kv, 0, block.data());
    unpack_kv_token_fp8(fp8_layout_, block.data(), 0, kv);
  }

  std::vector<const float*> keys;
  const int64_t first = std::max<int64_t>(0, p - win + 1);
  for (int64_t j = first; j <= p; ++j) keys.push_back(&window_[(j % win) * hd]);
  last_window_ = static_cast<int64_t>(keys.size());
  if (ratio_ != 0)
    comp_.push(x, dim, p, eps, rd, inv_freq_.data(), fp8_kv_ ? &fp8_layout_ : nullptr);
  if (ratio_ == 128) {
    for (int64_t r = 0; r < compressed_rows(); ++r) keys.push_back(&comp_.rows[r * hd]);
  } else if (ratio_ == 4) {
    icomp_.push(x, dim, p, eps, rd, inv_freq_.data(), nullptr);
    const int64_t ih = c_.index_n_heads, id = c_.index_head_dim;
    std::vector<float> iq(ih * id), iw(ih);
    matvec(i_wq_b_, qr.data(), ih * id, ql, iq.data());
    for (int64_t hh = 0; hh < ih; ++hh)
      rope_interleaved(&iq[hh * id + id - rd], rd, p, inv_freq_.data(), false);
    matvec(i_weights_, x, ih, dim, iw.data());
    const int64_t visible = static_cast<int64_t>(icomp_.rows.size()) / id;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(id) * ih));
    std::vector<float> score(visible, 0.0f);
    for (int64_t r = 0; r < visible; ++r) {
      const float* key = &icomp_.rows[r * id];
      for (int64_t hh = 0; hh < ih; ++hh) {
        float dot = 0;
        for (int64_t i = 0; i < id; ++i) dot += iq[hh * id + i] * key[i];
        score[r] += std::max(dot, 0.0f) * iw[hh] * scale;
      }
    }
    std::vector<int64_t> order(visible);
    std::iota(order.begin(), order.end(), 0);
    const int64_t k = std::min<int64_t>(c_.index_topk, visible);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      return score[a] > score[b] || (score[a] == score[b] && a < b);
    });
    for (int64_t i = 0; i < k; ++i) keys.push_back(&comp_.rows[order[i] * hd]);
  }
  last_compressed_ = static_cast<int64_t>(keys.size()) - last_window_;

  const float softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<float> o(h * hd), logits(keys.size());
  for (int64_t hh = 0; hh < h; ++hh) {
    const float* qh = &q[hh * hd];
    float mx = sink_[hh];
    for (size_t k = 0; k < keys.size(); ++k) {
      float dot = 0;
      for (int64_t i = 0; i < hd; ++i) dot += qh[i] * keys[k][i];
      logits[k] = dot * softmax_scale;
      mx = std::max(mx, logits[k]);
    }
    float den = std::exp(sink_[hh] - mx);
    float* oh = &o[hh * hd];
    for (size_t k = 0; k < keys.size(); ++k) {
      const float pk = std::exp(logits[k] - mx);
      den += pk;
      for (int64_t i = 0; i < hd; ++i) oh[i] += pk * keys[k][i];
    }
    for (int64_t i = 0; i < hd; ++i) oh[i] /= den;
    rope_interleaved(oh + hd - rd, rd, p, inv_freq_.data(), true);
  }
  const int64_t group_in = h * hd / c_.o_groups, olr = c_.o_lora_rank;
  std::vector<float> u(c_.o_groups * olr);
  for (int64_t g = 0; g < c_.o_groups; ++g)
    matvec(wo_a_, &o[g * group_in], olr, group_in, &u[g * olr], g * olr);
  matvec(wo_b_, u.data(), dim, c_.o_groups * olr, out);
  ++pos_;
}

// ------------------------------------------------------------------ MoE, block, model

namespace {

int64_t shared_dim(const DeepseekV4Config& c) {
  return c.moe_intermediate_size * c.n_shared_experts;
}

// SwiGLU expert on dense float64 weights: w2 @ (swiglu_clamped(w1 x, w3 x)).
void dense_expert_ref(const double* w1, const double* w3, const double* w2, int64_t dim,
                      int64_t inter, double limit, const double* x, double* y) {
  std::vector<double> g(inter), u(inter);
  matvec_ref(w1, x, inter, dim, g.data());
  matvec_ref(w3, x, inter, dim, u.data());
  for (int64_t i = 0; i < inter; ++i) g[i] = swiglu_clamped_ref(g[i], u[i], limit);
  matvec_ref(w2, g.data(), dim, inter, y);
}

}  // namespace

void moe_ref(const DeepseekV4Config& c, int64_t layer, const MoeWeights& w, const double* x,
             int32_t token_id, double* y) {
  const int64_t dim = c.hidden_size, inter = c.moe_intermediate_size;
  const RoutingConfig rc = routing_config(c);
  std::vector<double> logits(rc.num_experts), weights(rc.top_k);
  std::vector<int32_t> ids(rc.top_k);
  matvec_ref(w.gate.data(), x, rc.num_experts, dim, logits.data());
  const bool hash = c.hash_routed(layer);
  route_token_ref(rc, logits.data(), hash || w.bias.empty() ? nullptr : w.bias.data(),
                  hash ? &w.tid2eid[static_cast<int64_t>(token_id) * rc.top_k] : nullptr,
                  ids.data(), weights.data());
  const int64_t shared = shared_dim(c);
  std::fill(y, y + dim, 0.0);
  if (shared > 0)
    dense_expert_ref(w.shared_w1.data(), w.shared_w3.data(), w.shared_w2.data(), dim, shared,
                     c.swiglu_limit, x, y);
  std::vector<double> w1(inter * dim), w3(inter * dim), w2(dim * inter), e(dim);
  for (int i = 0; i < rc.top_k; ++i) {
    const int32_t id = ids[i];
    dequantize_mxfp4_ref(w.w1[id].data(), w.w1_scale[id].data(), inter, dim, w1.data());
    dequantize_mxfp4_ref(w.w3[id].data(), w.w3_scale[id].data(), inter, dim, w3.data());
    dequantize_mxfp4_ref(w.w2[id].data(), w.w2_scale[id].data(), dim, inter, w2.data());
    dense_expert_ref(w1.data(), w3.data(), w2.data(), dim, inter, c.swiglu_limit, x, e.data());
    for (int64_t d = 0; d < dim; ++d) y[d] += weights[i] * e[d];
  }
}

ModelWeights random_model_weights(const DeepseekV4Config& c, uint64_t seed) {
  Rng rng(seed);
  const int64_t dim = c.hidden_size, hc = c.hc_mult, mix = c.hc_mix_dim();
  const int64_t inter = c.moe_intermediate_size, shared = shared_dim(c);
  auto mat = [&](int64_t out, int64_t in) {
    const double a = std::sqrt(3.0 / static_cast<double>(in));
    return random_vec(rng, out * in, -a, a);
  };
  auto mxfp4 = [&](int64_t n, int64_t k, std::vector<uint8_t>* q, std::vector<uint8_t>* s) {
    const std::vector<double> d = mat(n, k);
    const std::vector<float> f(d.begin(), d.end());
    q->resize(n * k / 2);
    s->resize(n * k / kMxfp4Group);
    quantize_mxfp4(f.data(), n, k, q->data(), s->data());
  };
  ModelWeights m;
  m.embed = random_vec(rng, c.vocab_size * dim, -1.0, 1.0);
  m.head = mat(c.vocab_size, dim);
  m.norm = random_vec(rng, dim, 0.8, 1.2);
  m.hc_head_fn = random_vec(rng, hc * hc * dim, -0.1, 0.1);
  m.hc_head_base = random_vec(rng, hc, -1.0, 1.0);
  m.hc_head_scale = random_vec(rng, 1, 0.5, 1.5);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    BlockWeights b;
    b.attn = random_attn_weights(c, l, seed + 17);
    b.attn_norm = random_vec(rng, dim, 0.8, 1.2);
    b.ffn_norm = random_vec(rng, dim, 0.8, 1.2);
    b.hc_attn_fn = random_vec(rng, mix * hc * dim, -0.1, 0.1);
    b.hc_attn_base = random_vec(rng, mix, -1.0, 1.0);
    b.hc_attn_scale = random_vec(rng, 3, 0.5, 1.5);
    b.hc_ffn_fn = random_vec(rng, mix * hc * dim, -0.1, 0.1);
    b.hc_ffn_base = random_vec(rng, mix, -1.0, 1.0);
    b.hc_ffn_scale = random_vec(rng, 3, 0.5, 1.5);
    MoeWeights& f = b.ffn;
    f.gate = mat(c.n_routed_experts, dim);
    if (c.hash_routed(l)) {
      const int64_t k = c.num_experts_per_tok, e = c.n_routed_experts;
      f.tid2eid.resize(c.vocab_size * k);
      for (int64_t v = 0; v < c.vocab_size; ++v)  // k distinct experts per token
        for (int64_t i = 0; i < k; ++i)
          f.tid2eid[v * k + i] = static_cast<int32_t>((v * 7 + i * (e / k > 0 ? e / k : 1)) % e);
    } else {
      f.bias = random_vec(rng, c.n_routed_experts, -0.1, 0.1);
    }
    const size_t ne = static_cast<size_t>(c.n_routed_experts);
    f.w1.resize(ne), f.w1_scale.resize(ne), f.w3.resize(ne), f.w3_scale.resize(ne);
    f.w2.resize(ne), f.w2_scale.resize(ne);
    for (size_t e = 0; e < ne; ++e) {
      mxfp4(inter, dim, &f.w1[e], &f.w1_scale[e]);
      mxfp4(inter, dim, &f.w3[e], &f.w3_scale[e]);
      mxfp4(dim, inter, &f.w2[e], &f.w2_scale[e]);
    }
    if (shared > 0) {
      f.shared_w1 = mat(shared, dim);
      f.shared_w3 = mat(shared, dim);
      f.shared_w2 = mat(dim, shared);
    }
    m.layers.push_back(std::move(b));
  }
  return m;
}

Result<ModelWeights> load_model_weights(const DeepseekV4Config& c, const TensorReader& read,
                                        MtpWeights* mtp) {
  if (c.expert_dtype != ExpertDtype::kFp4)
    return unimplemented("DeepSeek-V4 weights: routed experts in expert_dtype " +
                         std::string(c.expert_dtype == ExpertDtype::kFp8 ? "fp8" : "bf16") +
                         " are not supported by this loader yet (fp4 only)");
  std::vector<TensorSpec> specs = checkpoint_tensors(c, mtp != nullptr);
  std::unordered_map<std::string, const TensorSpec*> by_name;
  for (const auto& t : specs) by_name[t.name] = &t;
  auto raw = [&](const std::string& name) -> Result<std::vector<uint8_t>> {
    auto it = by_name.find(name);
    if (it == by_name.end()) return internal_error("no tensor " + name + " in the V4 manifest");
    STRATA_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read(*it->second));
    if (static_cast<int64_t>(bytes.size()) != it->second->bytes())
      return data_loss(name + ": " + std::to_string(bytes.size()) + " bytes, expected " +
                       std::to_string(it->second->bytes()) + " (" + it->second->dtype + ")");
    return bytes;
  };
  // A float tensor (BF16 / F32) as doubles.
  auto plain = [&](const std::string& name, std::vector<double>* out) -> Status {
    STRATA_ASSIGN_OR_RETURN(std::vector<uint8_t> b, raw(name));
    const std::string& dt = by_name[name]->dtype;
    const size_t n = dt == "F32" ? b.size() / 4 : b.size() / 2;
    out->resize(n);
    for (size_t i = 0; i < n; ++i) {
      if (dt == "F32") {
        float f;
        std::memcpy(&f, &b[4 * i], 4);
        (*out)[i] = f;
      } else {
        uint16_t h;
        std::memcpy(&h, &b[2 * i], 2);
        (*out)[i] = bf16_to_f32(h);
      }
    }
    return ok_status();
  };
  // A linear layer: `<name>.weight` (+ `.scale` for FP8) as doubles [n, k].
  auto linear = [&](const std::string& name, std::vector<double>* out) -> Status {
    const TensorSpec* spec = by_name[name + ".weight"];
    if (spec == nullptr) return internal_error("no tensor " + name + ".weight in the V4 manifest");
    if (spec->dtype != "F8_E4M3") return plain(name + ".weight", out);
    STRATA_ASSIGN_OR_RETURN(std::vector<uint8_t> q, raw(name + ".weight"));
    STRATA_ASSIGN_OR_RETURN(std::vector<uint8_t> s, raw(name + ".scale"));
    for (uint8_t e : s)
      if (e == 0xff) return data_loss(name + ".scale holds an e8m0 NaN (0xff)");
    out->resize(q.size());
    dequantize_fp8_ue8m0_ref(q.data(), s.data(), spec->shape[0], spec->shape[1], c.weight_block_n,
                             c.weight_block_k, out->data());
    return ok_status();
  };
  ModelWeights m;
  STRATA_RETURN_IF_ERROR(plain("embed.weight", &m.embed));
  STRATA_RETURN_IF_ERROR(plain("head.weight", &m.head));
  STRATA_RETURN_IF_ERROR(plain("norm.weight", &m.norm));
  STRATA_RETURN_IF_ERROR(plain("hc_head_fn", &m.hc_head_fn));
  STRATA_RETURN_IF_ERROR(plain("hc_head_base", &m.hc_head_base));
  STRATA_RETURN_IF_ERROR(plain("hc_head_scale", &m.hc_head_scale));
  // One decoder block under prefix p (layers.N. or mtp.K.).
  auto load_block = [&](const std::string& p, int ratio, bool hash, BlockWeights& b) -> Status {
    AttnWeights& a = b.attn;
    STRATA_RETURN_IF_ERROR(plain(p + "attn.attn_sink", &a.attn_sink));
    STRATA_RETURN_IF_ERROR(plain(p + "attn.q_norm.weight", &a.q_norm));
    STRATA_RETURN_IF_ERROR(plain(p + "attn.kv_norm.weight", &a.kv_norm));
    STRATA_RETURN_IF_ERROR(linear(p + "attn.wq_a", &a.wq_a));
    STRATA_RETURN_IF_ERROR(linear(p + "attn.wq_b", &a.wq_b));
    STRATA_RETURN_IF_ERROR(linear(p + "attn.wkv", &a.wkv));
    STRATA_RETURN_IF_ERROR(linear(p + "attn.wo_a", &a.wo_a));
    STRATA_RETURN_IF_ERROR(linear(p + "attn.wo_b", &a.wo_b));
    if (ratio != 0) {
      const std::string q = p + "attn.compressor.";
      STRATA_RETURN_IF_ERROR(plain(q + "ape", &a.c_ape));
      STRATA_RETURN_IF_ERROR(plain(q + "norm.weight", &a.c_norm));
      STRATA_RETURN_IF_ERROR(plain(q + "wgate.weight", &a.c_wgate));
      STRATA_RETURN_IF_ERROR(plain(q + "wkv.weight", &a.c_wkv));
    }
    if (ratio == 4) {
      const std::string q = p + "attn.indexer.";
      STRATA_RETURN_IF_ERROR(plain(q + "compressor.ape", &a.i_c_ape));
      STRATA_RETURN_IF_ERROR(plain(q + "compressor.norm.weight", &a.i_c_norm));
      STRATA_RETURN_IF_ERROR(plain(q + "compressor.wgate.weight", &a.i_c_wgate));
      STRATA_RETURN_IF_ERROR(plain(q + "compressor.wkv.weight", &a.i_c_wkv));
      STRATA_RETURN_IF_ERROR(plain(q + "weights_proj.weight", &a.i_weights));
      STRATA_RETURN_IF_ERROR(linear(q + "wq_b", &a.i_wq_b));
    }
    MoeWeights& f = b.ffn;
    const size_t ne = static_cast<size_t>(c.n_routed_experts);
    f.w1.resize(ne), f.w1_scale.resize(ne), f.w3.resize(ne), f.w3_scale.resize(ne);
    f.w2.resize(ne), f.w2_scale.resize(ne);
    for (size_t e = 0; e < ne; ++e) {
      const std::string q = p + "ffn.experts." + std::to_string(e) + ".";
      STRATA_ASSIGN_OR_RETURN(f.w1[e], raw(q + "w1.weight"));
      STRATA_ASSIGN_OR_RETURN(f.w1_scale[e], raw(q + "w1.scale"));
      STRATA_ASSIGN_OR_RETURN(f.w3[e], raw(q + "w3.weight"));
      STRATA_ASSIGN_OR_RETURN(f.w3_scale[e], raw(q + "w3.scale"));
      STRATA_ASSIGN_OR_RETURN(f.w2[e], raw(q + "w2.weight"));
      STRATA_ASSIGN_OR_RETURN(f.w2_scale[e], raw(q + "w2.scale"));
    }
    STRATA_RETURN_IF_ERROR(plain(p + "ffn.gate.weight", &f.gate));
    if (hash) {
      STRATA_ASSIGN_OR_RETURN(std::vector<uint8_t> t, raw(p + "ffn.gate.tid2eid"));
      f.tid2eid.resize(t.size() / 8);
      for (size_t i = 0; i < f.tid2eid.size(); ++i) {
        int64_t v;
        std::memcpy(&v, &t[8 * i], 8);
        f.tid2eid[i] = v < 0 || v > INT32_MAX ? -1 : static_cast<int32_t>(v);
      }
      Status st =
          check_hash_table(f.tid2eid.data(), c.vocab_size, static_cast<int>(c.num_experts_per_tok),
                           static_cast<int>(c.n_routed_experts));
      if (!st.ok()) return Status(st.code(), p + st.message());
    } else {
      STRATA_RETURN_IF_ERROR(plain(p + "ffn.gate.bias", &f.bias));
    }
    if (shared_dim(c) > 0) {
      STRATA_RETURN_IF_ERROR(linear(p + "ffn.shared_experts.w1", &f.shared_w1));
      STRATA_RETURN_IF_ERROR(linear(p + "ffn.shared_experts.w3", &f.shared_w3));
      STRATA_RETURN_IF_ERROR(linear(p + "ffn.shared_experts.w2", &f.shared_w2));
    }
    STRATA_RETURN_IF_ERROR(plain(p + "attn_norm.weight", &b.attn_norm));
    STRATA_RETURN_IF_ERROR(plain(p + "ffn_norm.weight", &b.ffn_norm));
    STRATA_RETURN_IF_ERROR(plain(p + "hc_attn_fn", &b.hc_attn_fn));
    STRATA_RETURN_IF_ERROR(plain(p + "hc_attn_base", &b.hc_attn_base));
    STRATA_RETURN_IF_ERROR(plain(p + "hc_attn_scale", &b.hc_attn_scale));
    STRATA_RETURN_IF_ERROR(plain(p + "hc_ffn_fn", &b.hc_ffn_fn));
    STRATA_RETURN_IF_ERROR(plain(p + "hc_ffn_base", &b.hc_ffn_base));
    STRATA_RETURN_IF_ERROR(plain(p + "hc_ffn_scale", &b.hc_ffn_scale));
    return ok_status();
  };
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    BlockWeights b;
    STRATA_RETURN_IF_ERROR(
        load_block("layers." + std::to_string(l) + ".", c.compress_ratio(l), c.hash_routed(l), b));
    m.layers.push_back(std::move(b));
  }
  if (mtp != nullptr) {
    if (c.num_nextn_predict_layers < 1)
      return invalid_argument(
          "DeepSeek-V4 weights: the config has no MTP layer "
          "(num_nextn_predict_layers is 0)");
    const std::string p = "mtp.0.";
    STRATA_RETURN_IF_ERROR(load_block(p, 0, false, mtp->block));
    STRATA_RETURN_IF_ERROR(linear(p + "e_proj", &mtp->e_proj));
    STRATA_RETURN_IF_ERROR(linear(p + "h_proj", &mtp->h_proj));
    STRATA_RETURN_IF_ERROR(plain(p + "enorm.weight", &mtp->enorm));
    STRATA_RETURN_IF_ERROR(plain(p + "hnorm.weight", &mtp->hnorm));
    STRATA_RETURN_IF_ERROR(plain(p + "norm.weight", &mtp->norm));
    STRATA_RETURN_IF_ERROR(plain(p + "hc_head_fn", &mtp->hc_head_fn));
    STRATA_RETURN_IF_ERROR(plain(p + "hc_head_base", &mtp->hc_head_base));
    STRATA_RETURN_IF_ERROR(plain(p + "hc_head_scale", &mtp->hc_head_scale));
  }
  return m;
}

// One decoder block of the float64 references on the hc streams h [t, hc, dim], in place: the
// attention and the MoE sub-layers, each between its hc pre-mix (with its RMSNorm) and post-mix.
void block_ref(const DeepseekV4Config& c, int64_t layer, const BlockWeights& b,
               const int32_t* tokens, int64_t t, double* h) {
  const int64_t dim = c.hidden_size;
  const int hc = static_cast<int>(c.hc_mult), iters = static_cast<int>(c.hc_sinkhorn_iters);
  const double eps = c.rms_norm_eps;
  std::vector<double> in(t * dim), out(t * dim), post(t * hc), comb(t * hc * hc), next(hc * dim);
  for (int sub = 0; sub < 2; ++sub) {
    const bool attn = sub == 0;
    for (int64_t p = 0; p < t; ++p) {
      hc_pre_ref(&h[p * hc * dim], hc, dim, (attn ? b.hc_attn_fn : b.hc_ffn_fn).data(),
                 (attn ? b.hc_attn_scale : b.hc_ffn_scale).data(),
                 (attn ? b.hc_attn_base : b.hc_ffn_base).data(), iters, c.hc_eps, eps, &in[p * dim],
                 &post[p * hc], &comb[p * hc * hc]);
      rms_norm_ref(&in[p * dim], dim, (attn ? b.attn_norm : b.ffn_norm).data(), eps);
    }
    if (attn)
      attention_ref(c, layer, b.attn, in.data(), t, out.data());
    else
      for (int64_t p = 0; p < t; ++p)
        moe_ref(c, layer, b.ffn, &in[p * dim], tokens[p], &out[p * dim]);
    for (int64_t p = 0; p < t; ++p) {
      hc_post_ref(&out[p * dim], &h[p * hc * dim], &post[p * hc], &comb[p * hc * hc], hc, dim,
                  next.data());
      std::copy(next.begin(), next.end(), &h[p * hc * dim]);
    }
  }
}

void model_forward_ref(const DeepseekV4Config& c, const ModelWeights& w, const int32_t* tokens,
                       int64_t t, double* logits, double* streams) {
  const int64_t dim = c.hidden_size, v = c.vocab_size;
  const int hc = static_cast<int>(c.hc_mult);
  const double eps = c.rms_norm_eps;
  std::vector<double> h(t * hc * dim);
  for (int64_t p = 0; p < t; ++p)
    for (int j = 0; j < hc; ++j)
      std::copy(&w.embed[tokens[p] * dim], &w.embed[(tokens[p] + 1) * dim], &h[(p * hc + j) * dim]);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    block_ref(c, l, w.layers[l], tokens, t, h.data());
  if (streams != nullptr) std::copy(h.begin(), h.end(), streams);
  std::vector<double> y(dim);
  for (int64_t p = 0; p < t; ++p) {
    hc_head_ref(&h[p * hc * dim], hc, dim, w.hc_head_fn.data(), w.hc_head_scale.data(),
                w.hc_head_base.data(), c.hc_eps, eps, y.data());
    rms_norm_ref(y.data(), dim, w.norm.data(), eps);
    matvec_ref(w.head.data(), y.data(), v, dim, logits + p * v);
  }
}

DeepseekV4Config mtp_config(const DeepseekV4Config& c) {
  DeepseekV4Config m = c;
  m.compress_ratios.push_back(0);
  return m;
}

MtpWeights random_mtp_weights(const DeepseekV4Config& c, uint64_t seed) {
  const DeepseekV4Config mc = mtp_config(c);
  ModelWeights tmp = random_model_weights(mc, seed);  // its last layer has the MTP layer's shape
  MtpWeights m;
  m.block = std::move(tmp.layers.back());
  Rng rng(seed + 99);
  const int64_t dim = c.hidden_size, hc = c.hc_mult;
  const double a = std::sqrt(3.0 / static_cast<double>(dim));
  m.e_proj = random_vec(rng, dim * dim, -a, a);
  m.h_proj = random_vec(rng, dim * dim, -a, a);
  m.enorm = random_vec(rng, dim, 0.8, 1.2);
  m.hnorm = random_vec(rng, dim, 0.8, 1.2);
  m.norm = random_vec(rng, dim, 0.8, 1.2);
  m.hc_head_fn = random_vec(rng, hc * hc * dim, -0.1, 0.1);
  m.hc_head_base = random_vec(rng, hc, -1.0, 1.0);
  m.hc_head_scale = random_vec(rng, 1, 0.5, 1.5);
  return m;
}

void mtp_forward_ref(const DeepseekV4Config& c, const ModelWeights& w, const MtpWeights& m,
                     const double* streams, const int32_t* next_tokens, int64_t t, double* logits) {
  const DeepseekV4Config mc = mtp_config(c);
  const int64_t layer = c.num_hidden_layers, dim = c.hidden_size, v = c.vocab_size;
  const int hc = static_cast<int>(c.hc_mult);
  const double eps = c.rms_norm_eps;
  std::vector<double> h(t * hc * dim), e(dim), pe(dim), s(dim), ps(dim);
  for (int64_t p = 0; p < t; ++p) {
    std::copy(&w.embed[next_tokens[p] * dim], &w.embed[(next_tokens[p] + 1) * dim], e.begin());
    rms_norm_ref(e.data(), dim, m.enorm.data(), eps);
    matvec_ref(m.e_proj.data(), e.data(), dim, dim, pe.data());
    for (int j = 0; j < hc; ++j) {
      std::copy(streams + (p * hc + j) * dim, streams + (p * hc + j + 1) * dim, s.begin());
      rms_norm_ref(s.data(), dim, m.hnorm.data(), eps);
      matvec_ref(m.h_proj.data(), s.data(), dim, dim, ps.data());
      for (int64_t d = 0; d < dim; ++d) h[(p * hc + j) * dim + d] = pe[d] + ps[d];
    }
  }
  block_ref(mc, layer, m.block, next_tokens, t, h.data());
  std::vector<double> y(dim);
  for (int64_t p = 0; p < t; ++p) {
    hc_head_ref(&h[p * hc * dim], hc, dim, m.hc_head_fn.data(), m.hc_head_scale.data(),
                m.hc_head_base.data(), c.hc_eps, eps, y.data());
    rms_norm_ref(y.data(), dim, m.norm.data(), eps);
    matvec_ref(w.head.data(), y.data(), v, dim, logits + p * v);
  }
}

struct ModelDecoder::Layer {
  AttentionDecoder attn;
  std::vector<float> attn_norm, ffn_norm, hc_attn_fn, hc_attn_base, hc_attn_scale, hc_ffn_fn,
      hc_ffn_base, hc_ffn_scale, gate, bias, shared_w1, shared_w3, shared_w2;
  Layer(const DeepseekV4Config& c, int64_t l, const BlockWeights& b)
      : attn(c, l, b.attn),
        attn_norm(to_f32(b.attn_norm)),
        ffn_norm(to_f32(b.ffn_norm)),
        hc_attn_fn(to_f32(b.hc_attn_fn)),
        hc_attn_base(to_f32(b.hc_attn_base)),
        hc_attn_scale(to_f32(b.hc_attn_scale)),
        hc_ffn_fn(to_f32(b.hc_ffn_fn)),
        hc_ffn_base(to_f32(b.hc_ffn_base)),
        hc_ffn_scale(to_f32(b.hc_ffn_scale)),
        gate(to_f32(b.ffn.gate)),
        bias(to_f32(b.ffn.bias)),
        shared_w1(to_f32(b.ffn.shared_w1)),
        shared_w3(to_f32(b.ffn.shared_w3)),
        shared_w2(to_f32(b.ffn.shared_w2)) {}
};

ModelDecoder::ModelDecoder(const DeepseekV4Config& c, const ModelWeights& w)
    : c_(c),
      w_(w),
      embed_(to_f32(w.embed)),
      head_(to_f32(w.head)),
      norm_(to_f32(w.norm)),
      hc_head_fn_(to_f32(w.hc_head_fn)),
      hc_head_base_(to_f32(w.hc_head_base)),
      hc_head_scale_(to_f32(w.hc_head_scale)) {
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) layers_.push_back(new Layer(c, l, w.layers[l]));
}

ModelDecoder::~ModelDecoder() {
  for (Layer* l : layers_) delete l;
}

void ModelDecoder::block_step(const DeepseekV4Config& c, int64_t l, Layer& L, const MoeWeights& mw,
                              int32_t token, float* h) {
  const int64_t dim = c.hidden_size, inter = c.moe_intermediate_size, sh = shared_dim(c);
  const int hc = static_cast<int>(c.hc_mult), iters = static_cast<int>(c.hc_sinkhorn_iters);
  const float eps = static_cast<float>(c.rms_norm_eps), hc_eps = static_cast<float>(c.hc_eps);
  const float limit = static_cast<float>(c.swiglu_limit);
  const RoutingConfig rc = routing_config(c);
  std::vector<float> in(dim), out(dim), post(hc), comb(hc * hc), rl(rc.num_experts), rw(rc.top_k),
      g(std::max(inter, sh)), u(g.size()), e(dim);
  std::vector<int32_t> ids(rc.top_k);
  hc_pre(h, 1, hc, dim, {L.hc_attn_fn.data(), L.hc_attn_base.data(), L.hc_attn_scale.data()}, iters,
         hc_eps, eps, in.data(), post.data(), comb.data(), nullptr);
  rms_norm(in.data(), dim, L.attn_norm.data(), eps);
  L.attn.step(in.data(), out.data());
  hc_post(out.data(), h, post.data(), comb.data(), 1, hc, dim, h, nullptr);

  hc_pre(h, 1, hc, dim, {L.hc_ffn_fn.data(), L.hc_ffn_base.data(), L.hc_ffn_scale.data()}, iters,
         hc_eps, eps, in.data(), post.data(), comb.data(), nullptr);
  rms_norm(in.data(), dim, L.ffn_norm.data(), eps);
  matvec(L.gate, in.data(), rc.num_experts, dim, rl.data());
  const bool hash = c.hash_routed(l);
  route_token(rc, rl.data(), hash || L.bias.empty() ? nullptr : L.bias.data(),
              hash ? &mw.tid2eid[static_cast<int64_t>(token) * rc.top_k] : nullptr, ids.data(),
              rw.data());
  std::fill(out.begin(), out.end(), 0.0f);
  if (sh > 0) {
    matvec(L.shared_w1, in.data(), sh, dim, g.data());
    matvec(L.shared_w3, in.data(), sh, dim, u.data());
    swiglu_clamped(g.data(), u.data(), sh, limit, g.data());
    matvec(L.shared_w2, g.data(), dim, sh, out.data());
  }
  for (int i = 0; i < rc.top_k; ++i) {
    const int32_t id = ids[i];
    mxfp4_matmul(in.data(), mw.w1[id].data(), mw.w1_scale[id].data(), 1, inter, dim, g.data(),
                 nullptr);
    mxfp4_matmul(in.data(), mw.w3[id].data(), mw.w3_scale[id].data(), 1, inter, dim, u.data(),
                 nullptr);
    swiglu_clamped(g.data(), u.data(), inter, limit, g.data());
    mxfp4_matmul(g.data(), mw.w2[id].data(), mw.w2_scale[id].data(), 1, dim, inter, e.data(),
                 nullptr);
    for (int64_t d = 0; d < dim; ++d) out[d] += rw[i] * e[d];
  }
  hc_post(out.data(), h, post.data(), comb.data(), 1, hc, dim, h, nullptr);
}

void ModelDecoder::step(int32_t token, float* logits) {
  const int64_t dim = c_.hidden_size;
  const int hc = static_cast<int>(c_.hc_mult);
  const float eps = static_cast<float>(c_.rms_norm_eps), hc_eps = static_cast<float>(c_.hc_eps);
  std::vector<float> h(hc * dim);
  for (int j = 0; j < hc; ++j)
    std::copy(&embed_[token * dim], &embed_[(token + 1) * dim], &h[j * dim]);
  for (int64_t l = 0; l < c_.num_hidden_layers; ++l)
    block_step(c_, l, *layers_[l], w_.layers[l].ffn, token, h.data());
  std::vector<float> y(dim);
  hc_head(h.data(), 1, hc, dim, {hc_head_fn_.data(), hc_head_base_.data(), hc_head_scale_.data()},
          hc_eps, eps, y.data(), nullptr);
  rms_norm(y.data(), dim, norm_.data(), eps);
  matvec(head_, y.data(), c_.vocab_size, dim, logits);
  streams_ = h;
  ++pos_;
}

MtpDecoder::MtpDecoder(const DeepseekV4Config& c, const ModelWeights& w, const MtpWeights& m)
    : c_(mtp_config(c)),
      w_(w),
      m_(m),
      layer_(new ModelDecoder::Layer(c_, c.num_hidden_layers, m.block)),
      embed_(to_f32(w.embed)),
      head_(to_f32(w.head)),
      e_proj_(to_f32(m.e_proj)),
      h_proj_(to_f32(m.h_proj)),
      enorm_(to_f32(m.enorm)),
      hnorm_(to_f32(m.hnorm)),
      norm_(to_f32(m.norm)),
      hc_head_fn_(to_f32(m.hc_head_fn)),
      hc_head_base_(to_f32(m.hc_head_base)),
      hc_head_scale_(to_f32(m.hc_head_scale)) {}

MtpDecoder::~MtpDecoder() {
  delete layer_;
}

void MtpDecoder::step(const float* streams, int32_t next_token, float* logits) {
  const int64_t dim = c_.hidden_size;
  const int hc = static_cast<int>(c_.hc_mult);
  const float eps = static_cast<float>(c_.rms_norm_eps), hc_eps = static_cast<float>(c_.hc_eps);
  std::vector<float> e(&embed_[next_token * dim], &embed_[(next_token + 1) * dim]), pe(dim), s(dim),
      h(hc * dim);
  rms_norm(e.data(), dim, enorm_.data(), eps);
  matvec(e_proj_, e.data(), dim, dim, pe.data());
  for (int j = 0; j < hc; ++j) {
    std::copy(streams + j * dim, streams + (j + 1) * dim, s.begin());
    rms_norm(s.data(), dim, hnorm_.data(), eps);
    matvec(h_proj_, s.data(), dim, dim, &h[j * dim]);
    for (int64_t d = 0; d < dim; ++d) h[j * dim + d] += pe[d];
  }
  // The MTP layer is layer num_hidden_layers of mtp_config(): window-only, never hash-routed.
  ModelDecoder::block_step(c_, c_.num_hidden_layers, *layer_, m_.block.ffn, next_token, h.data());
  std::vector<float> y(dim);
  hc_head(h.data(), 1, hc, dim, {hc_head_fn_.data(), hc_head_base_.data(), hc_head_scale_.data()},
          hc_eps, eps, y.data(), nullptr);
  rms_norm(y.data(), dim, norm_.data(), eps);
  matvec(head_, y.data(), c_.vocab_size, dim, logits);
}

}  // namespace strata::dsv4
