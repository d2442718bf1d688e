// Section "residual": the residual connection's worked example, [1.0, 2.0] + [0.1, 0.3].
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace addnorm::tour {

struct ResidualExample {
  std::vector<double> input;          // x = [1.0, 2.0]
  std::vector<double> layer_output;   // f(x) = [0.1, 0.3]
  std::vector<double> with_residual;  // x + f(x) from addnorm::add, float32 widened
};

ResidualExample residual_example();
std::string residual_text(const ResidualExample& example);
nlohmann::json residual_json(const ResidualExample& example);

}  // namespace addnorm::tour
