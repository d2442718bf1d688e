// `addnorm lab-run batch-vs-layer`: batch norm against layer norm on a table and on padded
// batches of sentences, as tables of what changes (batch norm) and what does not (layer norm).
#include <algorithm>
#include <cmath>
#include <memory>

#include "addnorm/lab/batch_vs_layer.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_param_options.hpp"
#include "cli/lab_render.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::cli {
namespace {

struct Options {
  std::unique_ptr<ParamOptions<lab::BatchVsLayerParams>> params;
  OutputOptions output;
  bool quick = false;
};

std::string matrix_text(const std::vector<double>& values, int rows, int columns) {
  TextTable table([&] {
    std::vector<std::string> header{"row"};
    for (int c = 0; c < columns; ++c) header.push_back("col " + std::to_string(c));
    return header;
  }());
  for (int r = 0; r < rows; ++r) {
    std::vector<std::string> row{std::to_string(r)};
    for (int c = 0; c < columns; ++c) row.push_back(fixed_text(values[r * columns + c], 4));
    table.add(row);
  }
  return table.render("    ");
}

std::string render(const lab::BatchVsLayerResult& result) {
  const lab::BatchVsLayerParams& p = result.params;
  const lab::TableNorms& t = result.table;
  std::string text =
      "batch-vs-layer: addnorm::batch_norm (per feature, over the batch) vs "
      "addnorm::layer_norm (per row, over its features)\n";
  text += "\n1. the table (" + std::to_string(t.rows) + " rows x " + std::to_string(t.columns) +
          " columns), eps 0\n";
  text +=
      "  batch norm, each column over the rows:\n" + matrix_text(t.batch_norm, t.rows, t.columns);
  text +=
      "  layer norm, each row over its columns:\n" + matrix_text(t.layer_norm, t.rows, t.columns);
  double largest_ln_change = 0.0;
  for (size_t c = 0; c < t.layer_norm_row0_alone.size(); ++c) {
    largest_ln_change =
        std::max(largest_ln_change, std::fabs(t.layer_norm_row0_alone[c] - t.layer_norm[c]));
  }
  text += "  row 0 on its own: layer norm changes by " + general(largest_ln_change) +
          "; batch norm refuses it: \"" + t.batch_norm_row0_alone_error + "\"\n";

  const lab::PaddingLeak& pad = result.padding;
  text += "\n2. padding leaks into batch statistics: " + std::to_string(pad.sentences) +
          " sentences of lengths";
  for (int length : p.lengths) text += " " + std::to_string(length);
  text += ", padded with zeros to " + std::to_string(pad.padded_length) + " (" +
          std::to_string(pad.padded_tokens - pad.real_tokens) + " of " +
          std::to_string(pad.padded_tokens) +
          " positions are padding), d = " + std::to_string(p.width) + "\n";
  TextTable features({"feature", "mean, real tokens", "mean, with padding", "std, real tokens",
                      "std, with padding"});
  for (size_t c = 0; c < pad.mean_real_only.size(); ++c) {
    features.add({std::to_string(c), general(pad.mean_real_only[c], 4),
                  general(pad.mean_with_padding[c], 4), general(pad.std_real_only[c], 4),
                  general(pad.std_with_padding[c], 4)});
  }
  text += features.render();
  text += "  sentence 0's batch-norm output moves by up to " + general(pad.sentence0_output_shift) +
          " when the padding is counted\n";

  text += "\n3. sentence 0 (length " + std::to_string(p.lengths[0]) +
          ") in different batches: max |output - output alone|\n";
  TextTable sizes(
      {"batch", "padded to", "batch norm (padded)", "batch norm (real tokens)", "layer norm"});
  for (const lab::BatchEffect& e : result.batch_sizes) {
    sizes.add({"first " + std::to_string(e.batch_size), std::to_string(e.padded_length),
               general(e.batch_norm_padded), general(e.batch_norm_real), general(e.layer_norm)});
  }
  for (const lab::BatchEffect& e : result.mates) {
    sizes.add({"0 and " + std::to_string(e.mate) + " (len " + std::to_string(e.mate_length) + ")",
               std::to_string(e.padded_length), general(e.batch_norm_padded),
               general(e.batch_norm_real), general(e.layer_norm)});
  }
  text += sizes.render();

  const lab::ModeGap& gap = result.modes;
  text += "\n4. training vs inference: running statistics from " +
          std::to_string(p.running_batches) + " training batches (momentum " + general(p.momentum) +
          "), then sentence 0 in inference mode\n";
  text += "  batch norm: max |training-mode output - inference-mode output| = " +
          general(gap.batch_norm_in_batch) + " (trained in the full batch), " +
          general(gap.batch_norm_alone) + " (sentence 0 alone in training mode)\n";
  text += "  layer norm: " + general(gap.layer_norm) + " (no batch statistics, no modes)\n";
  return text;
}

}  // namespace

void add_lab_batch_vs_layer_command(CLI::App& lab_run) {
  CLI::App* command = lab_run.add_subcommand(
      "batch-vs-layer",
      "Batch norm vs layer norm on a table and on padded batches of variable-length sentences");
  auto options = std::make_shared<Options>();
  options->params = std::make_unique<ParamOptions<lab::BatchVsLayerParams>>(
      *command, lab::kBatchVsLayerFields, lab::BatchVsLayerParams{});
  command->add_flag("--quick", options->quick,
                    "Accepted for uniformity: this runs in milliseconds");
  add_output_options(*command, options->output);
  command->callback([options] {
    lab::BatchVsLayerParams params;
    options->params->apply(params);
    const lab::BatchVsLayerResult result = lab::run_batch_vs_layer(params);
    print_result(options->output, lab::to_json(result), lab::to_csv(result), render(result));
  });
}

}  // namespace addnorm::cli
