// The gradient of page 000's stack, carried down layer by layer in float64 as the page does: the
// lab's gradient-flow experiment (src/lab/gradient_flow.cpp) at its defaults, whose weights come
// from addnorm's copy of NumPy's default_rng, so the numbers are the page's. One generator serves
// both runs, so the 24-layer weights follow the 6-layer ones.
#include "tour/gradient_flow.hpp"

#include "addnorm/lab/gradient_flow.hpp"
#include "tour/numpy_format.hpp"

namespace addnorm::tour {
namespace {

// "median [q25, q75]", each number as the page's line prints it (format(x, 2)).
std::string spread_line(const lab::Spread& spread, std::string (*format)(double, int)) {
  return format(spread.median, 2) + " [" + format(spread.low, 2) + ", " + format(spread.high, 2) +
         "]";
}

}  // namespace

GradientFlow gradient_flow() {
  // The lab's gradient-flow experiment at its defaults is the page's run.
  const lab::GradientFlowResult run = lab::run_gradient_flow(lab::GradientFlowParams{});
  GradientFlow flow;
  flow.dim = run.params.width;
  flow.seed = run.params.seed;
  flow.weight_std = run.params.weight_std;
  flow.top_norm = run.top_norm;
  for (const lab::GradientFlowStack& stack : run.stacks) {
    flow.runs.push_back({stack.depth, stack.without_residual.back(), stack.with_residual.back(),
                         stack.spread_without_residual.back(), stack.spread_with_residual.back()});
  }
  flow.spread_seeds = run.params.spread_seeds;
  return flow;
}

std::string gradient_page_lines(const GradientFlow& flow) {
  std::string text;
  for (const GradientFlowRun& run : flow.runs) {
    text += std::to_string(run.layers) + " layers: gradient size without residual " +
            scientific(run.without_residual, 2) + ", with residual " + fixed(run.with_residual, 2) +
            "\n";
  }
  return text;
}

std::string gradient_text(const GradientFlow& flow) {
  std::string text;
  text += "d = " + std::to_string(flow.dim) + ", weights W ~ N(0, " + python_repr(flow.weight_std) +
          ") from np.random.default_rng(" + std::to_string(flow.seed) +
          ") (one generator: the 24-layer weights follow the 6-layer ones), float64\n";
  text += "the gradient arriving at the top is ones(" + std::to_string(flow.dim) + "), size " +
          fixed(flow.top_norm, 2) + "\n\n";
  text += gradient_page_lines(flow);
  // Beside the page's single draw, not instead of it: how the same sizes spread over seeds.
  text += "the same over " + std::to_string(flow.spread_seeds) + " other seeds (" +
          std::to_string(flow.seed + 1) + ".." + std::to_string(flow.seed + flow.spread_seeds) +
          "), median [25th, 75th percentile]:\n";
  for (const GradientFlowRun& run : flow.runs) {
    text += "  " + std::to_string(run.layers) + " layers: without residual " +
            spread_line(run.spread_without_residual, scientific) + ", with residual " +
            spread_line(run.spread_with_residual, fixed) + "\n";
  }
  text += "\n";
  text +=
      "without residuals every factor is W and the product shrinks towards zero; with them "
      "every factor is I + W and the size stays near " +
      fixed(flow.top_norm, 2) + "\n";
  return text;
}

nlohmann::json gradient_json(const GradientFlow& flow) {
  nlohmann::json runs = nlohmann::json::array();
  for (const GradientFlowRun& run : flow.runs) {
    runs.push_back({{"layers", run.layers},
                    {"without_residual", run.without_residual},
                    {"with_residual", run.with_residual},
                    {"spread_without_residual", lab::to_json(run.spread_without_residual)},
                    {"spread_with_residual", lab::to_json(run.spread_with_residual)}});
  }
  return {{"dim", flow.dim},
          {"seed", flow.seed},
          {"weight_std", flow.weight_std},
          {"top_norm", flow.top_norm},
          {"spread_seeds", flow.spread_seeds},
          {"runs", runs}};
}

}  // namespace addnorm::tour
