#include "server/work_limits.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "server/api_error.hpp"

namespace addnorm::server {
namespace {

// The weights of one run's blocks: attention's four d x d projections and the FFN's two
// d x d_ff matrices per block.
double block_weights(const lab::DepthTrainingParams& p, int depth) {
  const double d = p.shape.d_model, d_ff = p.shape.d_ff;
  return depth * (4.0 * d * d + 2.0 * d * d_ff);
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

}  // namespace addnorm::server
