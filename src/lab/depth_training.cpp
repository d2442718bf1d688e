// Experiment 6: training runs of transformer stacks per placement, depth, schedule and seed.
#include "addnorm/lab/depth_training.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "addnorm/nn/adam.hpp"
#include "addnorm/nn/parameter.hpp"
#include "addnorm/nn/sequence_model.hpp"
#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/experiment_fields.hpp"
#include "lab/parallel_runs.hpp"
#include "lab/transformer_probe.hpp"

namespace addnorm::lab {

double training_run_work(const DepthTrainingParams& p, int depth) {
  const double seq = 2.0 * p.length + 1.0;
  return static_cast<double>(p.steps) * depth * p.batch * seq * p.shape.d_model *
         (4.0 * p.shape.d_model + 2.0 * p.shape.d_ff + 2.0 * seq);
}

nn::LrSchedule noam_schedule(double lr, int warmup_steps, int d_model) {
  // The 2017 paper's factor * d^-0.5 * min(step^-0.5, step * W^-1.5) peaks at step W with
  // factor * d^-0.5 * W^-0.5; choose the factor that makes that peak lr.
  nn::LrSchedule schedule;
  schedule.kind = nn::LrScheduleKind::noam;
  schedule.warmup_steps = warmup_steps;
  schedule.d_model = d_model;
  schedule.factor =
      lr * std::sqrt(static_cast<double>(d_model)) * std::sqrt(static_cast<double>(warmup_steps));
  return schedule;
}

namespace {

constexpr uint64_t kEvalSeedOffset = 1'000'003;  // the held-out batch's generator: seed + this
constexpr int kLossWindow = 10;                  // steps averaged for steps_to_target

double total_work(const DepthTrainingParams& p) {
  double work = 0.0;
  for (int depth : p.depths) work += training_run_work(p, depth);
  return work * static_cast<double>(p.placements.size() * p.warmups.size()) * p.seeds;
}

nn::LrSchedule schedule_for(const DepthTrainingParams& p, bool warmup) {
  nn::LrSchedule schedule;
  if (!warmup) {
    schedule.kind = nn::LrScheduleKind::constant;
    schedule.lr = p.lr;
    return schedule;
  }
  return noam_schedule(p.lr, p.warmup_steps, p.shape.d_model);
}

// Fraction of answer positions whose largest logit is the target.
double accuracy_of(const Tensor& logits, const std::vector<int32_t>& targets, int64_t vocab) {
  int64_t right = 0, counted = 0;
  for (size_t row = 0; row < targets.size(); ++row) {
    if (targets[row] < 0) continue;
    const float* scores = logits.data() + static_cast<int64_t>(row) * vocab;
    const auto best = std::max_element(scores, scores + vocab) - scores;
    right += best == targets[row] ? 1 : 0;
    ++counted;
  }
  return counted == 0 ? 0.0 : static_cast<double>(right) / static_cast<double>(counted);
}

// The first kHeldOutExamples sequences of a held-out batch with the model's answers.
constexpr int kHeldOutExamples = 3;
std::vector<TrainingRun::Example> held_out_examples(const Tensor& logits, const TaskBatch& eval,
                                                    int64_t vocab) {
  std::vector<TrainingRun::Example> examples;
  for (int b = 0; b < std::min(eval.batch, kHeldOutExamples); ++b) {
    TrainingRun::Example example;
    for (int t = 0; t < eval.seq; ++t) {
      const size_t row = static_cast<size_t>(b) * static_cast<size_t>(eval.seq) + t;
      example.tokens.push_back(eval.tokens[row]);
      example.targets.push_back(eval.targets[row]);
      const float* scores = logits.data() + static_cast<int64_t>(row) * vocab;
      const auto best = static_cast<int32_t>(std::max_element(scores, scores + vocab) - scores);
      example.predicted.push_back(eval.targets[row] < 0 ? -1 : best);
    }
    examples.push_back(std::move(example));
  }
  return examples;
}

}  // namespace

// Everything one run owns. Held by pointer in TrainingSession: the parameter list and Adam point
// into the model, so it must not move.
struct TrainingSession::State {
  DepthTrainingParams params;
  TrainingRun run;
  nn::SequenceModel model;
  nn::ParameterList parameters;
  nn::Adam adam;
  numpy_random::Generator data;
  std::vector<int> history_steps;  // steps at which the per-block gradient norms are kept
  double window_sum = 0.0;
  bool stopped = false;  // a non-finite loss ended the run

