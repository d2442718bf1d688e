#include "server/json_body.hpp"

#include "server/api_error.hpp"

namespace addnorm::server {

nlohmann::json parse_request_body(const std::string& body) {
  if (body.empty()) return nlohmann::json::object();
  const auto depth_limit = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) {
      throw ApiError(400,
                     "the body nests deeper than " + std::to_string(kMaxJsonDepth) +
                         " levels of lists and objects",
                     "body");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(body, depth_limit);
  } catch (const nlohmann::json::exception& e) {
    // Parse errors quote the text near the fault: keep the message short.
    std::string message = e.what();
    constexpr size_t kMaxMessage = 200;
    if (message.size() > kMaxMessage) message = message.substr(0, kMaxMessage) + "...";
    throw ApiError(400, "the body is not valid JSON: " + message, "body");
  }
}

}  // namespace addnorm::server
