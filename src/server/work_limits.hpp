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
#include <nlohmann/json.hpp>

#include "addnorm/lab/depth_training.hpp"
#include "addnorm/lab/init_gradients.hpp"
#include "addnorm/lab/rank_collapse.hpp"
#include "addnorm/lab/trainability_map.hpp"
#include "addnorm/lab/update_size.hpp"

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

// A depth-training request read the one way every endpoint and face reads it: parsed (a bad key
// is named), validated (lab::validate) and within `limits` (check_training_limits).
lab::DepthTrainingParams checked_training_params(const nlohmann::json& params,
                                                 const TrainingLimits& limits);
// The same for the streamed /api/train (the server's and the WebAssembly page's), whose runs
// step in turn and so all hold their memory at once: that peak, checked against `limits`.
struct StreamedTraining {
  lab::DepthTrainingParams params;
  double peak_bytes;
};
StreamedTraining checked_streamed_training(const nlohmann::json& params,
                                           const TrainingLimits& limits);

// One run of a transformer experiment: a model of `depth` blocks on a batch of the task.
struct RunSize {
  lab::ModelShape shape;
  int length = 0, batch = 0, symbols = 0, depth = 0;
  double weight_copies = 1.0;          // copies of every weight held at once
  double extra_per_block_token = 0.0;  // floats the experiment keeps per block and token
};
// An upper bound (within ~2x, docs/security.md has the measurements) of the memory one run holds
// at its peak: its weights' copies, every tensor the model keeps from its forward for the
// backward, and the backward's own.
double run_bytes(const RunSize& run);
// A training run of `depth` blocks: value, gradient and Adam's two moments of each weight.
double training_run_bytes(const lab::DepthTrainingParams& params, int depth);
// A request's peak: the runs that hold their memory at the same time, at most `runs_at_once` of
// them (the largest ones). One per experiment that builds transformer stacks.
double training_peak_bytes(const lab::DepthTrainingParams& params, int runs_at_once);
double init_gradients_peak_bytes(const lab::InitGradientsParams& params, int runs_at_once);
double update_size_peak_bytes(const lab::UpdateSizeParams& params, int runs_at_once);
double rank_collapse_peak_bytes(const lab::RankCollapseParams& params, int runs_at_once);
double trainability_map_peak_bytes(const lab::TrainabilityMapParams& params, int runs_at_once);
// Throws ApiError 400 (parameter "batch", the estimate in the message) over max_job_bytes.
// Applied to every endpoint that builds transformer stacks (experiment_endpoints.cpp).
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
