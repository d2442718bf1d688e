// The live training loop behind POST /api/train: every run is a lab::TrainingSession (the runs
// of `addnorm lab-run depth-training`, src/lab/depth_training.cpp), stepped together one step at
// a time so that each step's losses stream to the page as they come.
#include "server/training_stream.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "addnorm/lab/depth_training.hpp"
#include "server/api_error.hpp"

namespace addnorm::server {
namespace {

// JSON has no NaN or infinity: they go out as null.
nlohmann::json finite_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace

void stream_training(const lab::DepthTrainingParams& params, Job& job, const EventSink& emit,
                     const std::function<bool()>& client_gone) {
  lab::validate(params);
  std::vector<lab::TrainingSession> runs;
  nlohmann::json run_list = nlohmann::json::array();
  // The lab's order: placements, depths, warmups, seeds (outer to inner).
  for (nn::Placement placement : params.placements) {
    for (int depth : params.depths) {
      for (bool warmup : params.warmups) {
        for (int i = 0; i < params.seeds; ++i) {
          const uint64_t seed = params.seed + static_cast<uint64_t>(i);
          runs.emplace_back(params, placement, depth, warmup, seed);
          run_list.push_back({{"placement", nn::placement_name(placement)},
                              {"depth", depth},
                              {"warmup", warmup},
                              {"seed", seed}});
        }
      }
    }
  }
  if (!emit("start", {{"job", job.id()},
                      {"params", lab::to_json(params)},
                      {"chance_loss", std::log(static_cast<double>(params.symbols))},
                      {"runs", run_list}})) {
    return;
  }
  for (int step = 1; step <= params.steps; ++step) {
    nlohmann::json losses = nlohmann::json::array(), grad_norms = nlohmann::json::array();
    for (lab::TrainingSession& run : runs) {
      // Before every run's step, not only every round of steps: a round of 12 deep runs is
      // 12 steps long, and a stop should wait for one.
      if (client_gone && client_gone()) job.request_stop("client disconnected");
      if (const std::string reason = job.stop_reason(); !reason.empty()) {
        emit("stopped",
             {{"reason", reason}, {"step", step - 1}, {"elapsed_s", job.elapsed_seconds()}});
        return;
      }
      if (run.finished()) {  // stopped early on a non-finite loss
        losses.push_back(nullptr);
        grad_norms.push_back(nullptr);
        continue;
      }
      const lab::TrainingStep result = run.step();
      losses.push_back(finite_or_null(result.loss));
      grad_norms.push_back(finite_or_null(result.grad_norm));
    }
    if (!emit("step", {{"step", step}, {"loss", losses}, {"grad_norm", grad_norms}})) {
      job.request_stop("client disconnected");
      return;
    }
  }
  nlohmann::json results = nlohmann::json::array();
  for (lab::TrainingSession& run : runs) {
    const lab::TrainingRun& record = run.evaluate();
    nlohmann::json examples = nlohmann::json::array();
    for (const lab::TrainingRun::Example& example : record.examples) {
      examples.push_back({{"tokens", example.tokens},
                          {"targets", example.targets},
                          {"predicted", example.predicted}});
    }
    results.push_back({{"eval_loss", record.eval_loss},
                       {"eval_accuracy", record.eval_accuracy},
                       {"steps_to_target", record.steps_to_target},
                       {"diverged", record.diverged},
                       {"examples", examples}});
  }
  emit("done", {{"elapsed_s", job.elapsed_seconds()}, {"runs", results}});
}

}  // namespace addnorm::server
