// Section "cat": page 000's LayerNorm of the token "cat" = [2, 4, 6, 8], its four steps and the
// gamma/beta pair that undoes it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace addnorm::tour {

struct CatLayerNorm {
  std::vector<double> token;  // [2, 4, 6, 8]
  double eps = 0.0;           // 1e-5
  // Step 1 and the op's saved statistics (float32, widened).
  double mean = 0.0;
  double rstd = 0.0;
  // Step 2, the population variance in float64 around the op's mean.
  double variance = 0.0;
  // Step 3's denominator, 1 / rstd.
  double std_with_eps = 0.0;
  std::vector<double> x_hat;            // layer_norm without gamma and beta
  std::vector<double> y;                // layer_norm with gamma = ones, beta = zeros
  double mean_of_y = 0.0;               // np.mean over y
  double variance_of_y = 0.0;           // np.var over y
  double variance_of_y_expected = 0.0;  // var / (var + eps): why it is not 1
  // layer_norm again with gamma = sqrt(var + eps) and beta = mean.
  std::vector<double> round_trip;
};

CatLayerNorm cat_layer_norm();
// The page's five printed lines, then the explanation.
std::string cat_page_lines(const CatLayerNorm& cat);
std::string cat_text(const CatLayerNorm& cat);
nlohmann::json cat_json(const CatLayerNorm& cat);

}  // namespace addnorm::tour
