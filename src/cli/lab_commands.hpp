// The experiments under `addnorm lab-run NAME`, one subcommand each (src/cli/lab_*_command.cpp).
// Each binds its options to the experiment's Params, runs the lab function and prints text,
// JSON or CSV.
#pragma once

#include <CLI/CLI.hpp>

namespace addnorm::cli {

void add_lab_gradient_flow_command(CLI::App& lab_run);
void add_lab_activation_growth_command(CLI::App& lab_run);
void add_lab_norm_steps_command(CLI::App& lab_run);
void add_lab_batch_vs_layer_command(CLI::App& lab_run);
void add_lab_init_gradients_command(CLI::App& lab_run);
void add_lab_depth_training_command(CLI::App& lab_run);
void add_lab_update_size_command(CLI::App& lab_run);
void add_lab_rank_collapse_command(CLI::App& lab_run);
void add_lab_trainability_map_command(CLI::App& lab_run);

}  // namespace addnorm::cli
