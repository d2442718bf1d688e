// Experiment 9: the trainability map, one training run per (cell, seed) with depth-training's
// TrainingSession (trainability_map.hpp).
#include "addnorm/lab/trainability_map.hpp"

#include <algorithm>
#include <cmath>

#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/experiment_fields.hpp"
#include "lab/json_params.hpp"
#include "lab/parallel_runs.hpp"

namespace addnorm::lab {
namespace {

constexpr MapSchedule kAllSchedules[] = {MapSchedule::constant, MapSchedule::linear,
                                         MapSchedule::noam};

}  // namespace

DepthTrainingParams map_run_params(const TrainabilityMapParams& p) {
  DepthTrainingParams run;
  run.shape = p.shape;
  run.task = p.task;
  run.length = p.length;
  run.symbols = p.symbols;
  run.batch = p.batch;
  run.steps = p.steps;
  run.target_loss = p.target_loss;
  run.grad_history_points = 1;
  return run;
}

namespace {

nn::LrSchedule lr_schedule(const TrainabilityMapParams& p, double lr, const MapScheduleCell& cell) {
  switch (cell.kind) {
    case MapSchedule::constant: {
      nn::LrSchedule schedule;
      schedule.kind = nn::LrScheduleKind::constant;
      schedule.lr = lr;
      return schedule;
    }
    case MapSchedule::linear: {
      nn::LrSchedule schedule;
      schedule.kind = nn::LrScheduleKind::linear_warmup;
      schedule.lr = lr;
      schedule.warmup_steps = cell.warmup_steps;
      return schedule;
    }
    case MapSchedule::noam:
      return noam_schedule(lr, cell.warmup_steps, p.shape.d_model);
  }
  throw Error("unknown schedule");
}

struct CellKey {
  nn::Placement placement;
  int depth;
  double lr;
  MapScheduleCell schedule;
};

std::vector<CellKey> all_cells(const TrainabilityMapParams& p) {
  std::vector<CellKey> cells;
  const std::vector<MapScheduleCell> schedules = map_schedule_cells(p);
  for (nn::Placement placement : p.placements) {
    for (int depth : p.depths) {
      for (double lr : p.lrs) {
        for (const MapScheduleCell& schedule : schedules) {
          cells.push_back({placement, depth, lr, schedule});
        }
      }
    }
  }
  return cells;
}

// The indices params.cell selects.
std::vector<int> selected(const TrainabilityMapParams& p) {
  if (p.cell >= 0) return {p.cell};
  std::vector<int> indices(static_cast<size_t>(map_cell_count(p)));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int>(i);
  return indices;
}

}  // namespace

std::string map_schedule_name(MapSchedule schedule) {
  switch (schedule) {
    case MapSchedule::constant:
      return "constant";
    case MapSchedule::linear:
      return "linear";
    case MapSchedule::noam:
      return "noam";
  }
  return "?";
}

MapSchedule parse_map_schedule(const std::string& name) {
  for (MapSchedule schedule : kAllSchedules) {
    if (map_schedule_name(schedule) == name) return schedule;
  }
  throw Error("schedule is \"" + name + "\", expected constant, linear or noam");
}

TrainabilityMapParams trainability_map_quick() {
  TrainabilityMapParams params;
  params.placements = {nn::Placement::post_norm, nn::Placement::pre_norm};
  params.depths = {2};
  params.lrs = {1e-3};
  params.schedules = {MapSchedule::constant, MapSchedule::linear, MapSchedule::noam};
  params.warmup_steps = {10};
  params.steps = 40;
  params.seeds = 1;
  return params;
}

std::vector<MapScheduleCell> map_schedule_cells(const TrainabilityMapParams& params) {
  std::vector<MapScheduleCell> cells;
  for (MapSchedule kind : params.schedules) {
    if (kind == MapSchedule::constant) {
      cells.push_back({kind, 0});
    } else {
      for (int warmup : params.warmup_steps) cells.push_back({kind, warmup});
    }
  }
  return cells;
}

int map_cell_count(const TrainabilityMapParams& params) {
  return static_cast<int>(params.placements.size() * params.depths.size() * params.lrs.size() *
                          map_schedule_cells(params).size());
}

std::vector<int> map_cell_depths(const TrainabilityMapParams& params) {
  std::vector<int> depths;
  for (const CellKey& key : all_cells(params)) depths.push_back(key.depth);
  return depths;
}

void validate(const TrainabilityMapParams& params) {
  check_fields(params, kTrainabilityMapFields);
  validate(params.shape);
  const bool warms_up = std::any_of(params.schedules.begin(), params.schedules.end(),
                                    [](MapSchedule s) { return s != MapSchedule::constant; });
  for (int warmup : params.warmup_steps) {
    if (warms_up && warmup > params.steps) {
      throw Error("warmup_steps holds " + std::to_string(warmup) +
                  ", expected each at most steps = " + std::to_string(params.steps));
    }
  }
  const int count = map_cell_count(params);
  if (params.cell >= count) {
    throw Error("cell is " + std::to_string(params.cell) + ", expected -1 or 0.." +
                std::to_string(count - 1) + " (the map has " + std::to_string(count) + " cells)");
  }
  const DepthTrainingParams run = map_run_params(params);
  const std::vector<CellKey> cells = all_cells(params);
  double work = 0.0;
  for (int index : selected(params)) {
    work += training_run_work(run, cells[static_cast<size_t>(index)].depth) * params.seeds;
  }
  if (work > kTrainabilityMapMaxWork) {
    throw Error("the map needs about " + number_text(work) + " multiply-adds of forward, " +
                "expected at most " + number_text(kTrainabilityMapMaxWork) +
                " (fewer cells, steps or seeds, or a smaller model or batch)");
  }
}

TrainabilityMapResult run_trainability_map(const TrainabilityMapParams& params,
                                           const Progress& progress) {
  validate(params);
  const DepthTrainingParams run = map_run_params(params);
  const std::vector<CellKey> cells = all_cells(params);
  const std::vector<int> indices = selected(params);
  struct Job {
    int cell;
    uint64_t seed;
  };
  std::vector<Job> jobs;
  for (int index : indices) {
    for (int i = 0; i < params.seeds; ++i) {
      jobs.push_back({index, params.seed + static_cast<uint64_t>(i)});
    }
  }
  std::vector<TrainingRun> runs(jobs.size());
  run_in_parallel(
      static_cast<int64_t>(jobs.size()),
      [&](int64_t i, const Checkpoint& checkpoint) {
        const Job& job = jobs[static_cast<size_t>(i)];
        const CellKey& key = cells[static_cast<size_t>(job.cell)];
        TrainingSession session(run, key.placement, key.depth,
                                lr_schedule(params, key.lr, key.schedule), job.seed);
        for (int step = 0; !session.finished(); ++step) {
          checkpoint(static_cast<double>(step) / params.steps);
          session.step();
        }
        checkpoint(1.0);
        TrainingRun record = session.evaluate();
        // The map keeps each run's outcome, not its curves: a map of many long runs would
        // otherwise hold every step's loss until the end.
        record.loss = {};
        record.grad_norm = {};
        record.grad_history = {};
        runs[static_cast<size_t>(i)] = std::move(record);
      },
      [&](int64_t i) {
        return training_run_work(
            run, cells[static_cast<size_t>(jobs[static_cast<size_t>(i)].cell)].depth);
      },
      [&](int64_t i) {
        const CellKey& key = cells[static_cast<size_t>(jobs[static_cast<size_t>(i)].cell)];
        return std::string(nn::placement_name(key.placement)) + ", depth " +
               std::to_string(key.depth) + ", lr " + number_text(key.lr) + ", " +
               map_schedule_name(key.schedule.kind);
      },
      progress);

  TrainabilityMapResult result;
  result.params = params;
  result.chance_loss = std::log(static_cast<double>(params.symbols));
  result.cell_count = map_cell_count(params);
  size_t next = 0;
  for (int index : indices) {
    const CellKey& key = cells[static_cast<size_t>(index)];
    MapCell cell;
    cell.index = index;
    cell.placement = key.placement;
    cell.depth = key.depth;
    cell.lr = key.lr;
    cell.schedule = key.schedule;
    cell.seeds = params.seeds;
    std::vector<double> accuracies;
    for (int i = 0; i < params.seeds; ++i, ++next) {
      const TrainingRun& r = runs[next];
      cell.final_loss_per_seed.push_back(r.eval_loss);
      accuracies.push_back(r.eval_accuracy);
      cell.diverged += r.diverged ? 1 : 0;
      cell.trained += (!r.diverged && r.eval_loss < params.target_loss) ? 1 : 0;
    }
    cell.final_loss = spread_of(cell.final_loss_per_seed);
    cell.accuracy = spread_of(accuracies);
    result.cells.push_back(std::move(cell));
  }
  return result;
}

nlohmann::json to_json(const TrainabilityMapParams& params) {
  return fields_to_json(params, kTrainabilityMapFields);
}

nlohmann::json to_json(const TrainabilityMapResult& result) {
  nlohmann::json cells = nlohmann::json::array();
  for (const MapCell& c : result.cells) {
    cells.push_back({{"index", c.index},
                     {"placement", std::string(nn::placement_name(c.placement))},
                     {"depth", c.depth},
                     {"lr", c.lr},
                     {"schedule", map_schedule_name(c.schedule.kind)},
                     {"warmup_steps", c.schedule.warmup_steps},
                     {"final_loss", to_json(c.final_loss)},
                     {"accuracy", to_json(c.accuracy)},
                     {"trained", c.trained},
                     {"diverged", c.diverged},
                     {"seeds", c.seeds},
                     {"final_loss_per_seed", c.final_loss_per_seed}});
  }
  return {{"experiment", "trainability-map"},
          {"params", to_json(result.params)},
          {"chance_loss", result.chance_loss},
          {"cell_count", result.cell_count},
          {"cells", cells}};
}

std::string to_csv(const TrainabilityMapResult& result) {
  CsvWriter csv({"cell", "placement", "depth", "lr", "schedule", "warmup_steps", "final_loss",
                 "q25", "q75", "accuracy", "trained", "diverged", "seeds"});
  for (const MapCell& c : result.cells) {
    csv.cell(c.index)
        .cell(std::string(nn::placement_name(c.placement)))
        .cell(c.depth)
        .cell(c.lr)
        .cell(map_schedule_name(c.schedule.kind))
        .cell(c.schedule.warmup_steps)
        .cell(c.final_loss.median)
        .cell(c.final_loss.low)
        .cell(c.final_loss.high)
        .cell(c.accuracy.median)
        .cell(c.trained)
        .cell(c.diverged)
        .cell(c.seeds)
        .end_row();
  }
  return csv.text();
}

TrainabilityMapParams trainability_map_params_from_json(const nlohmann::json& object) {
  return read_params(object, "trainability-map", kTrainabilityMapFields, trainability_map_quick);
}

}  // namespace addnorm::lab
