// `addnorm lab-run rank-collapse`: the relative residual and token cosine after every block of
// attention-only stacks, one table per placement (Dong et al. 2021).

#include "addnorm/lab/rank_collapse.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_experiment_command.hpp"
#include "cli/lab_render.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::cli {
namespace {

std::string render(const lab::RankCollapseResult& result) {
  const lab::RankCollapseParams& p = result.params;
  std::string text =
      "rank-collapse: " + std::to_string(p.depth) + " blocks of " +
      lab::sublayers_name(p.shape.sublayers) + ", d_model " + std::to_string(p.shape.d_model) +
      ", " + std::to_string(p.shape.n_heads) + " heads, Xavier init; input " +
      std::to_string(p.batch) + " sequences of " + std::to_string(p.tokens) +
      " tokens ~ N(0, 1); medians [interquartile range] over " + std::to_string(p.seeds) +
      " seed(s)\nresidual = ||X - 1 mean(X)^T|| / ||X|| per sequence (0: every token the same); "
      "cosine = mean cosine between a sequence's tokens (1: collapsed)\n";
  for (const lab::RankCollapseCurve& curve : result.curves) {
    text += "\n" + std::string(nn::placement_name(curve.placement)) + "\n";
    TextTable table({"block", "residual", "|(log scale, 1e-12 .. 1)", "cosine"});
    for (size_t index : sampled_rows(curve.residual.size(), 16)) {
      table.add({index == 0 ? std::string("input") : std::to_string(index),
                 spread_text(curve.residual[index]),
                 log_scale_bar(curve.residual[index].median, 1e-12, 1.0, 24),
                 spread_text(curve.cosine[index])});
    }
    text += table.render();
  }
  text +=
      "\nsummary: the last block's medians, and the first block whose median residual is "
      "below 1e-3\n";
  TextTable summary({"placement", "residual", "cosine", "collapsed at block"});
  for (const lab::RankCollapseCurve& curve : result.curves) {
    summary.add(
        {nn::placement_name(curve.placement), spread_text(curve.residual.back()),
         spread_text(curve.cosine.back()),
         curve.collapsed_at == 0 ? std::string("never") : std::to_string(curve.collapsed_at)});
  }
  text += summary.render();
  return text;
}

}  // namespace

void add_lab_rank_collapse_command(CLI::App& lab_run) {
  add_experiment_command<lab::RankCollapseParams>(
      lab_run, "rank-collapse",
      "Token similarity through attention-only stacks, with and without skips and norms "
      "(Dong et al. 2021)",
      lab::kRankCollapseFields, lab::rank_collapse_quick, "A small run that finishes in a second",
      [](const lab::RankCollapseParams& p, const lab::Progress& progress) {
        return lab::run_rank_collapse(p, progress);
      },
      render);
}

}  // namespace addnorm::cli
