// Reduced-precision KV caches stay close to an f32 cache: bf16/f16 and fp8 (e4m3 with a scale),
// on the real stories260K weights, over a prompt and 48 decode steps.
#include <gtest/gtest.h>

#include <cmath>

#include "model_test_util.h"
#include "test_util.h"

namespace strata {
namespace {

struct Diff {
  double max_abs = 0;    // largest |logit difference|
  double max_logit = 0;  // largest |logit| (scale)
  double max_prob = 0;   // largest |softmax difference|
  int argmax_agree = 0, steps = 0;
};

std::vector<double> softmax(const std::vector<float>& x) {
  double m = -1e30, s = 0;
  for (float v : x) m = std::max(m, static_cast<double>(v));
  std::vector<double> p(x.size());
  for (size_t i = 0; i < x.size(); ++i) s += p[i] = std::exp(x[i] - m);
  for (auto& v : p) v /= s;
  return p;
}

Diff compare(Model& model, DType kv, const std::vector<int32_t>& prompt, int steps) {
  const KernelOps& ops = kernel_ops(default_kernel_variant());
  const int64_t V = model.config().vocab_size;
  testing::ModelHarness ref(model, 1, 256, 16, DType::kF32), low(model, 1, 256, 16, kv);
  auto a = ref.step1(0, prompt, ops);
  auto b = low.step1(0, prompt, ops);
  Diff d;
  for (int s = 0; s <= steps; ++s) {
    auto pa = softmax(a), pb = softmax(b);
    for (int64_t i = 0; i < V; ++i) {
      d.max_abs = std::max(d.max_abs, static_cast<double>(std::fabs(a[i] - b[i])));
      d.max_logit = std::max(d.max_logit, static_cast<double>(std::fabs(a[i])));
      d.max_prob = std::max(d.max_prob, std::fabs(pa[i] - pb[i]));
    }
    int32_t ta = testing::argmax(a.data(), V), tb = testing::argmax(b.data(), V);
    d.argmax_agree += ta == tb;
    d.steps++;
    // Both continue with the f32 path's token so the contexts stay the same.
    a = ref.step1(0, {ta}, ops);
    b = low.step1(0, {ta}, ops);
  }
  return d;
}

TEST(KvDtypeTest, ReducedPrecisionCachesStayCloseToF32) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  ThreadPool pool(2);
  LoadOptions o;
  o.model = testing::shared_data_path("models/stories260K-hf");
  o.pool = &pool;
  o.limits = {256, 256, 4};
  auto m = load_model(o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376};
  struct Bound {
    DType kv;
    double max_abs, max_prob;
    int min_agree;
  };
  // Stated tolerances (logits of this model reach ~22). fp8 keeps 3 mantissa bits (~6% per
  // value, after per-row scaling), so its logits move by up to ~10% of their range; bf16 and f16
  // are 16x and 128x finer.
  for (Bound b : {Bound{DType::kBF16, 0.15, 0.03, 47}, Bound{DType::kF16, 0.02, 0.005, 49},
                  Bound{DType::kF8E4M3, 3.0, 0.25, 44}}) {
    Diff d = compare(*m->model, b.kv, prompt, 48);
    std::printf(
        "kv %s: max |dlogit| %.4f (max |logit| %.2f), max |dprob| %.4f, argmax agree %d/%d\n",
        dtype_name(b.kv), d.max_abs, d.max_logit, d.max_prob, d.argmax_agree, d.steps);
    EXPECT_LE(d.max_abs, b.max_abs) << dtype_name(b.kv);
    EXPECT_LE(d.max_prob, b.max_prob) << dtype_name(b.kv);
    EXPECT_GE(d.argmax_agree, b.min_agree) << dtype_name(b.kv);
    EXPECT_GT(d.max_abs, 0.0) << "a lower-precision cache must differ somewhat";
  }
}

}  // namespace
}  // namespace strata
