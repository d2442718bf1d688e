// `addnorm lab-run rank-collapse`: the relative residual and token cosine after every block of
// attention-only stacks, one table per placement (Dong et al. 2021).
#include <memory>

#include "addnorm/lab/rank_collapse.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_param_options.hpp"
#include "cli/lab_render.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::cli {
namespace {

struct Options {
  std::unique_ptr<ParamOptions<lab::RankCollapseParams>> params;
  bool quick = false;
  OutputOptions output;
};

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
  CLI::App* command = lab_run.add_subcommand(
      "rank-collapse",
      "Token similarity through attention-only stacks, with and without skips and norms "
      "(Dong et al. 2021)");
  auto options = std::make_shared<Options>();
  options->params = std::make_unique<ParamOptions<lab::RankCollapseParams>>(
      *command, lab::kRankCollapseFields, lab::RankCollapseParams{});
  command->add_flag("--quick", options->quick, "A small run that finishes in a second");
  add_output_options(*command, options->output);
  command->callback([options] {
    lab::RankCollapseParams params =
        options->quick ? lab::rank_collapse_quick() : lab::RankCollapseParams{};
    options->params->apply(params);
    lab::validate(params);
    ProgressBar bar;
    const lab::RankCollapseResult result = lab::run_rank_collapse(params, bar.progress());
    bar.finish();
    print_result(options->output, lab::to_json(result), lab::to_csv(result), render(result));
  });
}

}  // namespace addnorm::cli
