// Activations through a stack of linear layers x <- x W, in float32 as a model would hold them,
// once as they are and once with addnorm::layer_norm after every layer.
#include "tour/activation_growth.hpp"

#include <algorithm>
#include <cmath>

#include "addnorm/numpy_random.hpp"
#include "addnorm/ops.hpp"
#include "tour/float_arrays.hpp"
#include "tour/numpy_format.hpp"

namespace addnorm::tour {
namespace {

double std_of_tensor(const Tensor& tensor) {
  return std_of(to_doubles(tensor));
}

}  // namespace

ActivationGrowth activation_growth() {
  ActivationGrowth growth;
  growth.tokens = 8;
  growth.dim = 64;
  growth.layers = 24;
  growth.gain = 1.4;
  growth.seed = 42;
  growth.eps = 1e-5;

  numpy_random::Generator rng(growth.seed);
  const Shape shape{growth.tokens, growth.dim};
  const Tensor input = to_tensor(rng.normal(0.0, 1.0, shape.numel()), shape);
  const double weight_std = growth.gain / std::sqrt(static_cast<double>(growth.dim));

  Tensor plain = input, normed = input;
  growth.std_without_norm.push_back(std_of_tensor(plain));
  growth.std_with_layer_norm.push_back(std_of_tensor(normed));
  LayerNormOptions options;
  options.eps = static_cast<float>(growth.eps);
  for (int layer = 1; layer <= growth.layers; ++layer) {
    const std::vector<double> weight =
        rng.normal(0.0, weight_std, static_cast<int64_t>(growth.dim) * growth.dim);
    plain = times_matrix(plain, weight, growth.dim);
    const Tensor hidden = times_matrix(normed, weight, growth.dim);
    layer_norm(hidden.view(), Shape{growth.dim}, normed.view(), options);
    growth.std_without_norm.push_back(std_of_tensor(plain));
    growth.std_with_layer_norm.push_back(std_of_tensor(normed));
    if (growth.first_layer_past_100 == 0 && growth.std_without_norm.back() > 100.0) {
      growth.first_layer_past_100 = layer;
    }
  }
  return growth;
}

std::string log_bar(double std_value) {
  const double length = 10.0 * (1.0 + std::log10(std::max(std_value, 1e-30)));
  return std::string(static_cast<size_t>(std::max(1.0, std::round(length))), '#');
}

std::string growth_text(const ActivationGrowth& growth) {
  std::string text;
  text += "setting: " + std::to_string(growth.tokens) +
          " tokens x d = " + std::to_string(growth.dim) + ", " + std::to_string(growth.layers) +
          " linear layers x <- x W, W ~ N(0, " + python_repr(growth.gain) + " / sqrt(" +
          std::to_string(growth.dim) + ")) (gain " + python_repr(growth.gain) +
          " per layer); input N(0, 1) and weights from default_rng(" + std::to_string(growth.seed) +
          "); float32 activations\n";
  text += "\"With LayerNorm\" applies addnorm::layer_norm (eps " + python_repr(growth.eps) +
          ", no gamma/beta) after every layer. Bars: 10 characters at std 1, 10 more per factor "
          "of 10.\n";
  const auto table = [&](const char* title, const std::vector<double>& stds, int decimals) {
    std::string rows = std::string(title) + "\n";
    for (size_t layer = 0; layer < stds.size(); ++layer) {
      std::string number = fixed(stds[layer], decimals);
      number.insert(0, number.size() < 9 ? 9 - number.size() : 0, ' ');
      std::string index = std::to_string(layer);
      index.insert(0, 2 - std::min<size_t>(2, index.size()), ' ');
      rows += "  layer " + index + "  std " + number + "  " + log_bar(stds[layer]) + "\n";
    }
    return rows;
  };
  text += "\n";
  text += table("No Normalization", growth.std_without_norm, 2);
  text += "\n";
  text += table("With LayerNorm", growth.std_with_layer_norm, 6);
  double largest_deviation = 0.0;
  // Layer 0 is the random input, whose std is 1 only up to sampling noise.
  for (size_t layer = 1; layer < growth.std_with_layer_norm.size(); ++layer) {
    largest_deviation =
        std::max(largest_deviation, std::fabs(growth.std_with_layer_norm[layer] - 1.0));
  }
  text += "\nwithout normalization the std grows about x" + python_repr(growth.gain) +
          " per layer: past 100 at layer " + std::to_string(growth.first_layer_past_100) + ", " +
          fixed(growth.std_without_norm.back(), 0) + " at layer " + std::to_string(growth.layers) +
          "\n";
  text += "(the page's widget quotes std 4312 by layer 10, a gain near 2.3; with gain " +
          python_repr(growth.gain) + " the crossing of 100 comes at layer " +
          std::to_string(growth.first_layer_past_100) + ", like its \"15+ layers\")\n";
  text += "with LayerNorm every layer after the input stays near 1.0 (largest |std - 1| = " +
          scientific(largest_deviation, 1) + ", the eps under the root)\n";
  return text;
}

nlohmann::json growth_json(const ActivationGrowth& growth) {
  return {{"tokens", growth.tokens},
          {"dim", growth.dim},
          {"layers", growth.layers},
          {"gain", growth.gain},
          {"seed", growth.seed},
          {"eps", growth.eps},
          {"std_without_norm", growth.std_without_norm},
          {"std_with_layer_norm", growth.std_with_layer_norm},
          {"first_layer_past_100", growth.first_layer_past_100}};
}

}  // namespace addnorm::tour
