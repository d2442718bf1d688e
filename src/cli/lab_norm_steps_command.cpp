// `addnorm lab-run norm-steps`: the four steps of LayerNorm or RMSNorm on one vector, each with
// its values as bars and its mean and std, like page 001's step-through widget.
#include <algorithm>
#include <cmath>
#include <memory>

#include "addnorm/lab/norm_steps.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_param_options.hpp"
#include "cli/lab_render.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::cli {
namespace {

struct Options {
  std::string preset = "page";
  std::unique_ptr<ParamOptions<lab::NormStepsParams>> params;  // typed ones replace the preset's
  OutputOptions output;
  bool quick = false;
};

// A bar centred on a '|' at zero: negative values grow left, positive ones right.
std::string signed_bar(double value, double max, int half_width = 16) {
  const int length =
      static_cast<int>(std::lround(std::clamp(std::fabs(value) / max, 0.0, 1.0) * half_width));
  const std::string left(static_cast<size_t>(half_width - (value < 0 ? length : 0)), ' ');
  const std::string filled(static_cast<size_t>(length), '#');
  return value < 0 ? left + filled + "|"
                   : std::string(static_cast<size_t>(half_width), ' ') + "|" + filled;
}

std::string render(const lab::NormStepsResult& result) {
  const lab::NormStepsParams& p = result.params;
  const bool layer = norm_traits(p.norm).centres;
  std::string text = std::string("norm-steps: ") + (layer ? "LayerNorm" : "RMSNorm") + " of a " +
                     std::to_string(p.x.size()) + "-value vector, eps " + general(p.eps, 6) +
                     ", float32 through addnorm::" + norm_traits(p.norm).name + "\n";
  double max = 0.0;
  for (const lab::NormStep& step : result.steps) {
    for (double v : step.values) max = std::max(max, std::fabs(v));
  }
  const size_t shown = std::min<size_t>(p.x.size(), 16);
  int number = 1;
  for (const lab::NormStep& step : result.steps) {
    text += "\n" + std::to_string(number++) + ". " + step.name;
    if (step.name == "centred") {
      text += layer ? ": x - mean, mean = " + general(result.op_mean, 6)
                    : ": skipped (RMSNorm does not subtract the mean)";
    } else if (step.name == "normalised") {
      text += layer ? ": (x - mean) / sqrt(var + eps), sqrt(var + eps) = "
                    : ": x / sqrt(mean(x^2) + eps), sqrt(mean(x^2) + eps) = ";
      text += general(result.op_divisor, 6);
    } else if (step.name == "scaled and shifted") {
      text += layer ? ": gamma * normalised + beta" : ": gamma * normalised (RMSNorm has no beta)";
    }
    text += "\n";
    TextTable table({"i", "value", "|"});
    for (size_t i = 0; i < shown; ++i) {
      table.add({std::to_string(i), general(step.values[i], 4), signed_bar(step.values[i], max)});
    }
    text += table.render();
    if (shown < p.x.size()) text += "  ... (" + std::to_string(p.x.size() - shown) + " more)\n";
    text += "  mu = " + general(step.mean + 0.0, 4) + "   sigma = " + general(step.std, 6) +
            "   rms = " + general(step.rms, 6) + "\n";
  }
  if (!result.undone.empty()) {
    text += "\ngamma = sqrt(var + eps) and beta = mean give back the input: [";
    for (size_t i = 0; i < std::min<size_t>(result.undone.size(), 16); ++i) {
      text += (i > 0 ? ", " : "") + general(result.undone[i], 6);
    }
    text += result.undone.size() > 16 ? ", ...]\n" : "]\n";
  }
  return text;
}

}  // namespace

void add_lab_norm_steps_command(CLI::App& lab_run) {
  CLI::App* command = lab_run.add_subcommand(
      "norm-steps", "The four steps of LayerNorm or RMSNorm on one vector, with mu and sigma");
  auto options = std::make_shared<Options>();
  command
      ->add_option("--preset", options->preset,
                   "page: [2, -3, 1, 4], gamma 2, beta 0.5, eps 0; cat: [2, 4, 6, 8], "
                   "gamma 1, beta 0, eps 1e-5")
      ->capture_default_str();
  options->params = std::make_unique<ParamOptions<lab::NormStepsParams>>(
      *command, lab::kNormStepsFields, lab::norm_steps_preset("page"));
  command->add_flag("--quick", options->quick,
                    "Accepted for uniformity: this runs in microseconds");
  add_output_options(*command, options->output);
  command->callback([options] {
    lab::NormStepsParams params = lab::norm_steps_preset(options->preset);
    options->params->apply(params);
    const lab::NormStepsResult result = lab::run_norm_steps(params);
    print_result(options->output, lab::to_json(result), lab::to_csv(result), render(result));
  });
}

}  // namespace addnorm::cli
