// Experiment 1: the gradient of seed page 000's linear stack, carried down layer by layer in
// float64 exactly as the page's NumPy loop does (the tour's "gradient" section is this function
// at its defaults).
#include "addnorm/lab/gradient_flow.hpp"

#include <cmath>
#include <numeric>

#include "addnorm/numpy_random.hpp"
#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/experiment_fields.hpp"
#include "lab/json_params.hpp"

namespace addnorm::lab {
namespace {

using Matrix = std::vector<double>;  // d x d, C order

// W^T g: the gradient of y = W x with respect to x, given the gradient g of y.
std::vector<double> transpose_times(const Matrix& weight, const std::vector<double>& gradient) {
  const size_t dim = gradient.size();
  std::vector<double> result(dim, 0.0);
  for (size_t row = 0; row < dim; ++row) {
    for (size_t col = 0; col < dim; ++col) result[col] += weight[row * dim + col] * gradient[row];
  }
  return result;
}

double norm_of(const std::vector<double>& v) {
  double sum = 0.0;
  for (double x : v) sum += x * x;
  return std::sqrt(sum);
}

}  // namespace

void validate(const GradientFlowParams& params) {
  check_fields(params, kGradientFlowFields);
  const int64_t layers = std::accumulate(params.depths.begin(), params.depths.end(), int64_t{0});
  const int64_t weights = layers * params.width * params.width;
  if (weights > kGradientFlowMaxWeights) {
    throw Error("sum(depths) * width^2 is " + std::to_string(weights) + ", expected at most " +
                std::to_string(kGradientFlowMaxWeights) + " (fewer or shallower stacks, or a " +
                "smaller width)");
  }
  if (weights * params.spread_seeds > kGradientFlowMaxSpreadWeights) {
    throw Error("sum(depths) * width^2 * spread_seeds is " +
                std::to_string(weights * params.spread_seeds) + ", expected at most " +
                std::to_string(kGradientFlowMaxSpreadWeights) + " (fewer spread_seeds)");
  }
}

namespace {

// The stacks of one generator seed, drawn in order from one generator as the page does.
std::vector<GradientFlowStack> draw_stacks(const GradientFlowParams& params, uint64_t seed) {
  const auto dim = static_cast<size_t>(params.width);
  const std::vector<double> top(dim, 1.0);
  const double lambda = params.residual_scale;
  numpy_random::Generator rng(seed);
  std::vector<GradientFlowStack> stacks;
  for (int depth : params.depths) {
    std::vector<Matrix> weights;
    for (int i = 0; i < depth; ++i) {
      weights.push_back(rng.normal(0.0, params.weight_std, static_cast<int64_t>(dim * dim)));
    }
    GradientFlowStack stack;
    stack.depth = depth;
    std::vector<double> plain = top, residual = top;
    stack.without_residual.push_back(norm_of(plain));
    stack.with_residual.push_back(norm_of(residual));
    for (auto weight = weights.rbegin(); weight != weights.rend(); ++weight) {
      plain = transpose_times(*weight, plain);  // y = W x -> dy/dx = W
      // y = lambda x + W x -> dy/dx = lambda I + W, so the gradient is lambda g + W^T g.
      const std::vector<double> through_weight = transpose_times(*weight, residual);
      for (size_t i = 0; i < dim; ++i) residual[i] = lambda * residual[i] + through_weight[i];
      stack.without_residual.push_back(norm_of(plain));
      stack.with_residual.push_back(norm_of(residual));
    }
    stacks.push_back(std::move(stack));
  }
  return stacks;
}

}  // namespace

GradientFlowResult run_gradient_flow(const GradientFlowParams& params) {
  validate(params);
  GradientFlowResult result;
  result.params = params;
  const auto dim = static_cast<size_t>(params.width);
  result.top_norm = std::sqrt(static_cast<double>(dim));  // |ones(d)|
  const double lambda = params.residual_scale;
  const double plain_factor = params.weight_std * std::sqrt(static_cast<double>(dim));
  const double residual_factor = std::sqrt(lambda * lambda + plain_factor * plain_factor);

  result.stacks = draw_stacks(params, params.seed);
  std::vector<std::vector<GradientFlowStack>> others;
  for (int i = 1; i <= params.spread_seeds; ++i) {
    others.push_back(draw_stacks(params, params.seed + static_cast<uint64_t>(i)));
  }
  for (size_t s = 0; s < result.stacks.size(); ++s) {
    GradientFlowStack& stack = result.stacks[s];
    for (int k = 0; k <= stack.depth; ++k) {
      stack.expected_without_residual.push_back(result.top_norm * std::pow(plain_factor, k));
      stack.expected_with_residual.push_back(result.top_norm * std::pow(residual_factor, k));
      if (others.empty()) continue;
      std::vector<double> without, with;
      for (const auto& other : others) {
        without.push_back(other[s].without_residual[static_cast<size_t>(k)]);
        with.push_back(other[s].with_residual[static_cast<size_t>(k)]);
      }
      stack.spread_without_residual.push_back(spread_of(without));
      stack.spread_with_residual.push_back(spread_of(with));
    }
  }
  return result;
}

nlohmann::json to_json(const GradientFlowParams& params) {
  return fields_to_json(params, kGradientFlowFields);
}

nlohmann::json to_json(const GradientFlowResult& result) {
  nlohmann::json stacks = nlohmann::json::array();
  for (const GradientFlowStack& stack : result.stacks) {
    stacks.push_back({{"depth", stack.depth},
                      {"without_residual", stack.without_residual},
                      {"with_residual", stack.with_residual},
                      {"expected_without_residual", stack.expected_without_residual},
                      {"expected_with_residual", stack.expected_with_residual},
                      {"spread_without_residual", to_json(stack.spread_without_residual)},
                      {"spread_with_residual", to_json(stack.spread_with_residual)}});
  }
  return {{"experiment", "gradient-flow"},
          {"params", to_json(result.params)},
          {"top_norm", result.top_norm},
          {"stacks", stacks}};
}

std::string to_csv(const GradientFlowResult& result) {
  CsvWriter csv({"depth", "layers_passed", "without_residual", "with_residual",
                 "expected_without_residual", "expected_with_residual"});
  for (const GradientFlowStack& stack : result.stacks) {
    for (size_t k = 0; k < stack.without_residual.size(); ++k) {
      csv.cell(stack.depth)
          .cell(static_cast<int>(k))
          .cell(stack.without_residual[k])
          .cell(stack.with_residual[k])
          .cell(stack.expected_without_residual[k])
          .cell(stack.expected_with_residual[k])
          .end_row();
    }
  }
  return csv.text();
}

GradientFlowParams gradient_flow_params_from_json(const nlohmann::json& object) {
  return read_params<GradientFlowParams>(object, "gradient-flow", kGradientFlowFields);
}

}  // namespace addnorm::lab
