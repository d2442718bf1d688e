// The lab experiments the API serves at /api/<name>: each reads its parameters from a JSON
// object (the lab's *_params_from_json: absent keys keep the defaults, unknown keys and wrong
// types are errors), runs the lab function and answers with the lab's to_json of the result. The
// numbers are the library's own: the server adds nothing to them.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "addnorm/lab/progress.hpp"
#include "server/work_limits.hpp"

namespace addnorm::server {

struct ExperimentEndpoint {
  std::string name;         // the path is /api/<name>
  std::string widget;       // what the page uses it for
  bool long_running;        // true: admitted through the job board and time-limited
  nlohmann::json defaults;  // the parameters used when the body is {} or empty
  // Accepted parameter names: the defaults' keys plus options such as "preset" or "quick".
  std::vector<std::string> keys;
  // Parses, validates, checks the server's limits and runs; throws addnorm::Error for a bad
  // parameter and ApiError for one over a limit.
  std::function<nlohmann::json(const nlohmann::json& params, const TrainingLimits& limits,
                               const lab::Progress& progress)>
      run;
  // The request's estimated peak memory in bytes when at most `runs_at_once` of its runs
  // compute at the same time (work_limits.hpp), or empty for the experiments whose own
  // validation keeps them small. Parses, validates and checks the limits as `run` does.
  std::function<double(const nlohmann::json& params, const TrainingLimits& limits,
                       int runs_at_once)>
      peak_bytes = {};
};

const std::vector<ExperimentEndpoint>& experiment_endpoints();
// The request keys of depth training, which /api/train takes too (an error names one of them).
const std::vector<std::string>& depth_training_keys();

}  // namespace addnorm::server
