#include "server/work_limits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
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

double training_run_bytes(const lab::DepthTrainingParams& p, int depth) {
  const double d = p.shape.d_model, d_ff = p.shape.d_ff, heads = p.shape.n_heads;
  const double seq = 2.0 * p.length + 1.0;  // the task's sequence: input, separator, answer
  const double tokens = static_cast<double>(p.batch) * seq;
  const double vocab = p.symbols + 2.0;
  // Weights (the blocks' matrices, biases and norm parameters; embedding and output head),
  // each held four times: value, gradient, Adam's first and second moments.
  const double weights =
      depth * (4.0 * d * d + 2.0 * d * d_ff + 9.0 * d + d_ff) + 2.0 * vocab * d + vocab;
  // Per block and token, what src/nn keeps between forward and backward and the backward's
  // buffers (block.hpp: 13 stream-wide tensors; attention.hpp: q, k, v and their gradients, the
  // context and its gradient, a scratch; feed_forward.hpp: the hidden layer before and after
  // the activation and its gradient), rounded up: 24 d + 4 d_ff, and the attention
  // probabilities, heads x seq per token, with room for their gradient.
  const double per_block = 24.0 * d + 4.0 * d_ff + 2.0 * heads * seq;
  // The model's own: the embedded input, the logits and their gradient, the stack's output and
  // its gradient, the final norm's.
  const double per_model = 6.0 * d + 3.0 * vocab;
  const double floats = 4.0 * weights + tokens * (depth * per_block + per_model);
  constexpr double kPerRun = 1 << 20;  // the run's record, generators, small buffers
  return 4.0 * floats + kPerRun;
}

double training_peak_bytes(const lab::DepthTrainingParams& p, int runs_at_once) {
  std::vector<double> runs;
  for (size_t i = 0; i < p.placements.size() * p.warmups.size(); ++i) {
    for (int depth : p.depths) {
      for (int s = 0; s < p.seeds; ++s) runs.push_back(training_run_bytes(p, depth));
    }
  }
  std::sort(runs.begin(), runs.end(), std::greater<>());
  const size_t at_once = std::min(runs.size(), static_cast<size_t>(std::max(1, runs_at_once)));
  double bytes = 0.0;
  for (size_t i = 0; i < at_once; ++i) bytes += runs[i];
  return bytes;
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
