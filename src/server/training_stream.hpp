// Live training for the page's "Deep stacks" widget: the lab's depth-training runs (every
// placement x depth x warmup x seed of a lab::DepthTrainingParams), trained in lock step, one
// optimiser step of each run in turn, with every step's losses sent as an event as soon as it is
// known. The arithmetic is lab::run_depth_training's, step for step, so a finished stream's loss
// curves equal that function's (the API tests check it); only the order of the runs' steps is
// interleaved, which changes nothing because every run has its own model, optimiser and data.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "addnorm/lab/depth_training.hpp"
#include "server/job_board.hpp"
#include "server/work_limits.hpp"

namespace addnorm::server {

// Sends one event (a name and its JSON data); returns false once the client has gone.
using EventSink = std::function<bool(const std::string& event, const nlohmann::json& data)>;

// Events, in order:
//   start    {"job": id, "params": {...}, "chance_loss": ln(symbols),
//             "runs": [{"placement", "depth", "warmup", "seed"}, ...]}
//   step     {"step": n, "loss": [one per run], "grad_norm": [one per run]}  (null once a run
//             has diverged to a non-finite loss)
//   done     {"elapsed_s", "runs": [{"eval_loss", "eval_accuracy", "steps_to_target",
//             "diverged", "examples": [{"tokens", "targets", "predicted"}, ...]}, ...]}
//             (examples: the first held-out sequences, targets and predictions -1 where no
//             answer is asked)
//   stopped  {"reason": "...", "step": last step completed, "elapsed_s"}
// A client that goes away stops the run at the next step: `client_gone` is asked before every
// run's step (an event that cannot be sent says so too).
void stream_training(const lab::DepthTrainingParams& params, Job& job, const EventSink& emit,
                     const std::function<bool()>& client_gone = {});

}  // namespace addnorm::server
