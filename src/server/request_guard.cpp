#include "server/request_guard.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

#include "lab/json_text.hpp"

namespace addnorm::server {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// "localhost", "::1" or an IPv4 address in 127.0.0.0/8 written in full ("127.0.0.1").
bool is_loopback_address(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr address{};
  return inet_pton(AF_INET, host.c_str(), &address) == 1 && (ntohl(address.s_addr) >> 24) == 127;
}

// A header value as it may appear in a message: short and valid UTF-8, whatever was sent.
std::string quoted(const std::string& value) {
  return lab::describe_json_value(value);
}

bool is_media_type(const std::string& content_type, const std::string& expected) {
  // "application/json" or "application/json; charset=utf-8", any case, nothing else.
  const std::string type = lower(content_type.substr(0, content_type.find(';')));
  const size_t first = type.find_first_not_of(" \t");
  const size_t last = type.find_last_not_of(" \t");
  return first != std::string::npos && type.substr(first, last - first + 1) == expected;
}

}  // namespace

std::vector<std::string> allowed_hosts_for(const std::string& bound_host, int port) {
  if (!is_loopback_address(bound_host)) return {};
  std::string suffix(1, ':');  // (":" + to_string trips a GCC 12 -Wrestrict false positive)
  suffix += std::to_string(port);
  std::string address = lower(bound_host);
  if (address == "::1") address = "[::1]";  // how a URL, and so a Host header, writes it
  std::vector<std::string> hosts{address + suffix};
  if (address != "localhost") hosts.push_back("localhost" + suffix);
  return hosts;
}

std::optional<RequestRefusal> check_request(const RequestHead& head, const GuardPolicy& policy) {
  if (head.host_fields > 1) {
    return RequestRefusal{
        400, "the request has " + std::to_string(head.host_fields) + " Host headers, expected one",
        "Host"};
  }
  if (head.content_length_fields > 1) {
    return RequestRefusal{400,
                          "the request has " + std::to_string(head.content_length_fields) +
                              " Content-Length headers, expected at most one",
                          "body"};
  }
  // DNS rebinding: a page from another name that resolves to this machine sends that name.
  if (!policy.allowed_hosts.empty()) {
    const std::string host = lower(head.host);
    if (std::find(policy.allowed_hosts.begin(), policy.allowed_hosts.end(), host) ==
        policy.allowed_hosts.end()) {
      return RequestRefusal{403,
                            "Host " + quoted(head.host) + " is not this server (expected " +
                                policy.allowed_hosts.front() + ")",
                            "Host"};
    }
  }
  // A browser names the page a request comes from; only the lab's own page may use the API.
  if (!head.origin.empty()) {
    const std::string origin = lower(head.origin);
    const bool own =
        policy.allowed_hosts.empty()
            ? origin == "http://" + lower(head.host)
            : std::any_of(policy.allowed_hosts.begin(), policy.allowed_hosts.end(),
                          [&](const std::string& h) { return origin == "http://" + h; });
    if (!own) {
      return RequestRefusal{403, "Origin " + quoted(head.origin) + " is not this server's page",
                            "Origin"};
    }
  }
  // Bodies must say their length up front, so the limit holds before a byte is read; the
  // HTTP library this server uses does not apply its limit to chunked bodies.
  if (!head.transfer_encoding.empty()) {
    return RequestRefusal{411,
                          "Transfer-Encoding " + quoted(head.transfer_encoding) +
                              " is not accepted: send the body with a Content-Length",
                          "body"};
  }
  // httplib inflates a gzip or brotli body before handing it over, with no limit on what it
  // inflates to: 256 KiB on the wire could become gigabytes. The page never compresses.
  if (!head.content_encoding.empty()) {
    return RequestRefusal{415,
                          "Content-Encoding " + quoted(head.content_encoding) +
                              " is not accepted: send the body uncompressed",
                          "body"};
  }
  if (!head.content_length.empty()) {
    uint64_t length = 0;
    const char* begin = head.content_length.data();
    const char* end = begin + head.content_length.size();
    const auto [stop, error] = std::from_chars(begin, end, length);
    if (error != std::errc() || stop != end) {
      return RequestRefusal{400,
                            "Content-Length " + quoted(head.content_length) +
                                " is not a byte count, expected a decimal number",
                            "body"};
    }
    if (length > policy.max_body_bytes) {
      return RequestRefusal{413,
                            "the request body is " + head.content_length +
                                " bytes, larger than the limit of " +
                                std::to_string(policy.max_body_bytes) + " bytes",
                            "body"};
    }
  }
  const bool starts_work = std::find(policy.work_paths.begin(), policy.work_paths.end(),
                                     head.path) != policy.work_paths.end();
  if (starts_work) {
    if (head.method != "POST") {
      return RequestRefusal{
          405, head.method + " " + head.path + " is not accepted: send a POST with a JSON body",
          "method"};
    }
    if (!is_media_type(head.content_type, "application/json")) {
      return RequestRefusal{
          415, "Content-Type is " + quoted(head.content_type) + ", expected application/json",
          "body"};
    }
  }
  // A body with no length at all would be read until the client closes the connection, past
  // any size limit (300 MB were read into memory this way). The connection layer gives httplib
  // no body bytes beyond a declared length anyway (guarded_http_server.cpp); this answers why.
  if (head.content_length.empty() &&
      (head.method == "POST" || head.method == "PUT" || head.method == "PATCH")) {
    return RequestRefusal{411,
                          head.method +
                              " without a Content-Length is not accepted: send the "
                              "body's length (0 for none)",
                          "body"};
  }
  return std::nullopt;
}

bool honour_ranges(const std::string& method, const std::string& path, size_t ranges) {
  return ranges == 1 && method == "GET" && path.rfind("/api/", 0) != 0;
}

}  // namespace addnorm::server
