// The connection layer's head limits (src/server/raw_head.cpp), byte by byte without a socket:
// where a head ends (as httplib reads it), how many fields and bytes it may have, and which
// Content-Length bounds the body httplib may read. Issue 37: a million header fields were read
// and served; a head of any size was held.
#include "server/raw_head.hpp"

#include <gtest/gtest.h>

#include <string>

#include "server/api_error.hpp"
#include "server/json_body.hpp"

namespace addnorm::server {
namespace {

using State = RawHead::State;

TEST(RawHead, EndsAtTheFirstEmptyLine) {
  const std::string head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  for (size_t cut = 0; cut < head.size(); ++cut) {
    EXPECT_EQ(scan_head(head.substr(0, cut), {}).state, State::incomplete) << cut;
  }
  const RawHead whole = scan_head(head + "body bytes", {});
  EXPECT_EQ(whole.state, State::complete);
  EXPECT_EQ(whole.bytes, head.size());
  EXPECT_EQ(whole.fields, 1u);
  // A bare LF line is no end for httplib (it skips such lines), so none for us either.
  EXPECT_EQ(scan_head("GET / HTTP/1.1\r\nHost: a\r\n\n", {}).state, State::incomplete);
}

TEST(RawHead, FieldsAndBytesAreCapped) {
  HeadLimits limits;
  limits.max_fields = 3;
  limits.max_bytes = 200;
  std::string head = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 3; ++i) head += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(scan_head(head + "\r\n", limits).state, State::complete);
  // The fourth field is refused as soon as it is seen, before the head ends.
  EXPECT_EQ(scan_head(head + "X-3: v\r\n", limits).state, State::too_many_fields);
  // 200 bytes without an end: refused, whatever follows.
  EXPECT_EQ(scan_head("GET /" + std::string(194, 'a'), limits).state, State::incomplete);
  EXPECT_EQ(scan_head("GET /" + std::string(195, 'a'), limits).state, State::too_large);
  EXPECT_EQ(scan_head("GET / HTTP/1.1\r\nX: " + std::string(10000, 'a') + "\r\n\r\n", limits).state,
            State::too_large);
  // The defaults are those docs/security.md promises.
  EXPECT_EQ(HeadLimits{}.max_fields, 100u);
  EXPECT_EQ(HeadLimits{}.max_bytes, 16384u);
}

TEST(RawHead, TheFirstPlainContentLengthBoundsTheBody) {
  const auto length_of = [](const std::string& fields) {
    return scan_head("POST / HTTP/1.1\r\n" + fields + "\r\n", {}).content_length;
  };
  EXPECT_EQ(length_of("Content-Length: 12\r\n"), 12u);
  EXPECT_EQ(length_of("content-length:\t7 \r\n"), 7u);
  EXPECT_EQ(length_of("Content-Length: 3\r\nContent-Length: 900\r\n"), 3u);
  EXPECT_FALSE(length_of("Host: a\r\n"));
  for (const char* bad : {"-1", "0x10", "1e3", "%31", "", "99999999999999999999999"}) {
    EXPECT_FALSE(length_of(std::string("Content-Length: ") + bad + "\r\n")) << bad;
  }
  // A line httplib skips (no CR) is not the length either.
  EXPECT_FALSE(length_of("Content-Length: 5\n"));
}

TEST(RawHead, RequestLinesAreShort) {
  HeadLimits limits;
  const std::string line =
      "GET /" + std::string(limits.max_request_line - 15, 'a') + " HTTP/1.1\r\n";
  ASSERT_EQ(line.size(), limits.max_request_line + 1);  // the LF is not counted
  EXPECT_EQ(scan_head(line + "\r\n", limits).state, State::complete);
  EXPECT_EQ(scan_head("GET /a" + line.substr(5) + "\r\n", limits).state, State::line_too_long);
  // Known too long before its end arrives.
  EXPECT_EQ(scan_head("GET /" + std::string(2000, 'a'), limits).state, State::line_too_long);
}

TEST(RawHead, OnlyOnePlainRangeReachesHttplib) {
  const std::string start = "GET /index.html HTTP/1.1\r\nHost: a\r\n";
  const std::string end = "Accept: */*\r\n\r\n";
  for (const char* kept : {"bytes=0-9", "bytes=100-", "bytes=-500", "bytes=0-999999999999999999"}) {
    const std::string head = start + "Range: " + kept + "\r\n" + end;
    EXPECT_EQ(with_plain_range_only(head), head) << kept;
  }
  for (const char* dropped : {"bytes=0-,0-", "bytes=0-1, 2-3", "bytes=0000000000000000000-",
                              "items=0-9", "bytes=a-b", ""}) {
    const std::string head = start + "range: " + dropped + "\r\n" + end;
    EXPECT_EQ(with_plain_range_only(head), start + end) << dropped;
  }
  // Two Range fields, each plain: both go.
  EXPECT_EQ(with_plain_range_only(start + "Range: bytes=0-1\r\nRange: bytes=2-3\r\n" + end),
            start + end);
  EXPECT_EQ(with_plain_range_only(start + end), start + end);
}

// The nesting limit is exactly what docs/security.md says: 16 levels pass, 17 do not (a
// 17-deep body once passed).
TEST(RawHead, JsonBodiesNestAtMostSixteenLevels) {
  const auto nested = [](int levels) {
    return std::string(static_cast<size_t>(levels), '[') +
           std::string(static_cast<size_t>(levels), ']');
  };
  EXPECT_NO_THROW(parse_request_body(nested(kMaxJsonDepth)));
  EXPECT_THROW(parse_request_body(nested(kMaxJsonDepth + 1)), ApiError);
  EXPECT_NO_THROW(parse_request_body("{\"a\":" + nested(kMaxJsonDepth - 1) + "}"));
  EXPECT_THROW(parse_request_body("{\"a\":" + nested(kMaxJsonDepth) + "}"), ApiError);
  EXPECT_EQ(kMaxJsonDepth, 16);
}

}  // namespace
}  // namespace addnorm::server
