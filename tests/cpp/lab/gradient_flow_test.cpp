// The gradient-flow experiment against the seed page's printed numbers and against the
// expectation E|W^T g|^2 = sigma^2 d |g|^2 (so the root-mean-square size after L layers is
// |g| (sigma sqrt(d))^L, and |g| sqrt(lambda^2 + sigma^2 d)^L through lambda I + W).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "addnorm/error.hpp"
#include "addnorm/lab/gradient_flow.hpp"

namespace addnorm::lab {
namespace {

std::string scientific(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2e", value);
  return buffer;
}

TEST(LabGradientFlow, DefaultsReproduceThePage) {
  const GradientFlowResult result = run_gradient_flow({});
  ASSERT_EQ(result.stacks.size(), 2u);
  EXPECT_EQ(result.stacks[0].depth, 6);
  EXPECT_EQ(scientific(result.stacks[0].without_residual.back()), "8.62e-04");
  EXPECT_NEAR(result.stacks[0].with_residual.back(), 3.31, 0.005);
  EXPECT_EQ(scientific(result.stacks[1].without_residual.back()), "6.86e-14");
  EXPECT_NEAR(result.stacks[1].with_residual.back(), 2.79, 0.005);
  // Index 0 is the gradient arriving at the top: ones(8), size sqrt(8) = 2.83.
  EXPECT_DOUBLE_EQ(result.stacks[0].without_residual[0], std::sqrt(8.0));
  EXPECT_EQ(result.stacks[1].with_residual.size(), 25u);
}

// Mean of |g_L|^2 / |g_0|^2 over many seeds against (sigma^2 d)^L and (lambda^2 + sigma^2 d)^L.
// With d = 16 and L = 5 the per-seed ratio has a relative variance of about (1 + 2/d)^L - 1 =
// 0.8, so the mean of 400 seeds is within 4.5% (one sigma) of its expectation; 15% is > 3 sigma.
TEST(LabGradientFlow, MatchesTheExpectedFactorOverSeeds) {
  GradientFlowParams params;
  params.width = 16;
  params.depths = {5};
  params.weight_std = 0.3;
  params.residual_scale = 0.5;
  const double plain_factor = std::pow(0.3 * 0.3 * 16, 5);
  const double residual_factor = std::pow(0.25 + 0.3 * 0.3 * 16, 5);
  double plain_sum = 0.0, residual_sum = 0.0;
  constexpr int kSeeds = 400;
  for (int seed = 0; seed < kSeeds; ++seed) {
    params.seed = static_cast<uint64_t>(seed);
    const GradientFlowStack stack = run_gradient_flow(params).stacks[0];
    plain_sum += std::pow(stack.without_residual.back() / stack.without_residual[0], 2);
    residual_sum += std::pow(stack.with_residual.back() / stack.with_residual[0], 2);
    // The reported expectation is the same formula.
    EXPECT_NEAR(stack.expected_without_residual.back(), std::sqrt(16.0 * plain_factor), 1e-9);
  }
  EXPECT_NEAR(plain_sum / kSeeds / plain_factor, 1.0, 0.15);
  EXPECT_NEAR(residual_sum / kSeeds / residual_factor, 1.0, 0.15);
}

TEST(LabGradientFlow, ZeroResidualScaleIsThePlainStack) {
  GradientFlowParams params;
  params.residual_scale = 0.0;
  const GradientFlowResult result = run_gradient_flow(params);
  for (const GradientFlowStack& stack : result.stacks) {
    EXPECT_EQ(stack.with_residual, stack.without_residual);  // bitwise: 0 * g + W^T g
  }
}

TEST(LabGradientFlow, RefusesBadParameters) {
  const auto refuses = [](GradientFlowParams params, const std::string& fragment) {
    try {
      run_gradient_flow(params);
      ADD_FAILURE() << "accepted, expected an error with " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  GradientFlowParams p;
  p.depths = {0};
  refuses(p, "depths[0] is 0, expected an integer in [1, 1000]");
  p = {};
  p.width = -3;
  refuses(p, "width is -3, expected an integer in [1, 256]");
  p = {};
  p.weight_std = std::nan("");
  refuses(p, "weight_std is nan");
  p = {};
  p.depths = {};
  refuses(p, "depths has 0 values, expected 1 to 8");
  p = {};
  p.width = 256;
  p.depths = {1000};
  refuses(p, "sum(depths) * width^2 is 65536000, expected at most 524288");
}

TEST(LabGradientFlow, ParamsFromJson) {
  const GradientFlowParams p = gradient_flow_params_from_json(
      nlohmann::json::parse(R"({"width": 4, "depths": [3], "residual_scale": 0.5})"));
  EXPECT_EQ(p.width, 4);
  EXPECT_EQ(p.depths, std::vector<int>{3});
  EXPECT_EQ(p.residual_scale, 0.5);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_THROW(gradient_flow_params_from_json(nlohmann::json::parse(R"({"widht": 4})")), Error);
  EXPECT_THROW(gradient_flow_params_from_json(nlohmann::json::parse(R"({"width": "4"})")), Error);
  EXPECT_THROW(gradient_flow_params_from_json(nlohmann::json::parse(R"({"seed": -1})")), Error);
  EXPECT_THROW(gradient_flow_params_from_json(nlohmann::json::parse(R"({"width": 1e20})")), Error);
  EXPECT_THROW(gradient_flow_params_from_json(nlohmann::json::parse("[1]")), Error);
  // Round trip: the result's params are the request.
  const GradientFlowResult result = run_gradient_flow(p);
  EXPECT_EQ(gradient_flow_params_from_json(to_json(result)["params"]).depths, p.depths);
}

TEST(LabGradientFlow, CsvHasOneRowPerLayerPassed) {
  const std::string csv = to_csv(run_gradient_flow({}));
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "depth,layers_passed,without_residual,with_residual,expected_without_residual,"
            "expected_with_residual");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 7 + 25);
}

}  // namespace
}  // namespace addnorm::lab
