// Activations through a stack of linear layers x <- x W, in float32 as a model would hold them,
// once as they are and once with addnorm::layer_norm after every layer: the lab's
// activation-growth experiment (src/lab/activation_growth.cpp) at its defaults.
#include "tour/activation_growth.hpp"

#include <algorithm>
#include <cmath>

#include "addnorm/lab/activation_growth.hpp"
#include "tour/numpy_format.hpp"

namespace addnorm::tour {

ActivationGrowth activation_growth() {
  // The lab's activation-growth experiment at its defaults, with the two arrangements the
  // page's widget toggles between.
  lab::ActivationGrowthParams params;
  params.modes = {lab::GrowthMode::none, lab::GrowthMode::layer_norm};
  const lab::ActivationGrowthResult run = lab::run_activation_growth(params);
  ActivationGrowth growth;
  growth.tokens = params.tokens;
  growth.dim = params.width;
  growth.layers = params.layers;
  growth.gain = params.gain;
  growth.seed = params.seed;
  growth.eps = params.eps;
  growth.std_without_norm = run.curves[0].std;
  growth.std_with_layer_norm = run.curves[1].std;
  growth.first_layer_past_100 = run.curves[0].first_layer_past_100;
  growth.spread_seeds = params.spread_seeds;
  if (params.spread_seeds > 0) {
    growth.last_std_without_norm = run.curves[0].std_spread.back();
    growth.last_std_with_layer_norm = run.curves[1].std_spread.back();
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
  // Beside the page's single draw, not instead of it: the same over other seeds.
  if (growth.spread_seeds > 0) {
    const auto spread = [](const lab::Spread& s, int decimals) {
      return fixed(s.median, decimals) + " [" + fixed(s.low, decimals) + ", " +
             fixed(s.high, decimals) + "]";
    };
    text += "over " + std::to_string(growth.spread_seeds) + " other seeds (" +
            std::to_string(growth.seed + 1) + ".." +
            std::to_string(growth.seed + growth.spread_seeds) + "), the std at layer " +
            std::to_string(growth.layers) +
            ", median [25th, 75th percentile]: " + spread(growth.last_std_without_norm, 0) +
            " without normalization, " + spread(growth.last_std_with_layer_norm, 6) +
            " with LayerNorm\n";
  }
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
          {"first_layer_past_100", growth.first_layer_past_100},
          {"spread_seeds", growth.spread_seeds},
          {"last_std_without_norm_spread", lab::to_json(growth.last_std_without_norm)},
          {"last_std_with_layer_norm_spread", lab::to_json(growth.last_std_with_layer_norm)}};
}

}  // namespace addnorm::tour