  State(const DepthTrainingParams& p, nn::Placement placement, int depth,
        const nn::LrSchedule& schedule, uint64_t seed)
      : params(p),
        model(config_for(p, placement, depth, seed)),
        parameters(model.parameters()),
        adam(parameters, adam_options(p, schedule)),
        data(seed) {
    run.placement = placement;
    run.depth = depth;
    run.warmup = schedule.kind != nn::LrScheduleKind::constant;
    run.seed = seed;
    model.set_training(true);
    // Evenly spread over 1..steps, the last step included.
    for (int k = 1; k <= p.grad_history_points; ++k) {
      const int step =
          std::max(1, static_cast<int>(static_cast<int64_t>(k) * p.steps / p.grad_history_points));
      if (history_steps.empty() || history_steps.back() != step) history_steps.push_back(step);
    }
  }

  static nn::SequenceModelConfig config_for(const DepthTrainingParams& p, nn::Placement placement,
                                            int depth, uint64_t seed) {
    nn::SequenceModelConfig config = model_config(p.shape, placement, depth, p.symbols + 2, seed);
    config.stack.block.dropout = static_cast<float>(p.dropout);
    return config;
  }
  static nn::AdamOptions adam_options(const DepthTrainingParams& p,
                                      const nn::LrSchedule& schedule) {
    nn::AdamOptions options;
    options.schedule = schedule;
    options.clip_norm = p.clip_norm;
    return options;
  }
};

TrainingSession::TrainingSession(const DepthTrainingParams& params, nn::Placement placement,
                                 int depth, bool warmup, uint64_t seed)
    : state_(
          std::make_unique<State>(params, placement, depth, schedule_for(params, warmup), seed)) {}
TrainingSession::TrainingSession(const DepthTrainingParams& params, nn::Placement placement,
                                 int depth, const nn::LrSchedule& schedule, uint64_t seed)
    : state_(std::make_unique<State>(params, placement, depth, schedule, seed)) {}
TrainingSession::~TrainingSession() = default;
TrainingSession::TrainingSession(TrainingSession&&) noexcept = default;
TrainingSession& TrainingSession::operator=(TrainingSession&&) noexcept = default;

bool TrainingSession::finished() const {
  return state_->stopped || static_cast<int>(state_->run.loss.size()) >= state_->params.steps;
}

const TrainingRun& TrainingSession::run() const {
  return state_->run;
}

TrainingStep TrainingSession::step() {
  if (finished()) throw Error("the training run has ended; step() after the last step");
  State& s = *state_;
  const DepthTrainingParams& p = s.params;
  TrainingRun& run = s.run;
  const TaskBatch batch = make_task_batch(p.task, p.symbols, p.length, p.batch, s.data);
  nn::zero_grad(s.parameters);
  const double loss = s.model.forward_backward(batch.tokens, batch.targets, batch.batch, batch.seq);
  run.loss.push_back(loss);
  const int step = static_cast<int>(run.loss.size());
  if (!std::isfinite(loss) || (step > 1 && loss > 3.0 * run.loss.front())) run.diverged = true;
  if (std::find(s.history_steps.begin(), s.history_steps.end(), step) != s.history_steps.end()) {
    const LayerGradNorms grads = layer_grad_norms(s.parameters, run.depth);
    std::vector<double> per_block;
    for (int l = 0; l < run.depth; ++l) {
      per_block.push_back(std::sqrt(grads.attention[l] * grads.attention[l] +
                                    grads.ffn[l] * grads.ffn[l] + grads.other[l] * grads.other[l]));
    }
    run.grad_history_steps.push_back(step);
    run.grad_history.push_back(std::move(per_block));
  }
  if (!std::isfinite(loss)) {
    s.stopped = true;  // nothing to learn from NaN weights
    return {loss, std::numeric_limits<double>::quiet_NaN()};
  }
  const nn::AdamStep update = s.adam.step();
  run.grad_norm.push_back(update.grad_norm);
  s.window_sum += loss;
  if (step > kLossWindow) s.window_sum -= run.loss[static_cast<size_t>(step - 1 - kLossWindow)];
  if (run.steps_to_target < 0 && step >= kLossWindow &&
      s.window_sum / kLossWindow < p.target_loss) {
    run.steps_to_target = step;
  }
  return {loss, update.grad_norm};
}

const TrainingRun& TrainingSession::evaluate() {
  State& s = *state_;
  const DepthTrainingParams& p = s.params;
  TrainingRun& run = s.run;
  if (run.loss.empty() || !std::isfinite(run.loss.back())) {
    run.eval_loss = std::numeric_limits<double>::quiet_NaN();
    return run;
  }
  numpy_random::Generator held_out(run.seed + kEvalSeedOffset);
  const TaskBatch eval = make_task_batch(p.task, p.symbols, p.length, p.batch, held_out);
  s.model.set_training(false);
  const Tensor& logits = s.model.forward(eval.tokens, eval.batch, eval.seq);
  run.eval_accuracy = accuracy_of(logits, eval.targets, p.symbols + 2);
  run.examples = held_out_examples(logits, eval, p.symbols + 2);
  run.eval_loss = s.model.loss(eval.tokens, eval.targets, eval.batch, eval.seq);
  if (!std::isfinite(run.eval_loss)) run.diverged = true;
  return run;
}

namespace {

// The checkpoint comes before every optimiser step, so a cancelled run ends within one step.
TrainingRun train_one(const DepthTrainingParams& p, nn::Placement placement, int depth, bool warmup,
                      uint64_t seed, const Checkpoint& checkpoint) {
  TrainingSession session(p, placement, depth, warmup, seed);
  for (int step = 0; !session.finished(); ++step) {
    checkpoint(static_cast<double>(step) / p.steps);
    session.step();
  }
  checkpoint(1.0);
  return session.evaluate();
}

}  // namespace

DepthTrainingParams depth_training_quick() {
  DepthTrainingParams params;
  params.depths = {1, 4};
  params.steps = 60;
  params.warmup_steps = 20;
  params.seeds = 2;
  params.grad_history_points = 4;
  return params;
}

void validate(const DepthTrainingParams& params) {
  check_fields(params, depth_training_fields());
  validate(params.shape);
  check_integer("warmup_steps", params.warmup_steps, 1, params.steps);
  const double work = total_work(params);
  if (work > kDepthTrainingMaxWork) {
    throw Error("the run needs about " + number_text(work) + " multiply-adds of forward, " +
                "expected at most " + number_text(kDepthTrainingMaxWork) +
                " (fewer steps, depths, seeds or placements, or a smaller model or batch)");
  }
}

DepthTrainingResult run_depth_training(const DepthTrainingParams& params,
                                       const Progress& progress) {
  validate(params);
  DepthTrainingResult result;
  result.params = params;
  result.chance_loss = std::log(static_cast<double>(params.symbols));
  // Every run is independent: all of them in parallel, combined in this order below.
  struct Job {
    nn::Placement placement;
    int depth;
    bool warmup;
    uint64_t seed;
  };
  std::vector<Job> jobs;
  for (nn::Placement placement : params.placements) {
    for (int depth : params.depths) {
      for (bool warmup : params.warmups) {
        for (int i = 0; i < params.seeds; ++i) {
          jobs.push_back({placement, depth, warmup, params.seed + static_cast<uint64_t>(i)});
        }
      }
    }
  }
  std::vector<TrainingRun> runs(jobs.size());
  run_in_parallel(
      static_cast<int64_t>(jobs.size()),
      [&](int64_t i, const Checkpoint& checkpoint) {
        const Job& job = jobs[static_cast<size_t>(i)];
        runs[static_cast<size_t>(i)] =
            train_one(params, job.placement, job.depth, job.warmup, job.seed, checkpoint);
      },
      [&](int64_t i) { return training_run_work(params, jobs[static_cast<size_t>(i)].depth); },
      [&](int64_t i) {
        const Job& job = jobs[static_cast<size_t>(i)];
        return std::string(nn::placement_name(job.placement)) + ", depth " +
               std::to_string(job.depth) + (job.warmup ? ", warmup" : ", constant lr");
      },
      progress);

  size_t next = 0;
  for (nn::Placement placement : params.placements) {
    for (int depth : params.depths) {
      for (bool warmup : params.warmups) {
        TrainingSummary summary;
        summary.placement = placement;
        summary.depth = depth;
        summary.warmup = warmup;
        std::vector<double> losses, accuracies;
        for (int i = 0; i < params.seeds; ++i, ++next) {
          TrainingRun& run = runs[next];
          losses.push_back(run.eval_loss);
          accuracies.push_back(run.eval_accuracy);
          if (run.steps_to_target >= 0) {
            ++summary.reached_target;
            summary.mean_steps_to_target += run.steps_to_target;
          }
          summary.diverged += run.diverged ? 1 : 0;
          result.runs.push_back(std::move(run));
        }
        summary.final_loss_spread = spread_of(losses);
        summary.accuracy_spread = spread_of(accuracies);
        summary.final_loss = summary.final_loss_spread.median;
        summary.accuracy = summary.accuracy_spread.median;
        if (summary.reached_target > 0) summary.mean_steps_to_target /= summary.reached_target;
        result.summaries.push_back(summary);
      }
    }
  }
  return result;
}

nlohmann::json to_json(const DepthTrainingParams& params) {
  return fields_to_json(params, depth_training_fields());
}

nlohmann::json to_json(const DepthTrainingResult& result) {
  nlohmann::json runs = nlohmann::json::array(), summaries = nlohmann::json::array();
  for (const TrainingRun& r : result.runs) {
    runs.push_back({{"placement", std::string(nn::placement_name(r.placement))},
                    {"depth", r.depth},
                    {"warmup", r.warmup},
                    {"seed", r.seed},
                    {"loss", r.loss},
                    {"grad_norm", r.grad_norm},
                    {"eval_loss", r.eval_loss},
                    {"eval_accuracy", r.eval_accuracy},
                    {"steps_to_target", r.steps_to_target},
                    {"diverged", r.diverged},
                    {"grad_history_steps", r.grad_history_steps},
                    {"grad_history", r.grad_history}});
  }
  for (const TrainingSummary& s : result.summaries) {
    summaries.push_back({{"placement", std::string(nn::placement_name(s.placement))},
                         {"depth", s.depth},
                         {"warmup", s.warmup},
                         {"final_loss", s.final_loss},
                         {"accuracy", s.accuracy},
                         {"final_loss_spread", to_json(s.final_loss_spread)},
                         {"accuracy_spread", to_json(s.accuracy_spread)},
                         {"reached_target", s.reached_target},
                         {"mean_steps_to_target", s.mean_steps_to_target},
                         {"diverged", s.diverged}});
  }
  return {{"experiment", "depth-training"},
          {"params", to_json(result.params)},
          {"chance_loss", result.chance_loss},
          {"summaries", summaries},
          {"runs", runs}};
}

std::string to_csv(const DepthTrainingResult& result) {
  CsvWriter csv({"placement", "depth", "warmup", "seed", "step", "loss", "grad_norm"});
  for (const TrainingRun& r : result.runs) {
    for (size_t step = 0; step < r.loss.size(); ++step) {
      csv.cell(std::string(nn::placement_name(r.placement)))
          .cell(r.depth)
          .cell(r.warmup ? "true" : "false")
          .cell(r.seed)
          .cell(static_cast<int>(step + 1))
          .cell(r.loss[step])
          .cell(step < r.grad_norm.size() ? r.grad_norm[step]
                                          : std::numeric_limits<double>::quiet_NaN())
          .end_row();
    }
  }
  return csv.text();
}

DepthTrainingParams depth_training_params_from_json(const nlohmann::json& object) {
  return read_params(object, "depth-training", depth_training_fields(), depth_training_quick);
}

}  // namespace addnorm::lab
