// The "cat" token through addnorm::layer_norm (float32), reported and printed like page 000's
// NumPy run. Steps 1 and 3 come from the op's saved mean and rstd; step 2 is recomputed in
// float64 around that mean, as the page writes it.
#include "tour/cat_layer_norm.hpp"

#include <cmath>

#include "addnorm/ops.hpp"
#include "tour/float_arrays.hpp"
#include "tour/numpy_format.hpp"

namespace addnorm::tour {

CatLayerNorm cat_layer_norm() {
  CatLayerNorm cat;
  cat.token = {2.0, 4.0, 6.0, 8.0};
  cat.eps = 1e-5;
  const Shape shape{4};
  const Tensor x = to_tensor(cat.token, shape);
  const float eps = static_cast<float>(cat.eps);

  Tensor x_hat(shape), mean({1}), rstd({1});
  NormOptions plain;
  plain.eps = eps;
  layer_norm(x.view(), shape, x_hat.view(), plain, NormStats{mean.view(), rstd.view()});
  cat.mean = mean[0];
  cat.rstd = rstd[0];
  cat.std_with_eps = 1.0 / cat.rstd;
  double squares = 0.0;
  for (double v : cat.token) squares += (v - cat.mean) * (v - cat.mean);
  cat.variance = squares / static_cast<double>(cat.token.size());
  cat.x_hat = to_doubles(x_hat);

  // Step 4 with the initial parameters: gamma ones, beta zeros.
  const Tensor ones(shape, {1.0f, 1.0f, 1.0f, 1.0f});
  const Tensor zeros(shape);
  Tensor y(shape);
  layer_norm(x.view(), shape, y.view(), {.gamma = ones.view(), .beta = zeros.view(), .eps = eps});
  cat.y = to_doubles(y);
  cat.mean_of_y = mean_of(cat.y);
  cat.variance_of_y = variance_of(cat.y);
  cat.variance_of_y_expected = cat.variance / (cat.variance + cat.eps);

  // gamma = sqrt(var + eps), beta = mean undo the normalisation of this token.
  const float undo_scale = static_cast<float>(std::sqrt(cat.variance + cat.eps));
  const float undo_shift = static_cast<float>(cat.mean);
  const Tensor gamma(shape, std::vector<float>(4, undo_scale));
  const Tensor beta(shape, std::vector<float>(4, undo_shift));
  Tensor back(shape);
  layer_norm(x.view(), shape, back.view(),
             {.gamma = gamma.view(), .beta = beta.view(), .eps = eps});
  cat.round_trip = to_doubles(back);
  return cat;
}

std::string cat_page_lines(const CatLayerNorm& cat) {
  std::string text;
  text += "mean: " + python_repr(cat.mean) + "  variance: " + python_repr(cat.variance) +
          "  sqrt(var + eps): " + python_repr(python_round(cat.std_with_eps, 5)) + "\n";
  text += "x_hat: " + numpy_str(numpy_round(cat.x_hat, 4)) + "\n";
  text += "y:     " + numpy_str(numpy_round(cat.y, 4)) + "\n";
  text += "mean of y: " + python_repr(python_round(cat.mean_of_y, 6) + 0.0) +
          "  variance of y: " + python_repr(python_round(cat.variance_of_y, 6)) + "\n";
  text += "gamma = sqrt(var + eps), beta = mean gives back: " +
          numpy_str(numpy_round(cat.round_trip, 4)) + "\n";
  return text;
}

std::string cat_text(const CatLayerNorm& cat) {
  std::string text;
  text += "token \"cat\" = " + python_list(cat.token) +
          ", gamma = ones, beta = zeros, eps = " + python_repr(cat.eps) +
          " (addnorm::layer_norm, float32)\n\n";
  text += cat_page_lines(cat) + "\n";
  text +=
      "why the variance of y is not 1: eps sits under the square root, so var(y) = var / "
      "(var + eps) = " +
      python_repr(cat.variance) + " / " + python_repr(cat.variance + cat.eps) + " = " +
      fixed(cat.variance_of_y_expected, 6) + "\n";
  text += "the op's saved statistics for the backward: mean " +
          python_repr_float32(static_cast<float>(cat.mean)) + ", rstd " +
          python_repr_float32(static_cast<float>(cat.rstd)) + " = 1 / " +
          fixed(cat.std_with_eps, 5) + "\n";
  return text;
}

nlohmann::json cat_json(const CatLayerNorm& cat) {
  return {{"token", cat.token},
          {"eps", cat.eps},
          {"mean", cat.mean},
          {"variance", cat.variance},
          {"rstd", cat.rstd},
          {"sqrt_var_plus_eps", cat.std_with_eps},
          {"x_hat", cat.x_hat},
          {"y", cat.y},
          {"mean_of_y", cat.mean_of_y},
          {"variance_of_y", cat.variance_of_y},
          {"variance_of_y_expected", cat.variance_of_y_expected},
          {"round_trip", cat.round_trip}};
}

}  // namespace addnorm::tour
