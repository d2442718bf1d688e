// `addnorm lab-run update-size`: how far one Adam step moves a stack's output, per placement and
// depth (Liu et al. 2020; Wang et al. 2022).
#include <algorithm>
#include <memory>

#include "addnorm/lab/update_size.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_render.hpp"
#include "cli/lab_transformer_options.hpp"

namespace addnorm::cli {
namespace {

struct Options {
  TransformerOptions model;
  int seeds = 0, batch = 0;
  double lr = 0.0;
  uint64_t seed = 0;
  OutputOptions output;
};

std::string render(const lab::UpdateSizeResult& result) {
  const lab::UpdateSizeParams& p = result.params;
  std::string text = "update-size: RMS change of the stack's output after one Adam step (lr " +
                     general(p.lr) + "), relative to its RMS; d_model " +
                     std::to_string(p.shape.d_model) + ", task " + lab::sequence_task_name(p.task) +
                     ", mean of " + std::to_string(p.seeds) + " seed(s)\n\n";
  double high = 0.0;
  for (const auto& s : result.stacks) high = std::max(high, s.output_change);
  TextTable table({"placement", "depth", "output change", "|", "loss before", "loss after"});
  for (const auto& s : result.stacks) {
    table.add({nn::placement_name(s.placement), std::to_string(s.depth), general(s.output_change),
               linear_bar(s.output_change, high, 30), fixed_text(s.loss_before, 4),
               fixed_text(s.loss_after, 4)});
  }
  text += table.render();
  text += "\nchange after each block (bottom to top) for the deepest stack of each placement\n";
  for (const auto& s : result.stacks) {
    if (s.depth != *std::max_element(p.depths.begin(), p.depths.end())) continue;
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
  CLI::App* command = lab_run.add_subcommand(
      "update-size",
      "Output change after one optimiser step as depth grows, per placement (Liu et al. 2020)");
  auto options = std::make_shared<Options>();
  add_transformer_options(*command, options->model, "1..96 each (default 6,12,24,48)");
  command->add_option("--lr", options->lr, "Adam's step size, (0, 1] (default 1e-3)");
  command->add_option("--seeds", options->seeds, "Models averaged, 1..16 (default 2)");
  command->add_option("--batch", options->batch, "Sequences per batch, 1..256 (default 8)");
  command->add_option("--seed", options->seed, "First seed (default 0)");
  add_output_options(*command, options->output);
  command->callback([options, command] {
    lab::UpdateSizeParams params =
        options->model.quick ? lab::update_size_quick() : lab::UpdateSizeParams{};
    apply_transformer_options(*command, options->model, params);
    if (command->count("--lr") > 0) params.lr = options->lr;
    if (command->count("--seeds") > 0) params.seeds = options->seeds;
    if (command->count("--batch") > 0) params.batch = options->batch;
    if (command->count("--seed") > 0) params.seed = options->seed;
    lab::validate(params);
    ProgressBar bar;
    const lab::UpdateSizeResult result = lab::run_update_size(params, bar.progress());
    bar.finish();
    print_result(options->output, lab::to_json(result), lab::to_csv(result), render(result));
  });
}

}  // namespace addnorm::cli
