// Experiment 3, norm-steps: the four steps of LayerNorm (or RMSNorm) on any vector, with mu and
// sigma after each step, as seed page 001's step-through widget shows them:
//   1 input  x
//   2 centred  x - mu               (RMSNorm skips this step: it never subtracts the mean)
//   3 normalised  (x - mu) / sqrt(var + eps)   or  x / sqrt(mean(x^2) + eps)
//   4 scaled and shifted  gamma * normalised + beta   (RMSNorm has no beta)
// Steps 3 and 4 are addnorm::layer_norm / addnorm::rms_norm in float32; the statistics of each
// step are float64 over the float32 values. Presets: "page" (page 001's [2, -3, 1, 4] with
// gamma 2, beta 0.5 and no eps, as its arithmetic) and "cat" (page 000's [2, 4, 6, 8], gamma 1,
// beta 0, eps 1e-5).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/norm_kind.hpp"

namespace addnorm::lab {

struct NormStepsParams {
  std::vector<double> x{2.0, -3.0, 1.0, 4.0};  // 1 to 4096 values, each in [-1e30, 1e30]
  std::vector<double> gamma{2.0};              // one value (for every feature) or one per feature
  std::vector<double> beta{0.5};               // the same; ignored (and reported so) for RMSNorm
  NormKind norm = NormKind::layer_norm;        // by the faces' names, "layer_norm" or "rms_norm"
  double eps = 0.0;                            // in [0, 1]
};
// "page" or "cat"; throws Error for another name.
NormStepsParams norm_steps_preset(const std::string& name);

struct NormStep {
  std::string name;            // "input", "centred", "normalised", "scaled and shifted"
  std::vector<double> values;  // what the step produced
  double mean = 0.0;           // mu of values
  double std = 0.0;            // sigma of values (population)
  double rms = 0.0;            // sqrt(mean(values^2))
};

struct NormStepsResult {
  NormStepsParams params;
  std::vector<double> gamma;  // per feature, as applied
  std::vector<double> beta;   // per feature, as applied (zeros for RMSNorm)
  bool beta_applied = true;   // false for RMSNorm
  // The op's own statistics: its mean (0 for RMSNorm) and the divisor 1 / rstd.
  double op_mean = 0.0;
  double op_divisor = 0.0;
  std::vector<NormStep> steps;  // the four steps, in order
  // Page 000's point: gamma = divisor and beta = mean give back the input (LayerNorm).
  std::vector<double> undone;
};

void validate(const NormStepsParams& params);
NormStepsResult run_norm_steps(const NormStepsParams& params);

nlohmann::json to_json(const NormStepsParams& params);
nlohmann::json to_json(const NormStepsResult& result);
std::string to_csv(const NormStepsResult& result);  // step,index,value
// Absent keys keep the "page" preset's values; {"preset": "cat"} starts from another preset.
NormStepsParams norm_steps_params_from_json(const nlohmann::json& object);

}  // namespace addnorm::lab
