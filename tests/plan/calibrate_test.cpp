// The calibration fit and the hardware file it writes: step times made from known per-unit costs
// (the cost model's own FLOP and byte counts of real batches of llama-134m) are fitted back to
// those costs, a noisy or stalled step does not move them far, and the written file makes the
// cost model predict what the fit predicts. Measuring through an engine is in
// plan_engine_tests (calibrate_engine_test.cpp).
#include "plan/calibrate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "model/model_config.h"
#include "test_util.h"

namespace strata::plan {
namespace {

CostModel llama_counts() {
  auto config = read_hf_config(testing::repo_path("models/llama-134m"), "");
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  auto shape = model_shape(*config);
  EXPECT_TRUE(shape.ok());
  auto hw = load_hardware("cpu-xeon-avx512-2core");
  EXPECT_TRUE(hw.ok());
  PrecisionConfig prec;
  prec.activation_dtype = DType::kF32;
  auto cm = CostModel::create(*shape, *hw, {}, prec);
  EXPECT_TRUE(cm.ok()) << cm.status().to_string();
  return *cm;
}

// The batches of a calibration grid: prefills, chunks at a context, decodes of growing batch.
std::vector<std::vector<SequenceWork>> grid_batches() {
  std::vector<std::vector<SequenceWork>> out;
  for (int64_t p : {16, 64, 256, 1024, 2048}) out.push_back({{p, 0, true}});
  for (int64_t ctx : {512, 1024, 1536}) out.push_back({{512, ctx, false}});
  for (int64_t ctx : {64, 512, 1500})
    for (int64_t b : {1, 2, 4, 8, 16, 32})
      out.push_back(std::vector<SequenceWork>(b, {1, ctx, true}));
  // Mixed: a prompt chunk with decodes.
  for (int64_t b : {3, 7, 15}) {
    std::vector<SequenceWork> m(b, {1, 300, true});
    m.push_back({256, 0, true});
    out.push_back(m);
  }
  return out;
}

constexpr CalibrationFit kTruth = {.step_overhead_s = 2e-4,
                                   .per_sequence_s = 3e-4,
                                   .per_matmul_flop_s = 1 / 250e9,
                                   .per_attention_flop_s = 1 / 80e9,
                                   .per_byte_s = 1 / 40e9};

std::vector<CalibrationPoint> points_from(const CostModel& cm, const CalibrationFit& truth,
                                          double noise, uint64_t seed) {
  Rng rng(seed);
  std::vector<CalibrationPoint> pts;
  for (int rep = 0; rep < 3; ++rep) {
    for (const auto& b : grid_batches()) {
      const double jitter = 1 + noise * (2 * rng.uniform() - 1);
      pts.push_back({b, truth.predict(cm.step_cost(b)) * jitter});
    }
  }
  return pts;
}

TEST(Calibrate, FitRecoversTheCostsTheTimesWereMadeOf) {
  const CostModel cm = llama_counts();
  auto fit = fit_step_times(cm, points_from(cm, kTruth, 0, 1));
  ASSERT_TRUE(fit.ok()) << fit.status().to_string();
  EXPECT_NEAR(fit->step_overhead_s, kTruth.step_overhead_s, 1e-3 * kTruth.step_overhead_s);
  EXPECT_NEAR(fit->per_sequence_s, kTruth.per_sequence_s, 1e-3 * kTruth.per_sequence_s);
  EXPECT_NEAR(fit->per_matmul_flop_s, kTruth.per_matmul_flop_s, 1e-3 * kTruth.per_matmul_flop_s);
  EXPECT_NEAR(fit->per_attention_flop_s, kTruth.per_attention_flop_s,
              1e-3 * kTruth.per_attention_flop_s);
  EXPECT_NEAR(fit->per_byte_s, kTruth.per_byte_s, 1e-3 * kTruth.per_byte_s);
  EXPECT_LT(fit->max_error, 1e-6);
}

TEST(Calibrate, NoiseAndStallsMoveTheFitLittle) {
  const CostModel cm = llama_counts();
  auto pts = points_from(cm, kTruth, 0.05, 7);
  // Two steps stalled by the machine (another process took the cores): 3x and 5x their time.
  pts[4].seconds *= 3;
  pts[20].seconds *= 5;
  auto fit = fit_step_times(cm, pts);
  ASSERT_TRUE(fit.ok());
  EXPECT_GE(fit->num_dropped, 2);
  EXPECT_EQ(fit->num_points + fit->num_dropped, static_cast<int64_t>(pts.size()));
  // Each batch of the grid is predicted within 5 % of its noiseless time.
  for (const auto& b : grid_batches()) {
    const double want = kTruth.predict(cm.step_cost(b));
    EXPECT_NEAR(fit->predict(cm.step_cost(b)) / want, 1.0, 0.05);
  }
  EXPECT_LE(fit->median_error, 0.05);
}

TEST(Calibrate, NoTermIsNegative) {
  // Times with no per-byte cost at all and a slight negative pull: the fit keeps every term >= 0.
  const CostModel cm = llama_counts();
  CalibrationFit truth = kTruth;
  truth.per_byte_s = 0;
  auto pts = points_from(cm, truth, 0.03, 3);
  for (auto& p : pts)
    if (p.batch.size() >= 16) p.seconds *= 0.97;
  auto fit = fit_step_times(cm, pts);
  ASSERT_TRUE(fit.ok());
  for (double v : {fit->step_overhead_s, fit->per_sequence_s, fit->per_matmul_flop_s,
                   fit->per_attention_flop_s, fit->per_byte_s})
    EXPECT_GE(v, 0);
}

TEST(Calibrate, RejectsTooFewOrBadPoints) {
  const CostModel cm = llama_counts();
  auto pts = points_from(cm, kTruth, 0, 1);
  EXPECT_EQ(fit_step_times(cm, std::span(pts).first(7)).status().code(),
            StatusCode::kInvalidArgument);
  pts[3].seconds = 0;
  EXPECT_EQ(fit_step_times(cm, pts).status().code(), StatusCode::kInvalidArgument);
}

TEST(Calibrate, TheWrittenFileMakesTheCostModelPredictTheFit) {
  const CostModel cm = llama_counts();
  auto fit = fit_step_times(cm, points_from(cm, kTruth, 0.02, 5));
  ASSERT_TRUE(fit.ok());
  auto base = load_hardware("cpu-xeon-avx512-2core");
  ASSERT_TRUE(base.ok());
  const ComputeType mm = matmul_compute_type(DType::kBF16, DType::kF32);
  const HardwareSpec hw = calibrated_hardware(*base, *fit, mm, "llama-134m, test");
  EXPECT_FALSE(hw.placeholder);
  EXPECT_EQ(hw.roofline, Roofline::kSum);
  // Through the file's text, as `--hardware FILE` reads it.
  auto parsed = parse_hardware_json(hardware_to_json(hw), "calibrated.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string() << "\n" << hardware_to_json(hw);
  for (const char* field : {"peak_flops.fp32", "attention_flops_per_s",
                            "memory_bandwidth_bytes_per_s", "step_overhead_s", "per_sequence_s"})
    EXPECT_NE(parsed->sources[field].find("llama-134m, test"), std::string::npos) << field;
  auto calibrated = CostModel::create(cm.model(), *parsed, {}, cm.precision());
  ASSERT_TRUE(calibrated.ok());
  for (const auto& b : grid_batches()) {
    const double want = fit->predict(cm.step_cost(b));
    EXPECT_NEAR(calibrated->step_time(b), want, 1e-9 * want);
  }
}

TEST(Calibrate, AnFp8RateAlsoStandsForTheFloatTypesAFileNeeds) {
  auto base = load_hardware("cpu-xeon-avx512-2core");
  ASSERT_TRUE(base.ok());
  const HardwareSpec hw = calibrated_hardware(*base, kTruth, ComputeType::kFP8, "fp8 model");
  auto parsed = parse_hardware_json(hardware_to_json(hw), "x.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  EXPECT_DOUBLE_EQ(parsed->peak_flops_for(ComputeType::kFP8), 250e9);
  EXPECT_DOUBLE_EQ(parsed->peak_flops_for(ComputeType::kFP32), 250e9);
}

}  // namespace
}  // namespace strata::plan
