// A request body as JSON: {} when empty, else parsed with a nesting limit. Any failure (bad
// syntax, invalid UTF-8, a number beyond double's range, nesting too deep) is an ApiError 400
// naming "body", with a message of bounded length.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace addnorm::server {

// Deeper than any experiment's parameters need (a table is a list of lists); the limit keeps a
// hostile body from building a structure that later code would walk recursively.
constexpr int kMaxJsonDepth = 16;

nlohmann::json parse_request_body(const std::string& body);

}  // namespace addnorm::server
