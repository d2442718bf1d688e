// The gradient of page 000's stack, carried down layer by layer in float64 as the page does.
// The weights come from addnorm's copy of NumPy's default_rng, so the numbers are the page's:
// one generator serves both runs, so the 24-layer weights follow the 6-layer ones.
#include "tour/gradient_flow.hpp"

#include <cmath>

#include "addnorm/numpy_random.hpp"
#include "tour/numpy_format.hpp"

namespace addnorm::tour {
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

GradientFlow gradient_flow() {
  GradientFlow flow;
  flow.dim = 8;
  flow.seed = 42;
  flow.weight_std = 0.1;
  const auto dim = static_cast<size_t>(flow.dim);
  const std::vector<double> top(dim, 1.0);
  flow.top_norm = norm_of(top);

  numpy_random::Generator rng(flow.seed);
  for (int layers : {6, 24}) {
    std::vector<Matrix> weights;
    for (int i = 0; i < layers; ++i) {
      weights.push_back(rng.normal(0.0, flow.weight_std, static_cast<int64_t>(dim * dim)));
    }
    std::vector<double> plain = top, residual = top;
    for (auto weight = weights.rbegin(); weight != weights.rend(); ++weight) {
      plain = transpose_times(*weight, plain);  // y = W x      -> dy/dx = W
      // y = x + W x -> dy/dx = I + W, so the gradient is g + W^T g.
      const std::vector<double> through_weight = transpose_times(*weight, residual);
      for (size_t i = 0; i < dim; ++i) residual[i] += through_weight[i];
    }
    flow.runs.push_back({layers, norm_of(plain), norm_of(residual)});
  }
  return flow;
}

std::string gradient_page_lines(const GradientFlow& flow) {
  std::string text;
  for (const GradientFlowRun& run : flow.runs) {
    text += std::to_string(run.layers) + " layers: gradient size without residual " +
            scientific(run.without_residual, 2) + ", with residual " + fixed(run.with_residual, 2) +
            "\n";
  }
  return text;
}

std::string gradient_text(const GradientFlow& flow) {
  std::string text;
  text += "d = " + std::to_string(flow.dim) + ", weights W ~ N(0, " + python_repr(flow.weight_std) +
          ") from np.random.default_rng(" + std::to_string(flow.seed) +
          ") (one generator: the 24-layer weights follow the 6-layer ones), float64\n";
  text += "the gradient arriving at the top is ones(" + std::to_string(flow.dim) + "), size " +
          fixed(flow.top_norm, 2) + "\n\n";
  text += gradient_page_lines(flow) + "\n";
  text +=
      "without residuals every factor is W and the product shrinks towards zero; with them "
      "every factor is I + W and the size stays near " +
      fixed(flow.top_norm, 2) + "\n";
  return text;
}

nlohmann::json gradient_json(const GradientFlow& flow) {
  nlohmann::json runs = nlohmann::json::array();
  for (const GradientFlowRun& run : flow.runs) {
    runs.push_back({{"layers", run.layers},
                    {"without_residual", run.without_residual},
                    {"with_residual", run.with_residual}});
  }
  return {{"dim", flow.dim},
          {"seed", flow.seed},
          {"weight_std", flow.weight_std},
          {"top_norm", flow.top_norm},
          {"runs", runs}};
}

}  // namespace addnorm::tour
