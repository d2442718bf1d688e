#include "server/json_body.hpp"

#include "server/api_error.hpp"

namespace addnorm::server {

nlohmann::json parse_request_body(const std::string& body) {
  if (body.empty()) return nlohmann::json::object();
  // The parser reports a list or object as it opens with the depth of its parent (0 for the
  // outermost), so the 17th level opens at depth 16. (Testing every event with "> 16" let a
  // 17-deep body through: issue 37.)
  const auto depth_limit = [](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    const bool opens = event == nlohmann::json::parse_event_t::array_start ||
                       event == nlohmann::json::parse_event_t::object_start;
    if (opens && depth >= kMaxJsonDepth) {
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
