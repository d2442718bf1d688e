// Command-line options the transformer experiments (init-gradients, depth-training,
// update-size) share: placements, model shape, task and --quick.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/sequence_task.hpp"
#include "addnorm/nn/block.hpp"

namespace addnorm::cli {

// Values of the options; only those given on the command line replace the experiment's.
struct TransformerOptions {
  std::vector<std::string> placements;
  std::vector<int> depths;
  int d_model = 0, n_heads = 0, d_ff = 0;
  std::string task;
  std::string sublayers;
  bool quick = false;
};

inline void add_transformer_options(CLI::App& command, TransformerOptions& options,
                                    const std::string& depth_limits) {
  command
      .add_option("--placements", options.placements,
                  "Any of post_norm,pre_norm,no_norm,no_residual,deep_norm,rezero")
      ->delimiter(',');
  command.add_option("--depths", options.depths, "Stack depths, " + depth_limits)->delimiter(',');
  command.add_option("--d-model", options.d_model, "Model width, 4..512, a multiple of n_heads");
  command.add_option("--n-heads", options.n_heads, "Attention heads, 1..16");
  command.add_option("--d-ff", options.d_ff, "FFN hidden width, 1..2048");
  command.add_option("--task", options.task, "copy, reverse or sort");
  command.add_option("--sublayers", options.sublayers,
                     "attn_ffn (attention then FFN, the default) or ffn (FFN-only blocks)");
  command.add_flag("--quick", options.quick, "A small run that finishes in seconds");
}

// Applies the options that were given to the experiment's parameters.
template <class Params>
void apply_transformer_options(const CLI::App& command, const TransformerOptions& options,
                               Params& params) {
  if (!options.placements.empty()) {
    params.placements.clear();
    for (const std::string& name : options.placements) {
      params.placements.push_back(nn::parse_placement(name));
    }
  }
  if (command.count("--depths") > 0) params.depths = options.depths;
  if (command.count("--d-model") > 0) params.shape.d_model = options.d_model;
  if (command.count("--n-heads") > 0) params.shape.n_heads = options.n_heads;
  if (command.count("--d-ff") > 0) params.shape.d_ff = options.d_ff;
  if (!options.task.empty()) params.task = lab::parse_sequence_task(options.task);
  if (!options.sublayers.empty()) params.shape.sublayers = lab::parse_sublayers(options.sublayers);
}

}  // namespace addnorm::cli
