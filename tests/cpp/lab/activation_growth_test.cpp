// The activation-growth experiment against what each arrangement must do: LayerNorm output has
// mean 0 and std 1 up to eps, RMSNorm output has root-mean-square 1, an unnormalised stack grows
// by the gain per layer, and pre-norm's stream adds a unit-variance update per layer.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "addnorm/error.hpp"
#include "addnorm/lab/activation_growth.hpp"
#include "tour/activation_growth.hpp"

namespace addnorm::lab {
namespace {

const GrowthCurve& curve_of(const ActivationGrowthResult& result, GrowthMode mode) {
  for (const GrowthCurve& curve : result.curves) {
    if (curve.mode == mode) return curve;
  }
  throw Error("no curve");
}

TEST(LabActivationGrowth, EachArrangementBehavesAsDerived) {
  const ActivationGrowthResult result = run_activation_growth({});
  const int layers = result.params.layers;
  const double gain = result.params.gain;
  for (const GrowthCurve& curve : result.curves) {
    ASSERT_EQ(curve.std.size(), static_cast<size_t>(layers) + 1);
    EXPECT_FALSE(curve.overflowed);
  }
  // No norm: each layer multiplies the std by about gain; the geometric mean ratio over 24
  // layers is within 10% of it.
  const GrowthCurve& none = curve_of(result, GrowthMode::none);
  const double ratio = std::pow(none.std.back() / none.std.front(), 1.0 / layers);
  EXPECT_NEAR(ratio, gain, 0.1 * gain);
  // LayerNorm and post-norm: every row has mean 0 and std 1 / sqrt(1 + eps / var), so over all
  // activations mean 0 and std within eps / var of 1 (var is about gain^2 before the norm).
  for (GrowthMode mode : {GrowthMode::layer_norm, GrowthMode::post_norm}) {
    const GrowthCurve& curve = curve_of(result, mode);
    for (int layer = 1; layer <= layers; ++layer) {
      EXPECT_NEAR(curve.mean[layer], 0.0, 1e-6) << growth_mode_name(mode) << " " << layer;
      EXPECT_NEAR(curve.std[layer], 1.0, 1e-5) << growth_mode_name(mode) << " " << layer;
    }
  }
  // RMSNorm: root-mean-square 1, i.e. mean^2 + std^2 = 1.
  const GrowthCurve& rms = curve_of(result, GrowthMode::rms_norm);
  for (int layer = 1; layer <= layers; ++layer) {
    EXPECT_NEAR(rms.mean[layer] * rms.mean[layer] + rms.std[layer] * rms.std[layer], 1.0, 1e-5);
  }
  // Pre-norm: x + F(LN(x)) adds an update of variance about gain^2 (LN(x) has variance 1),
  // uncorrelated with x at random weights: var_L is about 1 + L gain^2.
  const GrowthCurve& pre = curve_of(result, GrowthMode::pre_norm);
  const double expected = std::sqrt(1.0 + layers * gain * gain);
  EXPECT_NEAR(pre.std.back(), expected, 0.25 * expected);
  for (int layer = 1; layer <= layers; ++layer) EXPECT_GT(pre.std[layer], pre.std[layer - 1]);
}

TEST(LabActivationGrowth, DefaultsAreTheToursNumbers) {
  // The tour's section is this experiment; the tour's own tests pin its numbers to NumPy's.
  ActivationGrowthParams params;
  params.modes = {GrowthMode::layer_norm, GrowthMode::none};
  const ActivationGrowthResult result = run_activation_growth(params);
  const tour::ActivationGrowth growth = tour::activation_growth();
  EXPECT_EQ(result.curves[1].std, growth.std_without_norm);
  EXPECT_EQ(result.curves[0].std, growth.std_with_layer_norm);
  EXPECT_NEAR(result.curves[1].std[10], 29.648, 1e-3 * 29.648);  // NumPy's float64 run
}

TEST(LabActivationGrowth, ReportsOverflow) {
  ActivationGrowthParams params;
  params.gain = 10.0;
  params.layers = 60;
  params.modes = {GrowthMode::none, GrowthMode::layer_norm};
  const ActivationGrowthResult result = run_activation_growth(params);
  EXPECT_TRUE(result.curves[0].overflowed);  // 10^60 is past float32's 3.4e38
  EXPECT_FALSE(result.curves[1].overflowed);
}

TEST(LabActivationGrowth, RefusesBadParameters) {
  ActivationGrowthParams p;
  p.layers = 0;
  EXPECT_THROW(run_activation_growth(p), Error);
  p = {};
  p.width = -1;
  EXPECT_THROW(run_activation_growth(p), Error);
  p = {};
  p.modes = {GrowthMode::none, GrowthMode::none};
  EXPECT_THROW(run_activation_growth(p), Error);
  p = {};
  p.width = 512;
  p.layers = 200;
  EXPECT_THROW(run_activation_growth(p), Error);
  EXPECT_THROW(parse_growth_mode("batch_norm"), Error);
  EXPECT_THROW(activation_growth_params_from_json(nlohmann::json::parse(R"({"modes": ["x"]})")),
               Error);
}

}  // namespace
}  // namespace addnorm::lab
