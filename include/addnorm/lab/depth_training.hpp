// Experiment 6, depth-training: train transformer stacks (addnorm::nn) of several depths with
// each Add & Norm placement on a synthetic task that needs attention (copy, reverse or sort; see
// sequence_task.hpp), with and without a learning-rate warmup, for several seeds. The pages
// claim that pre-norm "trains very deep stacks more stably" than the 2017 post-norm; Xiong et
// al. 2020 add that post-norm needs the warmup. Per run this records the training loss every
// step, the loss and token accuracy on a held-out batch at the end, the first step at which the
// loss (mean of the last 10 steps) reaches a target, whether the run diverged, and the gradient
// norm of every block at regular steps.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/progress.hpp"
#include "addnorm/lab/seed_spread.hpp"
#include "addnorm/lab/sequence_task.hpp"
#include "addnorm/nn/adam.hpp"
#include "addnorm/nn/block.hpp"

namespace addnorm::lab {

struct DepthTrainingParams {
  std::vector<nn::Placement> placements{nn::Placement::post_norm, nn::Placement::pre_norm};
  std::vector<int> depths{2, 12};  // 1 to 8 depths, each in [1, 48]
  ModelShape shape{32, 4, 64};
  SequenceTask task = SequenceTask::reverse;
  int length = 6;    // symbols per sequence, [1, 32]
  int symbols = 8;   // [2, 100]
  int batch = 16;    // [1, 256]
  int steps = 300;   // optimiser steps per run, [1, 20000]
  double lr = 3e-3;  // the peak learning rate, (0, 1]
  // Schedules: false = constant lr from step 1; true = linear warmup to lr over warmup_steps,
  // then lr * sqrt(warmup_steps / step) (the 2017 paper's shape, scaled to peak at lr).
  std::vector<bool> warmups{false, true};
  int warmup_steps = 60;         // [1, steps]
  double clip_norm = 0.0;        // 0: no clipping; otherwise the global gradient norm's limit
  double dropout = 0.0;          // on each sub-layer's output while training, in [0, 1)
  double target_loss = 0.5;      // steps_to_target: first step whose 10-step mean loss is below
  int seeds = 4;                 // [1, 64]
  uint64_t seed = 0;             // run i uses seed + i for its weights and data
  int grad_history_points = 10;  // how many times per run the per-block gradient norms are kept
};
// steps * seeds * runs * blocks * batch * seq * d_model * (4 d_model + 2 d_ff + 2 seq): at most
inline constexpr double kDepthTrainingMaxWork = 2e13;
// That work for one run of `depth` blocks.
double training_run_work(const DepthTrainingParams& params, int depth);
// The 2017 paper's schedule, scaled to peak at `lr` at step `warmup_steps`.
nn::LrSchedule noam_schedule(double lr, int warmup_steps, int d_model);
DepthTrainingParams depth_training_quick();  // depths 1 and 4, 60 steps, two seeds

struct TrainingRun {
  nn::Placement placement = nn::Placement::post_norm;
  int depth = 0;
  bool warmup = false;
  uint64_t seed = 0;
  std::vector<double> loss;       // training loss at every step
  std::vector<double> grad_norm;  // global gradient norm (before clipping) at every step
  double eval_loss = 0.0;         // on a held-out batch after the last step
  double eval_accuracy = 0.0;     // fraction of answer tokens predicted right
  int steps_to_target = -1;       // -1: never reached
  bool diverged = false;          // a non-finite loss, or a loss above 3 x the first
  // grad_history_steps[k]: the step at which grad_history[k] (one value per block: the norm of
  // all the block's parameter gradients) was taken.
  std::vector<int> grad_history_steps;
  std::vector<std::vector<double>> grad_history;
  // The first held-out sequences as the trained model answers them (filled by evaluate()).
  struct Example {
    std::vector<int32_t> tokens;     // the input sequence
    std::vector<int32_t> targets;    // the answer asked at each position, -1 where none is
    std::vector<int32_t> predicted;  // the model's most likely token where an answer is asked
  };
  std::vector<Example> examples;
};

// One training run, one optimiser step at a time: run_depth_training drives every run to the
// end with it; the server (POST /api/train) drives all runs a step at a time and streams each
// step's loss. The same model, schedule, batches, divergence rule and held-out evaluation.
struct TrainingStep {
  double loss = 0.0;
  double grad_norm = 0.0;  // before clipping; NaN when no step was taken (a non-finite loss)
};
class TrainingSession {
 public:
  TrainingSession(const DepthTrainingParams& params, nn::Placement placement, int depth,
                  bool warmup, uint64_t seed);
  // With any schedule (the trainability map's linear warmups); params.lr, params.warmups and
  // params.warmup_steps are then unused. run().warmup is true for every schedule but constant.
  TrainingSession(const DepthTrainingParams& params, nn::Placement placement, int depth,
                  const nn::LrSchedule& schedule, uint64_t seed);
  ~TrainingSession();
  TrainingSession(TrainingSession&&) noexcept;
  TrainingSession& operator=(TrainingSession&&) noexcept;

  // True after params.steps steps, or once a loss was not finite (the run stops there).
  bool finished() const;
  // One step on a fresh batch. Throws Error when the run has finished.
  TrainingStep step();
  // The held-out loss and accuracy, filled into the run's record (call after the last step).
  const TrainingRun& evaluate();
  // The record so far: the losses, gradient norms and per-block gradient history.
  const TrainingRun& run() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Over the seeds of one (placement, depth, warmup): medians, with the spread beside them.
struct TrainingSummary {
  nn::Placement placement = nn::Placement::post_norm;
  int depth = 0;
  bool warmup = false;
  double final_loss = 0.0;  // median over seeds of the held-out loss (a diverged run counts high)
  double accuracy = 0.0;    // median over seeds of the held-out accuracy
  Spread final_loss_spread, accuracy_spread;
  int reached_target = 0;             // seeds that reached the target loss
  double mean_steps_to_target = 0.0;  // over those seeds (0 if none)
  int diverged = 0;                   // seeds that diverged
};

struct DepthTrainingResult {
  DepthTrainingParams params;
  double chance_loss = 0.0;                // ln(symbols): predicting uniformly
  std::vector<TrainingRun> runs;           // placements, depths, warmups, seeds (outer to inner)
  std::vector<TrainingSummary> summaries;  // placements, depths, warmups
};

void validate(const DepthTrainingParams& params);
DepthTrainingResult run_depth_training(const DepthTrainingParams& params,
                                       const Progress& progress = {});

nlohmann::json to_json(const DepthTrainingParams& params);
nlohmann::json to_json(const DepthTrainingResult& result);
// Loss curves: placement,depth,warmup,seed,step,loss,grad_norm
std::string to_csv(const DepthTrainingResult& result);
DepthTrainingParams depth_training_params_from_json(const nlohmann::json& object);

}  // namespace addnorm::lab
