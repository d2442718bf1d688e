// The checks every request passes before it is routed and before its body is read: which host
// and origin it is addressed from, how its body is framed, and whether it may start work. They
// are the lab server's defence against other web pages in the user's browser (DNS rebinding,
// cross-origin "simple" requests) and against bodies too large to hold (docs/security.md).
//
// Plain values in, a refusal (or none) out: the rules are tested and fuzzed without a socket.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace addnorm::server {

// What the guard reads of a request: its line and the headers that matter, as sent.
struct RequestHead {
  std::string method;
  std::string path;
  std::string host;               // the Host header
  std::string origin;             // the Origin header, "" when absent
  std::string content_type;       // "" when absent
  std::string content_length;     // "" when absent
  std::string transfer_encoding;  // "" when absent
  std::string content_encoding;   // "" when absent
  // How many times Host and Content-Length were sent. httplib reads the first of each; a
  // second one is where a proxy in front and this server could disagree (request smuggling,
  // a Host check passed by one value and routing by another), so any repeat is refused.
  size_t host_fields = 1;
  size_t content_length_fields = 0;  // 0 when content_length is "", else at least 1
};

struct RequestRefusal {
  int status;
  std::string message;
  std::string parameter;  // the part of the request at fault ("body", "Host", ...)
};

struct GuardPolicy {
  // Exact "host:port" values a Host header may carry (lower case), e.g. "127.0.0.1:8787" and
  // "localhost:8787". Empty: any Host (the server was told to listen beyond loopback).
  std::vector<std::string> allowed_hosts;
  size_t max_body_bytes = 0;
  // The paths that run something (the experiments, training, stopping a job). They take only
  // POST with a JSON body type, which a page on another origin cannot send without a CORS
  // preflight, and this server never answers a preflight with a yes.
  std::vector<std::string> work_paths;
};

// The allowed Host values for a server bound to `bound_host`:`port`: the bound address and
// "localhost" when it is a loopback address, none (any) otherwise.
std::vector<std::string> allowed_hosts_for(const std::string& bound_host, int port);

// The refusal for this request, or nothing when it may be routed.
std::optional<RequestRefusal> check_request(const RequestHead& head, const GuardPolicy& policy);

// Whether httplib may apply the request's Range header (`ranges`: how many ranges it parsed).
// Only one range, and only on a page file: httplib serves any number of ranges, overlapping
// ones included, each a copy of the body (2,700 times "0-" made a 51 MB answer from a 19 KB
// file), and it slices API answers, errors included, by the range too. Otherwise the header is
// ignored and the whole answer sent, as RFC 9110 (section 14.2) lets a server do.
bool honour_ranges(const std::string& method, const std::string& path, size_t ranges);

}  // namespace addnorm::server
