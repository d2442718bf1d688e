// The limits a request's head (its request line and header fields) must keep before httplib
// reads any of it. httplib 0.11 reads a head of any size, any number of fields, and lines of
// any length into memory (a request with a million fields was served, ~100 MB held), and
// Debian's build compiles its limits (CPPHTTPLIB_HEADER_MAX_LENGTH and the like) into the
// shared library, where no macro of ours can change them. So the server reads the head itself,
// up to these limits, and hands httplib only a head that keeps them (guarded_http_server.hpp).
//
// Plain bytes in, a verdict out: tested without a socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace addnorm::server {

struct HeadLimits {
  size_t max_bytes = 16 * 1024;  // request line, fields and the blank line, all together
  size_t max_fields = 100;       // header lines
  // httplib matches the path against its routes with std::regex, which recurses once per
  // character: an 8 KB path left ~4.6 MB of a connection thread's stack touched (resident) for
  // good. The lab's paths are short.
  size_t max_request_line = 1024;
};

struct RawHead {
  enum class State {
    incomplete,       // no end yet, within the limits: read more
    complete,         // `bytes` bytes of head, within the limits
    too_large,        // more than max_bytes without an end
    too_many_fields,  // more than max_fields lines of fields
    line_too_long,    // a request line longer than max_request_line
  };
  State state = State::incomplete;
  size_t bytes = 0;   // the head's length, blank line included (complete only)
  size_t fields = 0;  // header lines seen so far
  // The first Content-Length's value when it is a plain decimal byte count; nothing when it is
  // absent or anything else (the request guard then refuses the request: no body is read).
  std::optional<uint64_t> content_length;
};

// Reads the head at the start of `received` (all bytes received so far) the way httplib does:
// the request line ends at the first LF, each field line at the next, and the head at the
// first line that is exactly CR LF.
RawHead scan_head(std::string_view received, const HeadLimits& limits);

// `head` (a complete head) without its Range fields unless it has exactly one and that one is a
// single short range, "bytes=<0 to 18 digits>-<0 to 18 digits>". httplib parses a Range value
// with std::regex (recursing per character: an 8 KB value touched ~4 MB of stack) and then
// serves every range it lists, overlapping ones included (2,700 times "0-" made a 51 MB
// answer of a 19 KB file). A dropped Range is ignored: the whole answer is sent, as RFC 9110
// (section 14.2) lets a server do.
std::string with_plain_range_only(std::string_view head);

}  // namespace addnorm::server
