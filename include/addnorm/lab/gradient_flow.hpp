// Experiment 1, gradient-flow: seed page 000's stack of random linear layers, with and without
// residual connections. The gradient arriving at the top (a vector of ones) is carried down by
// each layer's Jacobian: W for y = W x, and lambda I + W for y = lambda x + W x (the residual
// scale lambda: 1 is the identity shortcut, 0 no shortcut at all). Float64 throughout.
//
// At the defaults it is exactly the page's run: d = 8, W ~ N(0, 0.1) from NumPy's
// default_rng(42), depths 6 then 24 from one generator, giving 8.62e-04 / 3.31 (6 layers) and
// 6.86e-14 / 2.79 (24 layers).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/seed_spread.hpp"

namespace addnorm::lab {

struct GradientFlowParams {
  int width = 8;                   // d, in [1, 256]
  std::vector<int> depths{6, 24};  // 1 to 8 stacks, each of depth in [1, 1000]
  double weight_std = 0.1;         // W ~ N(0, weight_std), in [0, 10]
  double residual_scale = 1.0;     // lambda in y = lambda x + W x, in [-10, 10]
  uint64_t seed = 42;              // numpy_random::Generator(seed); stacks drawn in order
  // The spread beside the single draw: the same stacks drawn from seeds seed + 1 ..
  // seed + spread_seeds, in [0, 4096] (0: none).
  int spread_seeds = 1024;
};
// The limit on the total number of weights, sum(depths) * width^2 * (1 + spread_seeds), that
// keeps a run fast.
inline constexpr int64_t kGradientFlowMaxWeights = int64_t{1} << 19;
inline constexpr int64_t kGradientFlowMaxSpreadWeights = int64_t{1} << 25;  // ~0.3 s of draws

struct GradientFlowStack {
  int depth = 0;
  // Gradient norms from the top down: index 0 is the gradient arriving at the top (|ones(d)|),
  // index k the gradient after passing k layers, index depth the one reaching the input.
  std::vector<double> without_residual;  // through W^T only
  std::vector<double> with_residual;     // through (lambda I + W)^T
  // What theory expects for the same indices: E|W^T g|^2 = weight_std^2 d |g|^2, so the
  // root-mean-square norm after k layers is |g| (weight_std sqrt(d))^k without residual and
  // |g| sqrt(lambda^2 + weight_std^2 d)^k with it.
  std::vector<double> expected_without_residual;
  std::vector<double> expected_with_residual;
  // Over the spread seeds, per index k: median and interquartile range (empty without them).
  std::vector<Spread> spread_without_residual, spread_with_residual;
};

struct GradientFlowResult {
  GradientFlowParams params;
  double top_norm = 0.0;  // |ones(d)| = sqrt(d)
  std::vector<GradientFlowStack> stacks;
};

// Throws addnorm::Error naming the first bad parameter and its limits.
void validate(const GradientFlowParams& params);
GradientFlowResult run_gradient_flow(const GradientFlowParams& params);

nlohmann::json to_json(const GradientFlowParams& params);
nlohmann::json to_json(const GradientFlowResult& result);
// One row per (depth, layer): depth,layer,without_residual,with_residual,expected_...
std::string to_csv(const GradientFlowResult& result);
// Parameters from a JSON object; absent keys keep their defaults, unknown keys are an Error.
GradientFlowParams gradient_flow_params_from_json(const nlohmann::json& object);

}  // namespace addnorm::lab
