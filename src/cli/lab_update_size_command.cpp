// `addnorm lab-run update-size`: how far one Adam step moves a stack's output, per placement and
// depth (Liu et al. 2020; Wang et al. 2022).
#include <algorithm>

#include "addnorm/lab/update_size.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_experiment_command.hpp"
#include "cli/lab_render.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::cli {
namespace {

std::string render(const lab::UpdateSizeResult& result) {
  const lab::UpdateSizeParams& p = result.params;
  const bool adam = p.mode == lab::UpdateMode::adam;
  std::string text =
      std::string("update-size: RMS change of the stack's output after ") +
      (adam ? "one Adam step" : "a random perturbation of every weight (lr x N(0,1))") +
      ", relative to its RMS; d_model " + std::to_string(p.shape.d_model) + ", sub-layers " +
      lab::sublayers_name(p.shape.sublayers) + ", task " + lab::sequence_task_name(p.task) +
      "; median [interquartile range] over " + std::to_string(p.seeds) + " seed(s)\n";
  for (double lr : p.lrs) {
    text += "\nlr " + general(lr) + "\n";
    double high = 0.0;
    for (const auto& s : result.stacks) {
      if (s.lr == lr) high = std::max(high, s.output_change);
    }
    TextTable table(
        {"placement", "depth", "output change", "IQR", "|", "loss before", "loss after"});
    for (const auto& s : result.stacks) {
      if (s.lr != lr) continue;
      table.add({nn::placement_name(s.placement), std::to_string(s.depth), general(s.output_change),
                 general(s.output_change_spread.low) + "-" + general(s.output_change_spread.high),
                 linear_bar(s.output_change, high, 30), fixed_text(s.loss_before, 4),
                 fixed_text(s.loss_after, 4)});
    }
    text += table.render();
  }
  if (!result.orderings.empty()) {
    text += "\nsummary: seeds in which post_norm > pre_norm > deep_norm (output change)\n";
    TextTable summary({"lr", "depth", "ordering holds"});
    for (const auto& o : result.orderings) {
      summary.add({general(o.lr), std::to_string(o.depth),
                   std::to_string(o.holds) + "/" + std::to_string(o.seeds)});
    }
    text += summary.render();
  }
  text += "\nchange after each block (bottom to top), deepest stack, lr " + general(p.lrs.back()) +
          ", mean over seeds\n";
  for (const auto& s : result.stacks) {
    if (s.depth != *std::max_element(p.depths.begin(), p.depths.end()) || s.lr != p.lrs.back()) {
      continue;
    }
    text += "  " + std::string(nn::placement_name(s.placement)) + ":";
    for (size_t l : sampled_rows(s.layer_change.size(), 12)) {
      text += " " + std::to_string(l) + ":" + general(s.layer_change[l], 2);
    }
    text += "\n";
  }
  return text;
}

}  // namespace

void add_lab_update_size_command(CLI::App& lab_run) {
  add_experiment_command<lab::UpdateSizeParams>(
      lab_run, "update-size",
      "Output change after one optimiser step as depth grows, per placement (Liu et al. 2020)",
      lab::update_size_fields(), lab::update_size_quick, "A small run that finishes in seconds",
      [](const lab::UpdateSizeParams& p, const lab::Progress& progress) {
        return lab::run_update_size(p, progress);
      },
      render);
}

}  // namespace addnorm::cli
