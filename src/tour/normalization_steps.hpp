// Section "steps": page 001's four LayerNorm steps on a token after layer 5, [2, -3, 1, 4], with
// gamma = 2 and beta = 0.5; exact values beside the page's rounded hand arithmetic.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace addnorm::tour {

struct NormalizationSteps {
  std::vector<double> token;  // [2, -3, 1, 4]
  double gamma = 0.0;         // 2, the same for every feature
  double beta = 0.0;          // 0.5
  // addnorm::layer_norm with eps = 0, as the page's arithmetic has none.
  double mean = 0.0;               // the op's saved mean
  double variance = 0.0;           // float64, around that mean: 6.5
  double std = 0.0;                // 1 / the op's rstd: sqrt(6.5)
  std::vector<double> normalized;  // no gamma, no beta
  std::vector<double> output;      // gamma * normalized + beta
  // The same output with eps = 1e-5, to show how little eps moves it.
  double default_eps = 0.0;
  std::vector<double> output_default_eps;
  // The page's hand arithmetic: divide by std rounded to 2.55, round to 2 decimals.
  double page_std = 0.0;
  std::vector<double> page_normalized;
  std::vector<double> page_output;
};

NormalizationSteps normalization_steps();
std::string steps_text(const NormalizationSteps& steps);
nlohmann::json steps_json(const NormalizationSteps& steps);

}  // namespace addnorm::tour
