// Page 001's LayerNorm example through addnorm::layer_norm, and the page's own rounding
// reproduced so that the difference in its last printed value (2.86, exactly 2.853) is explained.
#include "tour/normalization_steps.hpp"

#include "addnorm/ops.hpp"
#include "tour/float_arrays.hpp"
#include "tour/numpy_format.hpp"

namespace addnorm::tour {
namespace {

std::vector<double> run_layer_norm(const Tensor& x, float eps, const Tensor* gamma,
                                   const Tensor* beta, Tensor* mean = nullptr,
                                   Tensor* rstd = nullptr) {
  const Shape shape = x.shape();
  Tensor y(shape);
  NormOptions options;
  options.eps = eps;
  if (gamma != nullptr) options.gamma = gamma->cview();
  if (beta != nullptr) options.beta = beta->cview();
  std::optional<NormStats> stats;
  if (mean != nullptr && rstd != nullptr) stats = NormStats{mean->view(), rstd->view()};
  layer_norm(x.view(), shape, y.view(), options, stats);
  return to_doubles(y);
}

}  // namespace

NormalizationSteps normalization_steps() {
  NormalizationSteps steps;
  steps.token = {2.0, -3.0, 1.0, 4.0};
  steps.gamma = 2.0;
  steps.beta = 0.5;
  steps.default_eps = 1e-5;
  const Shape shape{4};
  const Tensor x = to_tensor(steps.token, shape);
  const Tensor gamma(shape, std::vector<float>(4, static_cast<float>(steps.gamma)));
  const Tensor beta(shape, std::vector<float>(4, static_cast<float>(steps.beta)));

  Tensor mean({1}), rstd({1});
  steps.normalized = run_layer_norm(x, 0.0f, nullptr, nullptr, &mean, &rstd);
  steps.mean = mean[0];
  steps.std = 1.0 / rstd[0];
  double squares = 0.0;
  for (double v : steps.token) squares += (v - steps.mean) * (v - steps.mean);
  steps.variance = squares / static_cast<double>(steps.token.size());
  steps.output = run_layer_norm(x, 0.0f, &gamma, &beta);
  steps.output_default_eps =
      run_layer_norm(x, static_cast<float>(steps.default_eps), &gamma, &beta);

  steps.page_std = python_round(steps.std, 2);
  for (double v : steps.token) {
    const double normalized = python_round((v - steps.mean) / steps.page_std, 2);
    steps.page_normalized.push_back(normalized);
    steps.page_output.push_back(python_round(steps.gamma * normalized + steps.beta, 2));
  }
  return steps;
}

std::string steps_text(const NormalizationSteps& steps) {
  std::string sum, squares;
  for (size_t i = 0; i < steps.token.size(); ++i) {
    const double deviation = steps.token[i] - steps.mean;
    // Negative values in parentheses, as the page writes (2 + (-3) + 1 + 4).
    const std::string value = prose_number(steps.token[i], 0);
    sum += i > 0 ? " + " : "";
    sum += steps.token[i] < 0 ? "(" + value + ")" : value;
    squares += (i > 0 ? " + " : "") + prose_number(deviation * deviation, 4);
  }
  const size_t last = steps.token.size() - 1;
  std::string text;
  text += "token after layer 5: x = " + prose_list(steps.token, 4) +
          ", gamma = " + prose_number(steps.gamma, 4) + ", beta = " + prose_number(steps.beta, 4) +
          " for every feature; addnorm::layer_norm, float32, eps = 0 as in the page's arithmetic\n";
  text += "1. mean: (" + sum + ") / 4 = " + python_repr(steps.mean) + "\n";
  text += "2. std: sqrt((" + squares + ") / 4) = sqrt(" + python_repr(steps.variance) +
          ") = " + fixed(steps.std, 4) + "\n";
  text += "3. normalize: (x - mean) / std = " + prose_list(steps.normalized, 4) + "\n";
  text += "4. scale + shift: gamma * normalized + beta = " + prose_list(steps.output, 4) + "\n";
  text += "with eps = " + python_repr(steps.default_eps) + " under the root the output is " +
          prose_list(steps.output_default_eps, 6) + " instead of " + prose_list(steps.output, 6) +
          "\n";
  text += "the page divides by the rounded " + prose_number(steps.page_std, 2) +
          " and rounds to 2 decimals: normalized " + prose_list(steps.page_normalized, 2) +
          ", output " + prose_list(steps.page_output, 2) + "; " + prose_number(steps.gamma, 2) +
          " * " + prose_number(steps.page_normalized[last], 2) + " + " +
          prose_number(steps.beta, 2) + " = " + prose_number(steps.page_output[last], 2) +
          " while the exact value is " + fixed(steps.output[last], 3) + "\n";
  return text;
}

nlohmann::json steps_json(const NormalizationSteps& steps) {
  return {{"token", steps.token},
          {"gamma", steps.gamma},
          {"beta", steps.beta},
          {"mean", steps.mean},
          {"variance", steps.variance},
          {"std", steps.std},
          {"normalized", steps.normalized},
          {"output", steps.output},
          {"default_eps", steps.default_eps},
          {"output_default_eps", steps.output_default_eps},
          {"page_std", steps.page_std},
          {"page_normalized", steps.page_normalized},
          {"page_output", steps.page_output}};
}

}  // namespace addnorm::tour
