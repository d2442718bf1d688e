// `addnorm lab-run activation-growth`: mean and std per layer for each placement of the norm,
// with the page widget's log-scale bars (10 characters at std 1, 10 more per factor of 10).
#include <algorithm>
#include <cmath>
#include <memory>

#include "addnorm/lab/activation_growth.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_param_options.hpp"
#include "cli/lab_render.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::cli {
namespace {

struct Options {
  std::unique_ptr<ParamOptions<lab::ActivationGrowthParams>> params;
  OutputOptions output;
  bool quick = false;
};

// The page's scale: 10 characters at std 1, 10 more per decade, at least 1, at most 60.
std::string std_bar(double std_value) {
  if (!std::isfinite(std_value)) return "(inf/nan)";
  const double length = 10.0 * (1.0 + std::log10(std::max(std_value, 1e-30)));
  return std::string(static_cast<size_t>(std::clamp(std::round(length), 1.0, 60.0)), '#');
}

std::string describe(lab::GrowthMode mode) {
  switch (mode) {
    case lab::GrowthMode::none:
      return "no normalization: x <- F(x)";
    case lab::GrowthMode::layer_norm:
      return "LayerNorm after every layer: x <- LN(F(x))";
    case lab::GrowthMode::rms_norm:
      return "RMSNorm after every layer: x <- RMSNorm(F(x))";
    case lab::GrowthMode::pre_norm:
      return "pre-norm (GPT-2): x <- x + F(LN(x))";
    case lab::GrowthMode::post_norm:
      return "post-norm (2017): x <- LN(x + F(x))";
  }
  return "";
}

std::string render(const lab::ActivationGrowthResult& result) {
  const lab::ActivationGrowthParams& p = result.params;
  std::string text = "activation-growth: " + std::to_string(p.tokens) +
                     " tokens x d = " + std::to_string(p.width) + ", " + std::to_string(p.layers) +
                     " linear layers F(x) = x W, W ~ N(0, " + general(p.gain, 6) + " / sqrt(" +
                     std::to_string(p.width) + ")), input N(0, 1), default_rng(" +
                     std::to_string(p.seed) + "), eps " + general(p.eps, 6) + "\n";
  text += "bars: 10 characters at std 1, 10 more per factor of 10\n";
  for (const lab::GrowthCurve& curve : result.curves) {
    text += "\n" + lab::growth_mode_name(curve.mode) + " - " + describe(curve.mode) + "\n";
    TextTable table({"layer", "mean", "std", "|"});
    for (size_t layer : sampled_rows(curve.std.size())) {
      table.add({std::to_string(layer), general(curve.mean[layer], 3), general(curve.std[layer], 4),
                 std_bar(curve.std[layer])});
    }
    text += table.render();
  }
  text += "\nsummary\n";
  TextTable summary({"mode", "std at the last layer",
                     "other seeds (" + std::to_string(p.spread_seeds) + "): median [IQR]",
                     "first layer past std 100", "overflow"});
  for (const lab::GrowthCurve& curve : result.curves) {
    summary.add(
        {lab::growth_mode_name(curve.mode), general(curve.std.back(), 4),
         curve.std_spread.empty() ? std::string("-") : spread_text(curve.std_spread.back()),
         curve.first_layer_past_100 == 0 ? "never" : std::to_string(curve.first_layer_past_100),
         curve.overflowed ? "yes (float32 Inf/NaN)" : "no"});
  }
  text += summary.render();
  return text;
}

}  // namespace

void add_lab_activation_growth_command(CLI::App& lab_run) {
  CLI::App* command = lab_run.add_subcommand(
      "activation-growth",
      "Per-layer mean and std through a random linear stack with the norm placed five ways");
  auto options = std::make_shared<Options>();
  options->params = std::make_unique<ParamOptions<lab::ActivationGrowthParams>>(
      *command, lab::kActivationGrowthFields, lab::ActivationGrowthParams{});
  command->add_flag("--quick", options->quick,
                    "Accepted for uniformity: this runs in milliseconds");
  add_output_options(*command, options->output);
  command->callback([options] {
    lab::ActivationGrowthParams params;
    options->params->apply(params);
    const lab::ActivationGrowthResult result = lab::run_activation_growth(params);
    print_result(options->output, lab::to_json(result), lab::to_csv(result), render(result));
  });
}

}  // namespace addnorm::cli
