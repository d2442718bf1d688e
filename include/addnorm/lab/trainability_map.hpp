// Experiment 9, trainability-map: which (depth, peak learning rate, schedule) cells each Add &
// Norm placement trains in. The warmup papers (Xiong et al. 2020, Liu et al. 2020) draw this as
// a heat map per placement: Post-LN fails without warmup beyond some depth and learning rate and
// trains with it; Pre-LN, DeepNorm and Admin train in more of the map. Every cell trains
// `seeds` models (depth-training's TrainingSession: the same model, task, Adam with beta2 0.98,
// held-out batch and divergence rule) and reports the held-out loss (median [IQR] over seeds)
// and how many seeds trained (held-out loss below target_loss, not diverged).
//
// Cells are independent and ordered placement, depth, lr, schedule (outer to inner); `cell`
// runs one of them alone with exactly the numbers the whole map gives it, which is how
// scripts/lab_map_dask.py spreads a map over a cluster.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/depth_training.hpp"
#include "addnorm/lab/progress.hpp"
#include "addnorm/lab/seed_spread.hpp"
#include "addnorm/lab/sequence_task.hpp"
#include "addnorm/nn/block.hpp"

namespace addnorm::lab {

// constant: lr from step 1; linear: lr * min(1, step / W); noam: the 2017 paper's
// inverse-square-root schedule peaking at lr at step W.
enum class MapSchedule { constant, linear, noam };
std::string map_schedule_name(MapSchedule schedule);  // "constant", "linear", "noam"
MapSchedule parse_map_schedule(const std::string& name);

struct TrainabilityMapParams {
  std::vector<nn::Placement> placements{nn::Placement::post_norm, nn::Placement::pre_norm,
                                        nn::Placement::deep_norm, nn::Placement::admin};
  std::vector<int> depths{2, 6};        // 1 to 6 depths, each in [1, 48]
  std::vector<double> lrs{3e-3, 1e-2};  // 1 to 6 peak rates in (0, 1]
  // 1 to 3, distinct; the documented map adds noam (the defaults keep a run within 60 s)
  std::vector<MapSchedule> schedules{MapSchedule::constant, MapSchedule::linear};
  std::vector<int> warmup_steps{50};  // 1 to 4 lengths in [1, steps]: a cell each for linear, noam
  ModelShape shape{32, 4, 64};
  SequenceTask task = SequenceTask::copy;
  int length = 6;            // symbols per sequence, [1, 32]
  int symbols = 8;           // [2, 100]
  int batch = 16;            // [1, 256]
  int steps = 300;           // Adam steps per run, [1, 20000]
  double target_loss = 0.5;  // a run trained: held-out loss below this, and not diverged
  int seeds = 2;             // [1, 64]
  uint64_t seed = 0;         // run i of a cell uses seed + i (weights and data)
  int cell = -1;             // -1: every cell; k >= 0: cell k only
};
// The work cap of depth-training: the sum over the runs of training_run_work.
inline constexpr double kTrainabilityMapMaxWork = 2e13;
// The parameters of --quick: 2 placements, depth 2, 3 schedules, 40 steps, 1 seed.
TrainabilityMapParams trainability_map_quick();

// One column of the map's schedule axis: a kind and its warmup length (0 for constant).
struct MapScheduleCell {
  MapSchedule kind = MapSchedule::constant;
  int warmup_steps = 0;
};
// constant once, then linear and noam once per warmup length, in params.schedules' order.
std::vector<MapScheduleCell> map_schedule_cells(const TrainabilityMapParams& params);
// placements x depths x lrs x schedule cells.
int map_cell_count(const TrainabilityMapParams& params);
// The depth of each cell, in cell order.
std::vector<int> map_cell_depths(const TrainabilityMapParams& params);
// depth-training's parameters of the map's runs (model, task, batch, steps): what one run
// trains, for its work and memory estimates.
DepthTrainingParams map_run_params(const TrainabilityMapParams& params);

struct MapCell {
  int index = 0;
  nn::Placement placement = nn::Placement::post_norm;
  int depth = 0;
  double lr = 0.0;
  MapScheduleCell schedule;
  Spread final_loss, accuracy;  // held-out, over seeds (a diverged run's loss counts high)
  int trained = 0, diverged = 0, seeds = 0;
  std::vector<double> final_loss_per_seed;
};

struct TrainabilityMapResult {
  TrainabilityMapParams params;
  double chance_loss = 0.0;  // ln(symbols)
  int cell_count = 0;        // of the whole map, also when params.cell picks one
  std::vector<MapCell> cells;
};

void validate(const TrainabilityMapParams& params);
TrainabilityMapResult run_trainability_map(const TrainabilityMapParams& params,
                                           const Progress& progress = {});

nlohmann::json to_json(const TrainabilityMapParams& params);
nlohmann::json to_json(const TrainabilityMapResult& result);
// cell,placement,depth,lr,schedule,warmup_steps,final_loss,q25,q75,accuracy,trained,diverged,seeds
std::string to_csv(const TrainabilityMapResult& result);
TrainabilityMapParams trainability_map_params_from_json(const nlohmann::json& object);

}  // namespace addnorm::lab
