// The live training loop behind POST /api/train. It mirrors the lab's train_one step for step
// (src/lab/depth_training.cpp): the same model (lab::model_config), the same learning-rate
// schedules, batches, divergence rule and held-out evaluation. The lab function reports only a
// progress fraction while it runs, not each step's loss, so the loop is repeated here to stream
// the curves.
#include "server/training_stream.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "addnorm/nn/adam.hpp"
#include "addnorm/nn/parameter.hpp"
#include "addnorm/nn/sequence_model.hpp"
#include "lab/transformer_probe.hpp"
#include "server/api_error.hpp"

namespace addnorm::server {
namespace {

constexpr uint64_t kEvalSeedOffset = 1'000'003;  // the lab's held-out batch: seed + this
constexpr int kLossWindow = 10;                  // the lab's window for steps_to_target

// The lab's schedules: constant lr, or the 2017 paper's warmup scaled to peak at lr.
nn::LrSchedule schedule_for(const lab::DepthTrainingParams& p, bool warmup) {
  nn::LrSchedule schedule;
  if (!warmup) {
    schedule.kind = nn::LrScheduleKind::constant;
    schedule.lr = p.lr;
    return schedule;
  }
  schedule.kind = nn::LrScheduleKind::noam;
  schedule.warmup_steps = p.warmup_steps;
  schedule.d_model = p.shape.d_model;
  schedule.factor = p.lr * std::sqrt(static_cast<double>(p.shape.d_model)) *
                    std::sqrt(static_cast<double>(p.warmup_steps));
  return schedule;
}

// The lab's model: lab::model_config with the run's dropout.
nn::SequenceModelConfig config_for(const lab::DepthTrainingParams& p, nn::Placement placement,
                                   int depth, uint64_t seed) {
  nn::SequenceModelConfig config =
      lab::model_config(p.shape, placement, depth, p.symbols + 2, seed);
  config.stack.block.dropout = static_cast<float>(p.dropout);
  return config;
}

// One (placement, depth, warmup, seed) run with everything it owns.
struct LiveRun {
  nn::Placement placement;
  int depth;
  bool warmup;
  uint64_t seed;
  std::unique_ptr<nn::SequenceModel> model;  // held by pointer: the parameter list points into it
  nn::ParameterList parameters;
  std::unique_ptr<nn::Adam> adam;
  numpy_random::Generator data;
  std::vector<double> loss;
  double window_sum = 0.0;
  int steps_to_target = -1;
  bool diverged = false;
  bool finished = false;  // stopped early on a non-finite loss

  LiveRun(const lab::DepthTrainingParams& p, nn::Placement run_placement, int run_depth,
          bool run_warmup, uint64_t run_seed)
      : placement(run_placement),
        depth(run_depth),
        warmup(run_warmup),
        seed(run_seed),
        model(
            std::make_unique<nn::SequenceModel>(config_for(p, run_placement, run_depth, run_seed))),
        data(run_seed) {
    model->set_training(true);
    parameters = model->parameters();
    nn::AdamOptions options;
    options.schedule = schedule_for(p, run_warmup);
    options.clip_norm = p.clip_norm;
    adam = std::make_unique<nn::Adam>(parameters, options);
  }

  // One optimiser step; returns {loss, grad_norm} (grad_norm NaN when the step was not taken).
  std::pair<double, double> step(const lab::DepthTrainingParams& p) {
    const lab::TaskBatch batch = lab::make_task_batch(p.task, p.symbols, p.length, p.batch, data);
    nn::zero_grad(parameters);
    const double value =
        model->forward_backward(batch.tokens, batch.targets, batch.batch, batch.seq);
    loss.push_back(value);
    if (!std::isfinite(value) || (loss.size() > 1 && value > 3.0 * loss.front())) diverged = true;
    if (!std::isfinite(value)) {
      finished = true;  // nothing to learn from NaN weights
      return {value, std::numeric_limits<double>::quiet_NaN()};
    }
    const nn::AdamStep update = adam->step();
    const int steps = static_cast<int>(loss.size());
    window_sum += value;
    if (steps > kLossWindow) window_sum -= loss[static_cast<size_t>(steps - 1 - kLossWindow)];
    if (steps_to_target < 0 && steps >= kLossWindow && window_sum / kLossWindow < p.target_loss) {
      steps_to_target = steps;
    }
    return {value, update.grad_norm};
  }

  nlohmann::json evaluate(const lab::DepthTrainingParams& p) {
    double eval_loss = std::numeric_limits<double>::quiet_NaN(), accuracy = 0.0;
    if (!loss.empty() && std::isfinite(loss.back())) {
      numpy_random::Generator held_out(seed + kEvalSeedOffset);
      const lab::TaskBatch eval =
          lab::make_task_batch(p.task, p.symbols, p.length, p.batch, held_out);
      model->set_training(false);
      const Tensor& logits = model->forward(eval.tokens, eval.batch, eval.seq);
      const int64_t vocab = p.symbols + 2;
      int64_t right = 0, counted = 0;
      for (size_t row = 0; row < eval.targets.size(); ++row) {
        if (eval.targets[row] < 0) continue;
        const float* scores = logits.data() + static_cast<int64_t>(row) * vocab;
        right += std::max_element(scores, scores + vocab) - scores == eval.targets[row] ? 1 : 0;
        ++counted;
      }
      accuracy = counted == 0 ? 0.0 : static_cast<double>(right) / static_cast<double>(counted);
      eval_loss = model->loss(eval.tokens, eval.targets, eval.batch, eval.seq);
      if (!std::isfinite(eval_loss)) diverged = true;
    }
    return {{"eval_loss", eval_loss},
            {"eval_accuracy", accuracy},
            {"steps_to_target", steps_to_target},
            {"diverged", diverged}};
  }
};

// JSON has no NaN or infinity: they go out as null.
nlohmann::json finite_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace

void stream_training(const lab::DepthTrainingParams& params, Job& job, const EventSink& emit) {
  lab::validate(params);
  std::vector<std::unique_ptr<LiveRun>> runs;
  nlohmann::json run_list = nlohmann::json::array();
  // The lab's order: placements, depths, warmups, seeds (outer to inner).
  for (nn::Placement placement : params.placements) {
    for (int depth : params.depths) {
      for (bool warmup : params.warmups) {
        for (int i = 0; i < params.seeds; ++i) {
          const uint64_t seed = params.seed + static_cast<uint64_t>(i);
          runs.push_back(std::make_unique<LiveRun>(params, placement, depth, warmup, seed));
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
    const std::string reason = job.stop_reason();
    if (!reason.empty()) {
      emit("stopped",
           {{"reason", reason}, {"step", step - 1}, {"elapsed_s", job.elapsed_seconds()}});
      return;
    }
    nlohmann::json losses = nlohmann::json::array(), grad_norms = nlohmann::json::array();
    for (auto& run : runs) {
      if (run->finished) {
        losses.push_back(nullptr);
        grad_norms.push_back(nullptr);
        continue;
      }
      const auto [loss, grad_norm] = run->step(params);
      losses.push_back(finite_or_null(loss));
      grad_norms.push_back(finite_or_null(grad_norm));
    }
    if (!emit("step", {{"step", step}, {"loss", losses}, {"grad_norm", grad_norms}})) {
      job.request_stop("client disconnected");
      return;
    }
  }
  nlohmann::json results = nlohmann::json::array();
  for (auto& run : runs) results.push_back(run->evaluate(params));
  emit("done", {{"elapsed_s", job.elapsed_seconds()}, {"runs", results}});
}

}  // namespace addnorm::server
