// Fuzzes what the lab server does with a request before any experiment runs: the request guard
// (Host, Origin, framing, size, method and type), the body's JSON parse with its depth limit,
// and JsonParams reading every kind of field the experiments declare from the parsed object,
// with the messages a refusal produces. The input is split into header values and a body at
// newlines: method, path, Host, Origin, Content-Type, Content-Length, Transfer-Encoding, body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "lab/json_params.hpp"
#include "lab/json_text.hpp"
#include "server/api_error.hpp"
#include "server/json_body.hpp"
#include "server/request_guard.hpp"

namespace {

std::string next_line(const std::string& text, size_t& at) {
  const size_t end = text.find('\n', at);
  std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  at = end == std::string::npos ? text.size() : end + 1;
  return line;
}

// Every field type an experiment's parameters use.
void read_every_kind(const nlohmann::json& object) {
  addnorm::lab::JsonParams params(object, "fuzz");
  int width = 0;
  int64_t steps = 0;
  uint64_t seed = 0;
  float eps = 0.0f;
  double lr = 0.0;
  bool quick = false;
  std::string preset;
  std::vector<int> depths;
  std::vector<double> x;
  std::vector<std::string> modes;
  std::vector<bool> warmups;
  params.read("width", width);
  params.read("steps", steps);
  params.read("seed", seed);
  params.read("eps", eps);
  params.read("lr", lr);
  params.read("quick", quick);
  params.read("preset", preset);
  params.read("depths", depths);
  params.read("x", x);
  params.read("modes", modes);
  params.read("warmups", warmups);
  params.finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  size_t at = 0;
  addnorm::server::RequestHead head;
  head.method = next_line(text, at);
  head.path = next_line(text, at);
  head.host = next_line(text, at);
  head.origin = next_line(text, at);
  head.content_type = next_line(text, at);
  head.content_length = next_line(text, at);
  head.transfer_encoding = next_line(text, at);
  const std::string body = text.substr(at);

  addnorm::server::GuardPolicy policy;
  policy.allowed_hosts = addnorm::server::allowed_hosts_for("127.0.0.1", 8787);
  policy.max_body_bytes = 262144;
  policy.work_paths = {"/api/gradient-flow", "/api/train"};
  if (const auto refusal = addnorm::server::check_request(head, policy)) {
    (void)addnorm::lab::dump_json_safely(
        addnorm::server::error_body(refusal->message, refusal->parameter));
  }
  try {
    const nlohmann::json params = addnorm::server::parse_request_body(body);
    (void)addnorm::lab::describe_json_value(params);
    read_every_kind(params);
  } catch (const addnorm::server::ApiError& e) {
    (void)addnorm::lab::dump_json_safely(addnorm::server::error_body(e.what(), e.parameter()));
  } catch (const addnorm::Error& e) {
    (void)addnorm::lab::dump_json_safely(addnorm::server::error_body(e.what(), ""));
  }
  return 0;
}
