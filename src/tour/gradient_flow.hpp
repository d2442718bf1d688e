// Section "gradient": page 000's measurement of the gradient that reaches the bottom of a stack
// of linear layers, without and with residual connections.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/seed_spread.hpp"

namespace addnorm::tour {

struct GradientFlowRun {
  int layers = 0;
  double without_residual = 0.0;  // |W1^T ... Wn^T g_top|
  double with_residual = 0.0;     // |(I + W1)^T ... (I + Wn)^T g_top|
  // The same sizes over the other seeds (seed + 1 .. seed + spread_seeds), beside the page's.
  lab::Spread spread_without_residual, spread_with_residual;
};

struct GradientFlow {
  int dim = 0;                        // d = 8
  uint64_t seed = 0;                  // np.random.default_rng(42)
  double weight_std = 0.0;            // W ~ N(0, 0.1)
  double top_norm = 0.0;              // |ones(d)| = 2.83
  std::vector<GradientFlowRun> runs;  // 6 then 24 layers, drawn from one generator
  int spread_seeds = 0;               // the lab's default: how many other seeds the spread has
};

GradientFlow gradient_flow();
// The page's printed lines: "6 layers: gradient size without residual 8.62e-04, ...".
std::string gradient_page_lines(const GradientFlow& flow);
std::string gradient_text(const GradientFlow& flow);
nlohmann::json gradient_json(const GradientFlow& flow);

}  // namespace addnorm::tour
