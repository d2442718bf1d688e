// Experiment 2, activation-growth: seed page 001's widget made concrete. Random tokens pass
// through a stack of random linear layers F(x) = x W, W ~ N(0, gain / sqrt(width)), so each
// layer multiplies the activations' std by about `gain`. The same weights are run with five
// arrangements of the norm (LayerNorm has no gamma or beta here):
//   none        x <- F(x)
//   layer_norm  x <- LayerNorm(F(x))
//   rms_norm    x <- RMSNorm(F(x))
//   pre_norm    x <- x + F(LayerNorm(x))        (GPT-2)
//   post_norm   x <- LayerNorm(x + F(x))        (2017 paper)
// and the mean and std over all activations are recorded after every layer. Activations are
// float32 (as a model holds them), products accumulate in float64. At the defaults, "none" and
// "layer_norm" are the tour's "growth" section.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/seed_spread.hpp"

namespace addnorm::lab {

enum class GrowthMode { none, layer_norm, rms_norm, pre_norm, post_norm };
// "none", "layer_norm", "rms_norm", "pre_norm", "post_norm"; parse throws Error for others.
std::string growth_mode_name(GrowthMode mode);
GrowthMode parse_growth_mode(const std::string& name);

struct ActivationGrowthParams {
  int tokens = 8;      // rows, in [1, 256]
  int width = 64;      // d, in [2, 512]
  int layers = 24;     // in [1, 200]
  double gain = 1.4;   // init scale: W ~ N(0, gain / sqrt(width)), in [0, 10]
  double eps = 1e-5;   // the norms' eps, in [0, 1]
  uint64_t seed = 42;  // numpy_random::Generator: the input first, then one W per layer
  std::vector<GrowthMode> modes{GrowthMode::none, GrowthMode::layer_norm, GrowthMode::rms_norm,
                                GrowthMode::pre_norm, GrowthMode::post_norm};  // 1 to 5, distinct
  // The spread beside the single draw: the same run from seeds seed + 1 .. seed + spread_seeds,
  // in [0, 64] (0: none). Each costs as much as the run itself.
  int spread_seeds = 8;
};
// Caps that keep the largest run in tens of milliseconds: width^2 * layers (weights drawn) and
// tokens * width^2 * layers * modes (multiply-adds).
inline constexpr int64_t kActivationGrowthMaxWeights = int64_t{1} << 19;
inline constexpr int64_t kActivationGrowthMaxWork = int64_t{1} << 24;

struct GrowthCurve {
  GrowthMode mode = GrowthMode::none;
  // Index 0 is the input, index i the output of layer i (layers + 1 values each).
  std::vector<double> mean;
  std::vector<double> std;
  int first_layer_past_100 = 0;  // the first layer whose std exceeds 100 (0 if none)
  bool overflowed = false;       // some activation became Inf or NaN in float32
  // Per layer (same indices as std): the std's median and interquartile range over the spread
  // seeds (empty without them).
  std::vector<Spread> std_spread;
};

struct ActivationGrowthResult {
  ActivationGrowthParams params;
  std::vector<GrowthCurve> curves;  // in the order of params.modes
};

void validate(const ActivationGrowthParams& params);
ActivationGrowthResult run_activation_growth(const ActivationGrowthParams& params);

nlohmann::json to_json(const ActivationGrowthParams& params);
nlohmann::json to_json(const ActivationGrowthResult& result);
std::string to_csv(const ActivationGrowthResult& result);  // mode,layer,mean,std
ActivationGrowthParams activation_growth_params_from_json(const nlohmann::json& object);

}  // namespace addnorm::lab
