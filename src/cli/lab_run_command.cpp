// `addnorm lab-run NAME`: the lab's experiments from the command line (docs/lab.md explains
// each). Every experiment prints a terminal view by default, --json or --csv on request.
#include "cli/commands.hpp"
#include "cli/lab_commands.hpp"

namespace addnorm::cli {

void add_lab_run_command(CLI::App& app) {
  CLI::App* lab_run = app.add_subcommand(
      "lab-run", "Run one of the lab's experiments (docs/lab.md): text, --json or --csv");
  lab_run->require_subcommand(1);
  add_lab_gradient_flow_command(*lab_run);
  add_lab_activation_growth_command(*lab_run);
  add_lab_norm_steps_command(*lab_run);
  add_lab_batch_vs_layer_command(*lab_run);
  add_lab_init_gradients_command(*lab_run);
  add_lab_depth_training_command(*lab_run);
  add_lab_update_size_command(*lab_run);
  add_lab_rank_collapse_command(*lab_run);
  add_lab_trainability_map_command(*lab_run);
}

}  // namespace addnorm::cli
