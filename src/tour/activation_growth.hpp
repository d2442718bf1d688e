// Section "growth": page 001's activation-growth widget made concrete. A deterministic stack of
// random linear layers whose gain exceeds 1, run without normalisation and with LayerNorm after
// every layer; the std of the activations per layer is what the widget's bars show.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/seed_spread.hpp"

namespace addnorm::tour {

struct ActivationGrowth {
  int tokens = 0;  // rows of the activation matrix
  int dim = 0;     // d, the width of every layer
  int layers = 0;
  double gain = 0.0;  // W ~ N(0, gain / sqrt(d)): each layer multiplies the std by about gain
  uint64_t seed = 0;  // numpy_random::Generator, input first, then one W per layer
  double eps = 0.0;   // the LayerNorm's eps
  // The std over all activations: index 0 is the input, index i the output of layer i.
  std::vector<double> std_without_norm;
  std::vector<double> std_with_layer_norm;
  // The first layer whose std exceeds 100 without normalisation (0 if none).
  int first_layer_past_100 = 0;
  // The last layer's std over the other seeds (seed + 1 .. seed + spread_seeds), beside the
  // page's single draw: without normalisation and with LayerNorm.
  int spread_seeds = 0;
  lab::Spread last_std_without_norm, last_std_with_layer_norm;
};

ActivationGrowth activation_growth();
// "#####" whose length grows by 10 characters per factor of 10 in std (10 at std = 1).
std::string log_bar(double std_value);
std::string growth_text(const ActivationGrowth& growth);
nlohmann::json growth_json(const ActivationGrowth& growth);

}  // namespace addnorm::tour
