// The server's limits on the work one request may start, on top of each experiment's own
// validation (which caps the arithmetic of one run): every training run's model lives in memory
// at once, so their number and size are capped. One check, applied by every endpoint that trains
// (POST /api/train and POST /api/depth-training), before a job slot is taken.
//
// Memory (issue 37): the weight cap says nothing of activations, which grow with batch x length
// (d_model 512, d_ff 2048, batch 256, length 32 once peaked at 7.85 GB). So a training request's
// peak memory is estimated from its parameters before it starts: over the per-job budget it is
// refused (400, the estimate in the message); the estimates of running jobs together stay within
// the server's budget (503 while it is in use).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "addnorm/lab/depth_training.hpp"

namespace addnorm::server {

struct TrainingLimits {
  int max_runs = 12;            // placements x depths x warmups x seeds
  double max_parameters = 2e7;  // block weights summed over the runs
  // Estimated peak bytes: one request's, and all running requests' together. The defaults fit
  // a 24 GB machine running the default 3 jobs with room to spare for everything else.
  double max_job_bytes = 4.0 * (1ull << 30);
  double max_total_bytes = 8.0 * (1ull << 30);
};

// Throws ApiError (400, naming the parameter) when the request is over a limit.
void check_training_limits(const lab::DepthTrainingParams& params, const TrainingLimits& limits);

// An upper bound (within ~2x, docs/security.md has the measurements) of the memory one training
// run of `depth` blocks holds at its peak: weights, their gradients and Adam's two moments, and
// every tensor the model keeps from its forward for the backward, and the backward's own.
double training_run_bytes(const lab::DepthTrainingParams& params, int depth);
// The request's peak: the runs that hold their memory at the same time, at most
// `runs_at_once` of them (the largest ones).
double training_peak_bytes(const lab::DepthTrainingParams& params, int runs_at_once);
// Throws ApiError 400 (parameter "batch", the estimate in the message) over max_job_bytes.
void check_training_memory(double bytes, const TrainingLimits& limits);

// The server's memory budget: the estimates of the jobs holding a reservation.
class MemoryBudget {
 public:
  explicit MemoryBudget(double total_bytes) : total_(total_bytes) {}
  // A reservation of `bytes`, released when the last copy of the pointer goes; nullptr when
  // the running jobs' reservations leave less than `bytes` of the budget.
  std::shared_ptr<void> reserve(double bytes);
  double in_use() const;
  double total() const { return total_; }

 private:
  const double total_;
  mutable std::mutex mutex_;
  double in_use_ = 0.0;
};

}  // namespace addnorm::server
