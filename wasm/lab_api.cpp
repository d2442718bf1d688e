// The lab's JSON API inside the page: the experiments the server answers at /api/<name>
// (src/server/experiment_endpoints.cpp) and the training stream of /api/train
// (src/server/training_stream.cpp), compiled to WebAssembly and called from JavaScript with the
// same JSON in and out. No HTTP and no threads: the page runs each call in a Web Worker
// (web/js/wasm_worker.js), which is how it stops one (it ends the worker).
#include <emscripten/emscripten.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "addnorm/lab/depth_training.hpp"
#include "lab/json_text.hpp"
#include "server/api_error.hpp"
#include "server/experiment_endpoints.hpp"
#include "server/job_board.hpp"
#include "server/json_body.hpp"
#include "server/training_stream.hpp"
#include "server/work_limits.hpp"

namespace addnorm::server {
namespace {

// The page's limits: the server's per-request limits, with a memory budget a 32-bit WebAssembly
// heap can hold (it grows to 2 GiB at most).
TrainingLimits browser_limits() {
  TrainingLimits limits;
  limits.max_job_bytes = 1.0 * (1ull << 30);
  limits.max_total_bytes = limits.max_job_bytes;
  return limits;
}

// A heap copy of `text` for JavaScript, which frees it with addnorm_free.
char* to_caller(const std::string& text) {
  char* copy = static_cast<char*>(std::malloc(text.size() + 1));
  if (copy != nullptr) std::memcpy(copy, text.c_str(), text.size() + 1);
  return copy;
}

std::string answer(int status, const nlohmann::json& body) {
  return lab::dump_json_safely({{"status", status}, {"body", body}});
}

const ExperimentEndpoint* find_endpoint(const std::string& name) {
  for (const ExperimentEndpoint& endpoint : experiment_endpoints()) {
    if (endpoint.name == name) return &endpoint;
  }
  return nullptr;
}

std::string call(const std::string& name, const std::string& body) {
  const ExperimentEndpoint* endpoint = find_endpoint(name);
  if (endpoint == nullptr) {
    return answer(404, error_body("no API endpoint /api/" + name, {}));
  }
  try {
    const nlohmann::json params = parse_request_body(body);
    const TrainingLimits limits = browser_limits();
    if (endpoint->peak_bytes)
      check_training_memory(endpoint->peak_bytes(params, limits, 1), limits);
    return answer(200, endpoint->run(params, limits, {}));
  } catch (...) {
    const ErrorAnswer failure = answer_for_current_exception(endpoint->keys);
    return answer(failure.status, failure.body);
  }
}

// Hands one training event to the worker's JavaScript (globalThis.addnormEvent), which posts it
// to the page as it comes.
EM_JS(void, post_event, (const char* name, const char* data),
      { globalThis.addnormEvent(UTF8ToString(name), UTF8ToString(data)); });

std::string train(const std::string& body) {
  try {
    const lab::DepthTrainingParams params =
        checked_streamed_training(parse_request_body(body), browser_limits()).params;
    // One job, never stopped from inside: the page ends the worker to stop it.
    Job job(1, "training", std::chrono::hours(24));
    stream_training(params, job, [](const std::string& event, const nlohmann::json& data) {
      post_event(event.c_str(), lab::dump_json_safely(data).c_str());
      return true;
    });
    return answer(200, nlohmann::json::object());
  } catch (...) {
    const ErrorAnswer failure = answer_for_current_exception(depth_training_keys());
    return answer(failure.status, failure.body);
  }
}

}  // namespace
}  // namespace addnorm::server

extern "C" {

// POST /api/<name> with `body`: {"status": <HTTP status>, "body": <the server's JSON answer>}.
EMSCRIPTEN_KEEPALIVE char* addnorm_lab_call(const char* name, const char* body) {
  return addnorm::server::to_caller(addnorm::server::call(name, body));
}

// POST /api/train with `body`: the stream's events go to globalThis.addnormEvent(name, json) as
// they come; then the answer, {"status": 200, "body": {}} or an error as addnorm_lab_call's.
EMSCRIPTEN_KEEPALIVE char* addnorm_lab_train(const char* body) {
  return addnorm::server::to_caller(addnorm::server::train(body));
}

EMSCRIPTEN_KEEPALIVE void addnorm_free(char* text) {
  std::free(text);
}
}
