// `addnorm lab-run trainability-map`: per placement, a table of depth x schedule rows and one
// column per peak learning rate: the held-out loss's median and how many seeds trained.

#include <algorithm>

#include "addnorm/lab/trainability_map.hpp"
#include "cli/lab_commands.hpp"
#include "cli/lab_experiment_command.hpp"
#include "cli/lab_render.hpp"
#include "lab/experiment_fields.hpp"

namespace addnorm::cli {
namespace {

std::string schedule_text(const lab::MapScheduleCell& s) {
  return s.kind == lab::MapSchedule::constant
             ? std::string("constant")
             : lab::map_schedule_name(s.kind) + " " + std::to_string(s.warmup_steps);
}

std::string render(const lab::TrainabilityMapResult& result) {
  const lab::TrainabilityMapParams& p = result.params;
  std::string text =
      "trainability-map: task " + lab::sequence_task_name(p.task) + " (" +
      std::to_string(p.length) + " symbols of " + std::to_string(p.symbols) + "), d_model " +
      std::to_string(p.shape.d_model) + ", sub-layers " + lab::sublayers_name(p.shape.sublayers) +
      ", " + std::to_string(p.steps) + " Adam steps (beta2 0.98) of batch " +
      std::to_string(p.batch) + ", " + std::to_string(p.seeds) +
      " seed(s) a cell; each cell: median held-out loss (chance " +
      fixed_text(result.chance_loss, 3) + ") and the seeds that trained (loss below " +
      general(p.target_loss, 3) + ")\n";
  if (p.cell >= 0) {
    text += "cell " + std::to_string(p.cell) + " of " + std::to_string(result.cell_count) + "\n";
  }
  std::vector<std::string> header{"depth", "schedule"};
  for (double lr : p.lrs) header.push_back("lr " + general(lr, 3));
  for (nn::Placement placement : p.placements) {
    std::vector<const lab::MapCell*> cells;
    for (const lab::MapCell& c : result.cells) {
      if (c.placement == placement) cells.push_back(&c);
    }
    if (cells.empty()) continue;
    text += "\n" + std::string(nn::placement_name(placement)) + "\n";
    TextTable table(header);
    for (int depth : p.depths) {
      for (const lab::MapScheduleCell& s : lab::map_schedule_cells(p)) {
        std::vector<std::string> row{std::to_string(depth), schedule_text(s)};
        bool any = false;
        for (double lr : p.lrs) {
          std::string value = "-";
          for (const lab::MapCell* c : cells) {
            if (c->depth == depth && c->lr == lr && c->schedule.kind == s.kind &&
                c->schedule.warmup_steps == s.warmup_steps) {
              value = fixed_text(c->final_loss.median, 3) + " (" + std::to_string(c->trained) +
                      "/" + std::to_string(c->seeds) + ")";
              any = true;
            }
          }
          row.push_back(value);
        }
        if (any) table.add(row);
      }
    }
    text += table.render();
  }
  return text;
}

}  // namespace

void add_lab_trainability_map_command(CLI::App& lab_run) {
  add_experiment_command<lab::TrainabilityMapParams>(
      lab_run, "trainability-map",
      "Which depth, peak lr and schedule each placement trains in (a training run per cell and "
      "seed)",
      lab::kTrainabilityMapFields, lab::trainability_map_quick,
      "A tiny map that finishes in a second",
      [](const lab::TrainabilityMapParams& p, const lab::Progress& progress) {
        return lab::run_trainability_map(p, progress);
      },
      render,
      [](lab::TrainabilityMapParams& params,
         const ParamOptions<lab::TrainabilityMapParams>& given) {
        // The default warmup is cut to a shortened run, as depth-training's is.
        if (!given.given("warmup_steps")) {
          for (int& warmup : params.warmup_steps) warmup = std::min(warmup, params.steps);
        }
      });
}

}  // namespace addnorm::cli
