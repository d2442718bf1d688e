// addnorm::rms_norm and addnorm::layer_norm on the same tokens: RMSNorm only rescales, so a
// token's offset survives; LayerNorm centres first.
#include "tour/rms_vs_layer_norm.hpp"

#include <cmath>

#include "addnorm/ops.hpp"
#include "tour/float_arrays.hpp"
#include "tour/numpy_format.hpp"

namespace addnorm::tour {
namespace {

RmsVsLayerNormToken compare(const std::string& name, std::vector<double> values, float eps) {
  RmsVsLayerNormToken result;
  result.name = name;
  result.token = std::move(values);
  const Shape shape{static_cast<int64_t>(result.token.size())};
  const Tensor x = to_tensor(result.token, shape);

  Tensor rms_y(shape), rstd({1});
  NormOptions rms_options;
  rms_options.eps = eps;
  rms_norm(x.view(), shape, rms_y.view(), rms_options, rstd.view());
  result.rms = 1.0 / rstd[0];
  result.rms_norm = to_doubles(rms_y);
  result.rms_norm_mean = mean_of(result.rms_norm);
  double squares = 0.0;
  for (double v : result.rms_norm) squares += v * v;
  result.rms_norm_rms = std::sqrt(squares / static_cast<double>(result.rms_norm.size()));

  Tensor layer_y(shape);
  NormOptions layer_options;
  layer_options.eps = eps;
  layer_norm(x.view(), shape, layer_y.view(), layer_options);
  result.layer_norm = to_doubles(layer_y);
  result.layer_norm_mean = mean_of(result.layer_norm);
  result.layer_norm_std = std_of(result.layer_norm);
  return result;
}

}  // namespace

RmsVsLayerNorm rms_vs_layer_norm() {
  RmsVsLayerNorm comparison;
  comparison.eps = 1e-6;
  const auto eps = static_cast<float>(comparison.eps);
  comparison.tokens.push_back(compare("cat", {2.0, 4.0, 6.0, 8.0}, eps));
  comparison.tokens.push_back(compare("token after layer 5", {2.0, -3.0, 1.0, 4.0}, eps));
  return comparison;
}

std::string rms_text(const RmsVsLayerNorm& comparison) {
  std::string text;
  text += "eps = " + python_repr(comparison.eps) +
          " for both, the page's class defaults; gamma ones, beta zeros (addnorm::rms_norm, "
          "addnorm::layer_norm, float32)\n";
  text +=
      "RMSNorm skips the mean subtraction and beta: y = gamma * x / sqrt(mean(x^2) + eps), "
      "one statistic per token instead of two, and the token's offset survives\n";
  for (const RmsVsLayerNormToken& token : comparison.tokens) {
    text += "\n" + token.name + " = " + prose_list(token.token, 4) +
            ": rms = sqrt(mean(x^2) + eps) = " + fixed(token.rms, 4) + "\n";
    text += "  RMSNorm:   " + numpy_str(numpy_round(token.rms_norm, 4)) + "  mean " +
            fixed(token.rms_norm_mean, 4) + ", rms " + fixed(token.rms_norm_rms, 4) + "\n";
    text += "  LayerNorm: " + numpy_str(numpy_round(token.layer_norm, 4)) + "  mean " +
            prose_number(token.layer_norm_mean, 4) + ", std " + fixed(token.layer_norm_std, 4) +
            "\n";
  }
  return text;
}

nlohmann::json rms_json(const RmsVsLayerNorm& comparison) {
  nlohmann::json tokens = nlohmann::json::array();
  for (const RmsVsLayerNormToken& token : comparison.tokens) {
    tokens.push_back({{"name", token.name},
                      {"token", token.token},
                      {"rms", token.rms},
                      {"rms_norm", token.rms_norm},
                      {"layer_norm", token.layer_norm},
                      {"rms_norm_mean", token.rms_norm_mean},
                      {"rms_norm_rms", token.rms_norm_rms},
                      {"layer_norm_mean", token.layer_norm_mean},
                      {"layer_norm_std", token.layer_norm_std}});
  }
  return {{"eps", comparison.eps}, {"tokens", tokens}};
}

}  // namespace addnorm::tour
