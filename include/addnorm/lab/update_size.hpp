// Experiment 7, update-size: how much one optimiser step changes a stack's output, as depth
// grows, per placement. Liu et al. 2020 ("Understanding the Difficulty of Training
// Transformers") trace post-norm's instability to this amplification: a post-norm stack's output
// moves by an amount that grows with depth after an update of fixed size, while pre-norm's grows
// slowly; Wang et al. 2022 (DeepNet) choose DeepNorm's alpha and beta so that the update of the
// output stays bounded whatever the depth.
//
// Per (placement, depth, seed): build the model (addnorm::nn), embed a batch of the task once
// (the stack's input x is then held fixed), record the stack's output and every block's output,
// take one Adam step (its first step moves every weight by about lr, whatever the gradient's
// scale) on that batch's loss, and run the same x through the stack again. The change is
// reported as RMS(after - before) / RMS(before), at the output and after every block.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/progress.hpp"
#include "addnorm/lab/sequence_task.hpp"
#include "addnorm/nn/block.hpp"

namespace addnorm::lab {

struct UpdateSizeParams {
  std::vector<nn::Placement> placements{nn::Placement::post_norm, nn::Placement::pre_norm,
                                        nn::Placement::deep_norm};
  std::vector<int> depths{6, 12, 24, 48};  // 1 to 8 depths, each in [1, 96]
  ModelShape shape{32, 4, 128};
  SequenceTask task = SequenceTask::copy;
  int length = 8;
  int symbols = 10;
  int batch = 8;
  double lr = 1e-3;  // Adam's step size, in (0, 1]
  int seeds = 2;     // [1, 16]
  uint64_t seed = 0;
};
inline constexpr double kUpdateSizeMaxWork = 5e10;  // the same measure as init-gradients
UpdateSizeParams update_size_quick();               // depths 6 and 12, d_model 32, one seed

struct UpdateSizeStack {
  nn::Placement placement = nn::Placement::post_norm;
  int depth = 0;
  double output_change = 0.0;                  // RMS(out' - out) / RMS(out) at the stack's output
  double absolute_output_change = 0;           // RMS(out' - out)
  double loss_before = 0.0, loss_after = 0.0;  // on the batch the step was taken on
  std::vector<double> layer_change;            // the same ratio after each block, bottom to top
};

struct UpdateSizeResult {
  UpdateSizeParams params;
  std::vector<UpdateSizeStack> stacks;  // placements outer, depths inner; means over seeds
};

void validate(const UpdateSizeParams& params);
UpdateSizeResult run_update_size(const UpdateSizeParams& params, const Progress& progress = {});

nlohmann::json to_json(const UpdateSizeParams& params);
nlohmann::json to_json(const UpdateSizeResult& result);
std::string to_csv(const UpdateSizeResult& result);  // placement,depth,layer,change
UpdateSizeParams update_size_params_from_json(const nlohmann::json& object);

}  // namespace addnorm::lab
