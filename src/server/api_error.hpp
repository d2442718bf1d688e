// The API's errors: every failure is an HTTP status with a JSON body
//   {"error": "<message the user can act on>", "parameter": "<name>" or null}
// so the page (and any script) can show the message and mark the offending control.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace addnorm::server {

// Thrown by handlers for a request the API refuses; the router turns it into the response.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string parameter = {})
      : std::runtime_error(message), status_(status), parameter_(std::move(parameter)) {}
  int status() const { return status_; }
  const std::string& parameter() const { return parameter_; }

 private:
  int status_;
  std::string parameter_;
};

nlohmann::json error_body(const std::string& message, const std::string& parameter);

// An API failure as the client sees it: the HTTP status and the JSON error body.
struct ErrorAnswer {
  int status;
  nlohmann::json body;
};

// The answer for the exception being handled (call it inside a catch block): an ApiError's own
// status and parameter; 400 for addnorm::Error, naming the one of `keys` its message is about;
// 503 when memory ran out; 500 for anything else. The server (lab_server.cpp) and the page's
// WebAssembly engine (wasm/lab_api.cpp) answer failures through it alike.
ErrorAnswer answer_for_current_exception(const std::vector<std::string>& keys);

// The parameter an experiment's error message is about, or "" when it names none. The lab's
// messages say "<experiment> parameter <key> is ...", "<experiment> has no parameter named
// <key>", or start with the parameter itself ("depths[0] is 0, ...", "table has 7 values, ...",
// "sum(depths) * width^2 is ..."): the first of `keys` among the words before the verb (a
// singular "mode" stands for a list key "modes").
std::string parameter_named_in(const std::string& message, const std::vector<std::string>& keys);

}  // namespace addnorm::server
