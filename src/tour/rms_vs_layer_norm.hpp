// Section "rmsnorm": RMSNorm beside LayerNorm on the same tokens, with the page's class defaults
// (eps = 1e-6, gamma ones, beta zeros).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace addnorm::tour {

struct RmsVsLayerNormToken {
  std::string name;
  std::vector<double> token;
  double rms = 0.0;                // sqrt(mean(x^2) + eps), 1 / rms_norm's rstd
  std::vector<double> rms_norm;    // addnorm::rms_norm
  std::vector<double> layer_norm;  // addnorm::layer_norm
  double rms_norm_mean = 0.0;      // the offset RMSNorm keeps
  double rms_norm_rms = 0.0;       // sqrt(mean(y^2)): 1 up to eps
  double layer_norm_mean = 0.0;
  double layer_norm_std = 0.0;
};

struct RmsVsLayerNorm {
  double eps = 0.0;
  std::vector<RmsVsLayerNormToken> tokens;  // "cat", then page 001's token after layer 5
};

RmsVsLayerNorm rms_vs_layer_norm();
std::string rms_text(const RmsVsLayerNorm& comparison);
nlohmann::json rms_json(const RmsVsLayerNorm& comparison);

}  // namespace addnorm::tour
