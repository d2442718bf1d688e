// Experiment 7, update-size: how much one optimiser step changes a stack's output, as depth
// grows, per placement. Liu et al. 2020 ("Understanding the Difficulty of Training
// Transformers") trace post-norm's instability to this amplification: a post-norm stack's output
// moves by an amount that grows with depth after an update of fixed size, while pre-norm's grows
// slowly; Wang et al. 2022 (DeepNet) choose DeepNorm's alpha and beta so that the update of the
// output stays bounded whatever the depth.
//
// Per (placement, depth, seed): build the model (addnorm::nn), embed a batch of the task once
// (the stack's input x is then held fixed), record the stack's output and every block's output,
// change the weights, and run the same x through the stack again. The change is reported as
// RMS(after - before) / RMS(before), at the output and after every block. Two kinds of change:
//   adam          one Adam step on that batch's loss (its first step moves every weight by about
//                 lr, whatever the gradient's scale): the update Liu et al. analyse;
//   perturbation  every stack weight plus lr times a standard normal draw: a random direction of
//                 about the same size, so the amplification of the architecture alone shows.
// Each learning rate in `lrs` starts from the same weights (the gradient is computed once), so
// the sweep shows where the change saturates: at lr 1e-3 a normalised output has moved by
// about its own size and the depth ordering is lost; at 1e-5 it holds.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/progress.hpp"
#include "addnorm/lab/seed_spread.hpp"
#include "addnorm/lab/sequence_task.hpp"
#include "addnorm/nn/block.hpp"

namespace addnorm::lab {

enum class UpdateMode { adam, perturbation };
std::string update_mode_name(UpdateMode mode);  // "adam", "perturbation"
UpdateMode parse_update_mode(const std::string& name);

struct UpdateSizeParams {
  std::vector<nn::Placement> placements{nn::Placement::post_norm, nn::Placement::pre_norm,
                                        nn::Placement::deep_norm};
  std::vector<int> depths{6, 12, 24, 48};  // 1 to 8 depths, each in [1, 96]
  ModelShape shape{32, 4, 128};
  SequenceTask task = SequenceTask::copy;
  int length = 8;
  int symbols = 10;
  int batch = 8;
  std::vector<double> lrs{1e-5, 1e-3};  // step sizes, 1 to 8, each in (0, 1]
  UpdateMode mode = UpdateMode::adam;
  int seeds = 64;  // [1, 64]
  uint64_t seed = 0;
};
// The same measure as init-gradients; the default run (3 placements, 64 seeds) needs 5.24e10.
inline constexpr double kUpdateSizeMaxWork = 6e10;
UpdateSizeParams update_size_quick();  // depths 6 and 12, d_model 32, four seeds

struct UpdateSizeStack {
  nn::Placement placement = nn::Placement::post_norm;
  int depth = 0;
  double lr = 0.0;
  // RMS(out' - out) / RMS(out) at the stack's output: the median over seeds, its spread, and
  // the per-seed values in seed order.
  double output_change = 0.0;
  Spread output_change_spread;
  std::vector<double> output_change_per_seed;
  double absolute_output_change = 0;           // RMS(out' - out), median over seeds
  double loss_before = 0.0, loss_after = 0.0;  // on the batch the step was taken on, means
  std::vector<double> layer_change;            // the ratio after each block, bottom to top; means
};

// For each lr and depth run with post_norm, pre_norm and deep_norm: in how many seeds the
// output change orders post > pre > deep (each seed's three stacks share its batch).
struct UpdateOrdering {
  double lr = 0.0;
  int depth = 0;
  int holds = 0;
  int seeds = 0;
};

struct UpdateSizeResult {
  UpdateSizeParams params;
  std::vector<UpdateSizeStack> stacks;  // placements outer, then depths, then lrs
  std::vector<UpdateOrdering> orderings;
};

void validate(const UpdateSizeParams& params);
UpdateSizeResult run_update_size(const UpdateSizeParams& params, const Progress& progress = {});

nlohmann::json to_json(const UpdateSizeParams& params);
nlohmann::json to_json(const UpdateSizeResult& result);
std::string to_csv(const UpdateSizeResult& result);  // placement,depth,lr,layer,change
UpdateSizeParams update_size_params_from_json(const nlohmann::json& object);

}  // namespace addnorm::lab
