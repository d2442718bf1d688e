// `addnorm lab-run depth-training`: train stacks of several depths with each placement, with and
// without warmup; prints a summary table and loss curves as rows of bars.
#include <algorithm>
#include <cmath>

#include "addnorm/lab/depth_training.hpp"
#include "cli/exact_numbers.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_experiment_command.hpp"
#include "cli/lab_render.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::cli {
namespace {

std::string yes_no(bool value) {
  return value ? "warmup" : "constant";
}

// A loss curve sampled at 12 points, as a row of digits-free bar heights: " .:-=+*#%@".
std::string sparkline(const std::vector<double>& loss, double high) {
  static const char kLevels[] = " .:-=+*#%@";
  std::string line;
  for (size_t i : sampled_rows(loss.size(), 24)) {
    const double v = loss[i];
    if (!std::isfinite(v)) {
      line += '!';
      continue;
    }
    const int level = static_cast<int>(std::lround(std::clamp(v / high, 0.0, 1.0) * 9));
    line += kLevels[level];
  }
  return line;
}

std::string render(const lab::DepthTrainingResult& result) {
  const lab::DepthTrainingParams& p = result.params;
  std::string text =
      "depth-training: task " + lab::sequence_task_name(p.task) + " (" + std::to_string(p.length) +
      " symbols of " + std::to_string(p.symbols) + "), d_model " + std::to_string(p.shape.d_model) +
      ", " + std::to_string(p.steps) + " Adam steps of batch " + std::to_string(p.batch) +
      ", peak lr " + general(p.lr) + ", warmup " + std::to_string(p.warmup_steps) + " steps, " +
      std::to_string(p.seeds) + " seed(s), median [interquartile range]; chance loss ln(" +
      std::to_string(p.symbols) + ") = " + fixed_text(result.chance_loss, 3) + ", target " +
      general(p.target_loss) + "\n\n";
  TextTable summary({"placement", "depth", "schedule", "held-out loss", "accuracy",
                     "reached target", "mean steps", "diverged"});
  for (const auto& s : result.summaries) {
    summary.add({nn::placement_name(s.placement), std::to_string(s.depth), yes_no(s.warmup),
                 fixed_text(s.final_loss, 3) + " [" + fixed_text(s.final_loss_spread.low, 3) +
                     ", " + fixed_text(s.final_loss_spread.high, 3) + "]",
                 fixed_text(100.0 * s.accuracy, 1) + "% [" +
                     fixed_text(100.0 * s.accuracy_spread.low, 1) + ", " +
                     fixed_text(100.0 * s.accuracy_spread.high, 1) + "]",
                 std::to_string(s.reached_target) + "/" + std::to_string(p.seeds),
                 s.reached_target > 0 ? fixed_text(s.mean_steps_to_target, 0) : "-",
                 std::to_string(s.diverged) + "/" + std::to_string(p.seeds)});
  }
  text += summary.render();
  double high = 0.0;
  for (const auto& r : result.runs) {
    for (double v : r.loss) {
      if (std::isfinite(v)) high = std::max(high, v);
    }
  }
  text += "\ntraining loss over the run (left: step 1, right: the last step; ' ' is 0, '@' is " +
          fixed_text(high, 2) + ", '!' not finite)\n";
  TextTable curves({"placement", "depth", "schedule", "seed", "|loss"});
  for (const auto& r : result.runs) {
    curves.add({nn::placement_name(r.placement), std::to_string(r.depth), yes_no(r.warmup),
                std::to_string(r.seed), sparkline(r.loss, high)});
  }
  text += curves.render();
  text +=
      "\nper-block gradient norm at the last recorded step (first seed; block 0 is the bottom)\n";
  for (const auto& r : result.runs) {
    if (r.seed != p.seed || r.grad_history.empty()) continue;
    text += "  " + std::string(nn::placement_name(r.placement)) + ", depth " +
            std::to_string(r.depth) + ", " + yes_no(r.warmup) + ":";
    const std::vector<double>& last = r.grad_history.back();
    for (size_t l : sampled_rows(last.size(), 8)) text += " " + general(last[l], 2);
    text += "\n";
  }
  return text;
}

}  // namespace

void add_lab_depth_training_command(CLI::App& lab_run) {
  add_experiment_command<lab::DepthTrainingParams>(
      lab_run, "depth-training",
      "Train stacks of each placement and depth on copy/reverse/sort, with and without warmup",
      lab::depth_training_fields(), lab::depth_training_quick,
      "A small run that finishes in seconds",
      [](const lab::DepthTrainingParams& p, const lab::Progress& progress) {
        return lab::run_depth_training(p, progress);
      },
      render,
      [](lab::DepthTrainingParams& params, const ParamOptions<lab::DepthTrainingParams>& given) {
        // A warmup longer than a shortened run is cut to the run.
        if (!given.given("warmup_steps")) {
          params.warmup_steps = std::min(params.warmup_steps, params.steps);
        }
      });
}

}  // namespace addnorm::cli
