// `addnorm lab-run gradient-flow`: per-layer gradient norms of the page's linear stack, with
// and without residual connections, as log-scale bars.
#include <algorithm>
#include <memory>

#include "addnorm/lab/gradient_flow.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_param_options.hpp"
#include "cli/lab_render.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::cli {
namespace {

struct Options {
  std::unique_ptr<ParamOptions<lab::GradientFlowParams>> params;
  OutputOptions output;
  bool quick = false;
};

std::string render(const lab::GradientFlowResult& result) {
  const lab::GradientFlowParams& p = result.params;
  std::string text = "gradient-flow: " + std::to_string(p.width) +
                     "-wide linear layers, W ~ N(0, " + general(p.weight_std, 6) +
                     ") from default_rng(" + std::to_string(p.seed) + "), float64\n";
  text += "without residual y = W x; with residual y = " +
          (p.residual_scale == 1.0 ? std::string("x") : general(p.residual_scale, 6) + " x") +
          " + W x. The gradient arriving at the top is ones(d), size " +
          fixed_text(result.top_norm, 2) + ".\n";
  double low = 1e300, high = 0.0;
  for (const auto& stack : result.stacks) {
    for (const auto* curve : {&stack.without_residual, &stack.with_residual}) {
      for (double v : *curve) {
        if (v > 0.0 && std::isfinite(v)) low = std::min(low, v), high = std::max(high, v);
      }
    }
  }
  for (const auto& stack : result.stacks) {
    text += "\n" + std::to_string(stack.depth) +
            " layers (row k: the gradient after passing k layers down from the top; bars on a "
            "log scale from " +
            general(low, 2) + " to " + general(high, 2) + ")\n";
    TextTable table({"k", "without residual", "|", "with residual", "|"});
    for (size_t k : sampled_rows(stack.without_residual.size())) {
      table.add({std::to_string(k), general(stack.without_residual[k]),
                 log_scale_bar(stack.without_residual[k], low, high, 24),
                 general(stack.with_residual[k]),
                 log_scale_bar(stack.with_residual[k], low, high, 24)});
    }
    text += table.render();
  }
  text += "\n";
  for (const auto& stack : result.stacks) {
    text += std::to_string(stack.depth) + " layers: gradient size without residual " +
            scientific_text(stack.without_residual.back(), 2) + ", with residual " +
            general(stack.with_residual.back()) +
            "  (theory, root mean square: " + general(stack.expected_without_residual.back()) +
            " and " + general(stack.expected_with_residual.back()) + ")\n";
    if (!stack.spread_without_residual.empty()) {
      text += "    over " + std::to_string(p.spread_seeds) + " other seeds (" +
              std::to_string(p.seed + 1) + ".." + std::to_string(p.seed + p.spread_seeds) +
              "), median [interquartile range]: without residual " +
              spread_text(stack.spread_without_residual.back()) + ", with residual " +
              spread_text(stack.spread_with_residual.back()) + "\n";
    }
  }
  text += "theory: each layer multiplies the expected squared size by weight_std^2 d = " +
          general(p.weight_std * p.weight_std * p.width) + " without the shortcut and by " +
          "lambda^2 + weight_std^2 d = " +
          general(p.residual_scale * p.residual_scale + p.weight_std * p.weight_std * p.width) +
          " with it\n";
  return text;
}

}  // namespace

void add_lab_gradient_flow_command(CLI::App& lab_run) {
  CLI::App* command = lab_run.add_subcommand(
      "gradient-flow",
      "Per-layer gradient norm of the page's linear stack, with and without residuals");
  auto options = std::make_shared<Options>();
  options->params = std::make_unique<ParamOptions<lab::GradientFlowParams>>(
      *command, lab::kGradientFlowFields, lab::GradientFlowParams{});
  command->add_flag("--quick", options->quick,
                    "Accepted for uniformity: this runs in milliseconds");
  add_output_options(*command, options->output);
  command->callback([options] {
    lab::GradientFlowParams params;
    options->params->apply(params);
    const lab::GradientFlowResult result = lab::run_gradient_flow(params);
    print_result(options->output, lab::to_json(result), lab::to_csv(result), render(result));
  });
}

}  // namespace addnorm::cli
