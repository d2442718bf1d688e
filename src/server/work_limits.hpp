// The server's limits on the work one request may start, on top of each experiment's own
// validation (which caps the arithmetic of one run): every training run's model lives in memory
// at once, so their number and size are capped. One check, applied by every endpoint that trains
// (POST /api/train and POST /api/depth-training), before a job slot is taken.
#pragma once

#include "addnorm/lab/depth_training.hpp"

namespace addnorm::server {

struct TrainingLimits {
  int max_runs = 12;            // placements x depths x warmups x seeds
  double max_parameters = 2e7;  // block weights summed over the runs
};

// Throws ApiError (400, naming the parameter) when the request is over a limit.
void check_training_limits(const lab::DepthTrainingParams& params, const TrainingLimits& limits);

}  // namespace addnorm::server
