#include "server/work_limits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "server/api_error.hpp"

namespace addnorm::server {
namespace {

// The weights of one run's blocks: attention's four d x d projections and the FFN's two
// d x d_ff matrices per block.
double block_weights(const lab::DepthTrainingParams& p, int depth) {
  const double d = p.shape.d_model, d_ff = p.shape.d_ff;
  return depth * (4.0 * d * d + 2.0 * d * d_ff);
}

// The runs that hold their memory at the same time: at most runs_at_once, the largest ones.
double peak_of_runs(std::vector<double> runs, int runs_at_once) {
  std::sort(runs.begin(), runs.end(), std::greater<>());
  const size_t at_once = std::min(runs.size(), static_cast<size_t>(std::max(1, runs_at_once)));
  double bytes = 0.0;
  for (size_t i = 0; i < at_once; ++i) bytes += runs[i];
  return bytes;
}

std::string mib(double bytes) {
  return std::to_string(static_cast<int64_t>(std::ceil(bytes / (1 << 20)))) + " MiB";
}

}  // namespace

void check_training_limits(const lab::DepthTrainingParams& params, const TrainingLimits& limits) {
  const size_t runs = params.placements.size() * params.depths.size() * params.warmups.size() *
                      static_cast<size_t>(std::max(params.seeds, 0));
  if (runs > static_cast<size_t>(limits.max_runs)) {
    throw ApiError(400,
                   "placements x depths x warmups x seeds is " + std::to_string(runs) +
                       " runs, expected at most " + std::to_string(limits.max_runs) +
                       " (the server trains them all at once)",
                   "placements");
  }
  double weights = 0.0;
  for (int depth : params.depths) weights += block_weights(params, depth);
  weights *= static_cast<double>(params.placements.size() * params.warmups.size()) * params.seeds;
  if (weights > limits.max_parameters) {
    throw ApiError(400,
                   "the runs hold " + std::to_string(static_cast<int64_t>(weights)) +
                       " block weights in all, expected at most " +
                       std::to_string(static_cast<int64_t>(limits.max_parameters)) +
                       " (fewer or shallower runs, or a smaller d_model or d_ff)",
                   "depths");
  }
}

double run_bytes(const RunSize& r) {
  const double d = r.shape.d_model, d_ff = r.shape.d_ff, heads = r.shape.n_heads;
  const double seq = 2.0 * r.length + 1.0;  // the task's sequence: input, separator, answer
  const double tokens = static_cast<double>(r.batch) * seq;
  const double vocab = r.symbols + 2.0;
  // Weights (the blocks' matrices, biases and norm parameters; embedding and output head),
  // each held weight_copies times (training: value, gradient, Adam's first and second moments).
  const double weights =
      r.depth * (4.0 * d * d + 2.0 * d * d_ff + 9.0 * d + d_ff) + 2.0 * vocab * d + vocab;
  // Per block and token, what src/nn keeps between forward and backward and the backward's
  // buffers (block.hpp: 13 stream-wide tensors; attention.hpp: q, k, v and their gradients, the
  // context and its gradient, a scratch; feed_forward.hpp: the hidden layer before and after
  // the activation and its gradient), rounded up: 24 d + 4 d_ff, and the attention
  // probabilities, heads x seq per token, with room for their gradient; plus what the
  // experiment keeps of each block's output (extra_per_block_token).
  const double per_block = 24.0 * d + 4.0 * d_ff + 2.0 * heads * seq + r.extra_per_block_token;
  // The model's own: the embedded input, the logits and their gradient, the stack's output and
  // its gradient, the final norm's.
  const double per_model = 6.0 * d + 3.0 * vocab;
  const double floats = r.weight_copies * weights + tokens * (r.depth * per_block + per_model);
  constexpr double kPerRun = 1 << 20;  // the run's record, generators, small buffers
  return 4.0 * floats + kPerRun;
}

double training_run_bytes(const lab::DepthTrainingParams& p, int depth) {
  return run_bytes({p.shape, p.length, p.batch, p.symbols, depth, 4.0});
}

lab::DepthTrainingParams checked_training_params(const nlohmann::json& params,
                                                 const TrainingLimits& limits) {
  lab::DepthTrainingParams parsed = lab::depth_training_params_from_json(params);
  lab::validate(parsed);
  check_training_limits(parsed, limits);
  return parsed;
}

StreamedTraining checked_streamed_training(const nlohmann::json& params,
                                           const TrainingLimits& limits) {
  StreamedTraining training{checked_training_params(params, limits), 0.0};
  training.peak_bytes = training_peak_bytes(training.params, std::numeric_limits<int>::max());
  check_training_memory(training.peak_bytes, limits);
  return training;
}

double training_peak_bytes(const lab::DepthTrainingParams& p, int runs_at_once) {
  std::vector<double> runs;
  for (size_t i = 0; i < p.placements.size() * p.warmups.size(); ++i) {
    for (int depth : p.depths) {
      for (int s = 0; s < p.seeds; ++s) runs.push_back(training_run_bytes(p, depth));
    }
  }
  return peak_of_runs(std::move(runs), runs_at_once);
}

namespace {

// init-gradients and update-size: one run per (placement, depth, seed), each holding
// weight_copies of its weights and every block's stream twice (2 d_model a token) beside what a
// forward and backward keep.
template <class Params>
double stack_experiment_peak_bytes(const Params& p, double weight_copies, int runs_at_once) {
  std::vector<double> runs;
  for (size_t i = 0; i < p.placements.size(); ++i) {
    for (int depth : p.depths) {
      const double bytes = run_bytes(
          {p.shape, p.length, p.batch, p.symbols, depth, weight_copies, 2.0 * p.shape.d_model});
      runs.insert(runs.end(), static_cast<size_t>(p.seeds), bytes);
    }
  }
  return peak_of_runs(std::move(runs), runs_at_once);
}

}  // namespace

// init-gradients: value and gradient of each weight; each block's stream and its gradient.
double init_gradients_peak_bytes(const lab::InitGradientsParams& p, int runs_at_once) {
  return stack_experiment_peak_bytes(p, 2.0, runs_at_once);
}

// update-size: value, gradient, Adam's two moments and the original weights restored after each
// step size; each block's output before and after the step.
double update_size_peak_bytes(const lab::UpdateSizeParams& p, int runs_at_once) {
  return stack_experiment_peak_bytes(p, 5.0, runs_at_once);
}

// rank-collapse: a forward only, but every parameter has its gradient tensor, and the FFN weights
// are drawn even when the blocks do not run them. A sequence of `tokens` fits the task sequence
// of length tokens / 2 (2 length + 1 tokens); 2 symbols give the smallest vocabulary.
double rank_collapse_peak_bytes(const lab::RankCollapseParams& p, int runs_at_once) {
  const double bytes = run_bytes({p.shape, p.tokens / 2, p.batch, 2, p.depth, 2.0, 0.0});
  std::vector<double> runs(p.placements.size() * static_cast<size_t>(p.seeds), bytes);
  return peak_of_runs(std::move(runs), runs_at_once);
}

// trainability-map: one training run per (cell, seed), a few at a time.
double trainability_map_peak_bytes(const lab::TrainabilityMapParams& p, int runs_at_once) {
  const lab::DepthTrainingParams run = lab::map_run_params(p);
  const std::vector<int> depths = lab::map_cell_depths(p);
  std::vector<double> runs;
  for (size_t i = 0; i < depths.size(); ++i) {
    if (p.cell >= 0 && static_cast<int>(i) != p.cell) continue;
    runs.insert(runs.end(), static_cast<size_t>(p.seeds), training_run_bytes(run, depths[i]));
  }
  return peak_of_runs(std::move(runs), runs_at_once);
}

void check_training_memory(double bytes, const TrainingLimits& limits) {
  if (bytes > limits.max_job_bytes) {
    throw ApiError(400,
                   "the runs need an estimated " + mib(bytes) +
                       " of memory at their peak, over the server's limit of " +
                       mib(limits.max_job_bytes) +
                       " per request (a smaller batch, length, d_model or d_ff, or fewer or "
                       "shallower runs)",
                   "batch");
  }
}

std::shared_ptr<void> MemoryBudget::reserve(double bytes) {
  std::lock_guard lock(mutex_);
  if (in_use_ + bytes > total_) return nullptr;
  in_use_ += bytes;
  // The deleter gives the bytes back when the job's last owner lets go (after its worker ends).
  return std::shared_ptr<void>(static_cast<void*>(this), [this, bytes](void*) {
    std::lock_guard release(mutex_);
    in_use_ -= bytes;
  });
}

double MemoryBudget::in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

}  // namespace addnorm::server
