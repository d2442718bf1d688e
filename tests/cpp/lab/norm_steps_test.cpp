// The norm-steps experiment against hand arithmetic: page 001's [2, -3, 1, 4] (mean 1, std
// sqrt(6.5)), page 000's "cat" [2, 4, 6, 8] (x_hat = [-1.3416, -0.4472, 0.4472, 1.3416]), and the
// invariants of each step (centred: mean 0; normalised: std 1, or rms 1 for RMSNorm).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "addnorm/error.hpp"
#include "addnorm/lab/norm_steps.hpp"

namespace addnorm::lab {
namespace {

TEST(LabNormSteps, PagePresetMatchesHandArithmetic) {
  const NormStepsResult result = run_norm_steps({});
  ASSERT_EQ(result.steps.size(), 4u);
  const double std = std::sqrt(6.5);
  EXPECT_DOUBLE_EQ(result.steps[0].mean, 1.0);
  EXPECT_NEAR(result.steps[0].std, std, 1e-12);
  EXPECT_EQ(result.steps[1].values, (std::vector<double>{1.0, -4.0, 0.0, 3.0}));
  EXPECT_NEAR(result.steps[1].mean, 0.0, 1e-15);
  const std::vector<double> x{2.0, -3.0, 1.0, 4.0};
  for (size_t i = 0; i < 4; ++i) {
    const double normalised = (x[i] - 1.0) / std;
    EXPECT_NEAR(result.steps[2].values[i], normalised, 2e-7);
    EXPECT_NEAR(result.steps[3].values[i], 2.0 * normalised + 0.5, 4e-7);
  }
  EXPECT_NEAR(result.steps[2].std, 1.0, 1e-6);   // eps = 0: exactly 1 up to float32 rounding
  EXPECT_NEAR(result.steps[3].mean, 0.5, 1e-6);  // beta
  EXPECT_NEAR(result.steps[3].std, 2.0, 2e-6);   // gamma
  // The page's printed output rounds to [1.28, -2.64, 0.5, 2.86]; the exact last value is 2.853.
  EXPECT_NEAR(result.steps[3].values[3], 2.853, 5e-4);
  // gamma = sqrt(var + eps), beta = mean undo the normalisation.
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(result.undone[i], x[i], 1e-6);
}

TEST(LabNormSteps, CatPreset) {
  const NormStepsResult result = run_norm_steps(norm_steps_preset("cat"));
  const std::vector<double> page{-1.3416, -0.4472, 0.4472, 1.3416};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(result.steps[2].values[i], page[i], 5e-5);
  EXPECT_NEAR(result.op_divisor, 2.23607, 5e-6);  // sqrt(5 + 1e-5)
  // With eps under the root, the variance of y is 5 / (5 + 1e-5) = 0.999998.
  EXPECT_NEAR(result.steps[3].std * result.steps[3].std, 5.0 / (5.0 + 1e-5), 1e-6);
}

TEST(LabNormSteps, RmsNormSkipsCentringAndBeta) {
  NormStepsParams params;
  params.norm = NormKind::rms_norm;
  const NormStepsResult result = run_norm_steps(params);
  EXPECT_FALSE(result.beta_applied);
  EXPECT_EQ(result.steps[1].values, result.steps[0].values);  // nothing subtracted
  const double rms = std::sqrt((4.0 + 9.0 + 1.0 + 16.0) / 4.0);
  EXPECT_NEAR(result.op_divisor, rms, 1e-6);
  EXPECT_NEAR(result.steps[2].rms, 1.0, 1e-6);
  EXPECT_NEAR(result.steps[3].values[0], 2.0 * 2.0 / rms, 1e-6);  // gamma 2, no beta
}

TEST(LabNormSteps, PerFeatureGammaAndBeta) {
  NormStepsParams params;
  params.gamma = {1.0, 2.0, 3.0, 4.0};
  params.beta = {0.0, 0.0, 0.0, 1.0};
  const NormStepsResult result = run_norm_steps(params);
  EXPECT_NEAR(result.steps[3].values[3], 4.0 * 3.0 / std::sqrt(6.5) + 1.0, 1e-6);
}

TEST(LabNormSteps, RefusesBadParameters) {
  NormStepsParams p;
  p.x = {};
  EXPECT_THROW(run_norm_steps(p), Error);
  p = {};
  p.gamma = {1.0, 2.0};
  EXPECT_THROW(run_norm_steps(p), Error);
  p = {};
  p.eps = -1.0;
  EXPECT_THROW(run_norm_steps(p), Error);
  p = {};
  p.x = {1.0, INFINITY};
  EXPECT_THROW(run_norm_steps(p), Error);
  EXPECT_THROW(norm_steps_preset("dog"), Error);
  EXPECT_THROW(norm_steps_params_from_json(nlohmann::json::parse(R"({"norm": "batch_norm"})")),
               Error);
  const NormStepsParams cat = norm_steps_params_from_json(
      nlohmann::json::parse(R"({"preset": "cat", "norm": "rms_norm"})"));
  EXPECT_EQ(cat.x, (std::vector<double>{2.0, 4.0, 6.0, 8.0}));
  EXPECT_EQ(cat.norm, NormKind::rms_norm);
}

// Steps 3 and 4 run in float32: a nonzero value float32 would turn into 0 is refused, as
// `addnorm run` refuses it in a .npy, rather than silently computed as 0. The smallest float32
// subnormal stays nonzero and passes.
TEST(LabNormSteps, RefusesValuesThatFloat32WouldTurnIntoZero) {
  const auto message = [](const NormStepsParams& p) {
    try {
      run_norm_steps(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  NormStepsParams p;
  p.x = {2.0, 1e-50, 1.0, 4.0};
  EXPECT_EQ(message(p), "x[1] is 1e-50, too small for float32 (it would become 0)");
  p = {};
  p.gamma = {-1e-46};
  EXPECT_EQ(message(p), "gamma[0] is -1e-46, too small for float32 (it would become 0)");
  p = {};
  p.eps = 1e-300;
  EXPECT_EQ(message(p), "eps is 1e-300, too small for float32 (it would become 0)");
  p = {};
  p.x = {2.0, 1.5e-45, 1.0, 4.0};
  EXPECT_EQ(message(p), "accepted");
}

}  // namespace
}  // namespace addnorm::lab
