// `addnorm lab-run init-gradients`: per-block gradient norms at initialisation for post-norm
// and pre-norm stacks (Xiong et al. 2020), with log-scale bars per block.
#include <algorithm>

#include "addnorm/lab/init_gradients.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_experiment_command.hpp"
#include "cli/lab_render.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::cli {
namespace {

std::string render(const lab::InitGradientsResult& result) {
  const lab::InitGradientsParams& p = result.params;
  std::string text = "init-gradients: gradient norms at initialisation, d_model " +
                     std::to_string(p.shape.d_model) + ", " + std::to_string(p.shape.n_heads) +
                     " heads, d_ff " + std::to_string(p.shape.d_ff) + ", task " +
                     lab::sequence_task_name(p.task) + " (" + std::to_string(2 * p.length + 1) +
                     " tokens x batch " + std::to_string(p.batch) + "), sub-layers " +
                     lab::sublayers_name(p.shape.sublayers) + ", Xavier init; per-block columns " +
                     "are means of " + std::to_string(p.seeds) +
                     " seed(s), the summaries medians [interquartile range]\n";
  double low = 1e300, high = 0.0;
  for (const auto& s : result.stacks) {
    for (double v : s.ffn_grad_norm) {
      if (v > 0) low = std::min(low, v), high = std::max(high, v);
    }
    for (double v : s.attention_grad_norm) {
      if (v > 0) low = std::min(low, v), high = std::max(high, v);
    }
  }
  for (const auto& s : result.stacks) {
    text += "\n" + std::string(nn::placement_name(s.placement)) + ", " + std::to_string(s.depth) +
            " blocks (loss at init " + fixed_text(s.loss, 3) + "); block 0 is the bottom\n";
    TextTable table({"block", "attention |grad|", "FFN |grad|", "|FFN (log scale)", "stream norm",
                     "stream |grad|", "FFN norm in", "FFN norm out", "token cos"});
    for (size_t l : sampled_rows(s.ffn_grad_norm.size(), 16)) {
      const auto at = [l](const std::vector<double>& v) {
        return l < v.size() ? general(v[l]) : std::string("-");
      };
      table.add({std::to_string(l), general(s.attention_grad_norm[l]), general(s.ffn_grad_norm[l]),
                 log_scale_bar(s.ffn_grad_norm[l], low, high, 24), general(s.stream_norm[l + 1]),
                 general(s.stream_grad_norm[l]), at(s.ffn_norm_input), at(s.ffn_norm_output),
                 general(s.token_cosine[l + 1])});
    }
    text += table.render();
  }
  text +=
      "\nsummary over seeds, median [interquartile range]: the top block's FFN gradient, it over "
      "the bottom block's, the mean over blocks of the block's weight-gradient norm\n";
  TextTable summary(
      {"placement", "depth", "top FFN |grad|", "top / bottom", "mean |grad| per block"});
  for (const auto& s : result.stacks) {
    summary.add({nn::placement_name(s.placement), std::to_string(s.depth),
                 spread_text(s.top_ffn_grad), spread_text(s.top_to_bottom),
                 spread_text(s.mean_layer_grad)});
  }
  text += summary.render();
  if (!result.post_over_pre.empty()) {
    text += "\npost_norm / pre_norm: the top block's FFN gradient, per seed (same batch)\n";
    TextTable ratios({"depth", "post / pre"});
    for (const auto& r : result.post_over_pre) {
      ratios.add({std::to_string(r.depth), spread_text(r.post_over_pre)});
    }
    text += ratios.render();
  }
  return text;
}

}  // namespace

void add_lab_init_gradients_command(CLI::App& lab_run) {
  add_experiment_command<lab::InitGradientsParams>(
      lab_run, "init-gradients",
      "Per-block gradient norms at initialisation, post-norm vs pre-norm (Xiong et al. 2020)",
      lab::init_gradients_fields(), lab::init_gradients_quick,
      "A small run that finishes in seconds",
      [](const lab::InitGradientsParams& p, const lab::Progress& progress) {
        return lab::run_init_gradients(p, progress);
      },
      render);
}

}  // namespace addnorm::cli
