// The request guard's rules, request by request, without a socket: Host allow-list (DNS
// rebinding), Origin, body framing and size, and which requests may start work.
#include "server/request_guard.hpp"

#include <gtest/gtest.h>

#include <string>

namespace addnorm::server {
namespace {

GuardPolicy loopback_policy() {
  GuardPolicy policy;
  policy.allowed_hosts = allowed_hosts_for("127.0.0.1", 8787);
  policy.max_body_bytes = 1000;
  policy.work_paths = {"/api/gradient-flow", "/api/train"};
  return policy;
}

RequestHead post_json(const std::string& host = "127.0.0.1:8787") {
  RequestHead head;
  head.method = "POST";
  head.path = "/api/gradient-flow";
  head.host = host;
  head.content_type = "application/json";
  head.content_length = "2";
  return head;
}

int status_of(const RequestHead& head, const GuardPolicy& policy = loopback_policy()) {
  const auto refusal = check_request(head, policy);
  return refusal ? refusal->status : 0;
}

TEST(RequestGuard, AllowedHostsAreTheBoundAddressAndLocalhostWithThePort) {
  EXPECT_EQ(allowed_hosts_for("127.0.0.1", 8787),
            (std::vector<std::string>{"127.0.0.1:8787", "localhost:8787"}));
  EXPECT_EQ(allowed_hosts_for("::1", 80), (std::vector<std::string>{"[::1]:80", "localhost:80"}));
  EXPECT_EQ(allowed_hosts_for("127.0.0.2", 1),
            (std::vector<std::string>{"127.0.0.2:1", "localhost:1"}));
  // Bound beyond loopback (the user asked for it): no Host list to enforce.
  EXPECT_TRUE(allowed_hosts_for("0.0.0.0", 8787).empty());
  EXPECT_TRUE(allowed_hosts_for("192.168.1.5", 8787).empty());
  EXPECT_TRUE(allowed_hosts_for("127.attacker.example", 8787).empty());
}

TEST(RequestGuard, OnlyExactHostsPass) {
  EXPECT_EQ(status_of(post_json("127.0.0.1:8787")), 0);
  EXPECT_EQ(status_of(post_json("localhost:8787")), 0);
  EXPECT_EQ(status_of(post_json("LOCALHOST:8787")), 0);  // host names are case-insensitive
  // Each of these once passed a "starts with 127." test, or names another port or host.
  for (const char* host :
       {"127.attacker.example", "127.0.0.1.nip.io", "127.0.0.1.nip.io:8787", "[::1].evil",
        "127.0.0.1:8788", "127.0.0.1", "localhost", "localhost:8787.evil", "attacker.example:8787",
        "127.0.0.1:8787 ", " 127.0.0.1:8787", "", "127.0.0.1:08787", "[::1]:8787"}) {
    const auto refusal = check_request(post_json(host), loopback_policy());
    ASSERT_TRUE(refusal) << host;
    EXPECT_EQ(refusal->status, 403) << host;
    EXPECT_EQ(refusal->parameter, "Host") << host;
  }
}

TEST(RequestGuard, CrossOriginRequestsAreRefused) {
  RequestHead head = post_json();
  head.origin = "http://127.0.0.1:8787";
  EXPECT_EQ(status_of(head), 0);
  head.origin = "http://localhost:8787";
  EXPECT_EQ(status_of(head), 0);
  for (const char* origin : {"http://attacker.example", "null", "https://127.0.0.1:8787",
                             "http://127.0.0.1:8788", "http://127.0.0.1:8787.evil", "file://"}) {
    head.origin = origin;
    EXPECT_EQ(status_of(head), 403) << origin;
  }
  // Beyond loopback the page's origin must be the address it was fetched from.
  GuardPolicy open = loopback_policy();
  open.allowed_hosts.clear();
  head = post_json("192.168.1.5:8787");
  head.origin = "http://192.168.1.5:8787";
  EXPECT_EQ(status_of(head, open), 0);
  head.origin = "http://attacker.example";
  EXPECT_EQ(status_of(head, open), 403);
}

TEST(RequestGuard, BodiesMustDeclareASizeWithinTheLimit) {
  RequestHead head = post_json();
  head.transfer_encoding = "chunked";
  EXPECT_EQ(status_of(head), 411);
  head.content_length.clear();
  EXPECT_EQ(status_of(head), 411);
  head.transfer_encoding.clear();
  head.content_length = "1000";
  EXPECT_EQ(status_of(head), 0);
  head.content_length = "1001";
  EXPECT_EQ(status_of(head), 413);
  head.content_length = "99999999999999999999999";  // beyond 2^64
  EXPECT_EQ(status_of(head), 400);
  for (const char* length : {"-1", "1e3", "12abc", " 12", "0x10"}) {
    head.content_length = length;
    EXPECT_EQ(status_of(head), 400) << length;
  }
}

TEST(RequestGuard, WorkStartsOnlyFromJsonPosts) {
  RequestHead head = post_json();
  head.method = "GET";
  head.content_type.clear();
  head.content_length.clear();
  EXPECT_EQ(status_of(head), 405);
  head.method = "POST";
  EXPECT_EQ(status_of(head), 415);  // a no-cors fetch can send no JSON type
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                           "application/jsonp", "text/plain; a=application/json"}) {
    head.content_type = type;
    EXPECT_EQ(status_of(head), 415) << type;
  }
  head.content_length = "2";  // (without one, a POST is refused 411 whatever its type)
  for (const char* type :
       {"application/json", "application/json; charset=utf-8", "Application/JSON"}) {
    head.content_type = type;
    EXPECT_EQ(status_of(head), 0) << type;
  }
  // Reading the page and the listings needs no JSON.
  RequestHead page;
  page.method = "GET";
  page.path = "/api/info";
  page.host = "127.0.0.1:8787";
  EXPECT_EQ(status_of(page), 0);
  page.path = "/index.html";
  EXPECT_EQ(status_of(page), 0);
}

// Issue 37's findings on framing: a second Host (the first won) or Content-Length, a body
// without a length (read to the end of the connection), a compressed body (inflated past the
// limit), all refused before the body is read.
TEST(RequestGuard, RepeatedHostOrLengthIsRefused) {
  RequestHead head = post_json();
  head.host_fields = 2;
  auto refusal = check_request(head, loopback_policy());
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->status, 400);
  EXPECT_EQ(refusal->parameter, "Host");
  head.host_fields = 1;
  head.content_length_fields = 2;
  refusal = check_request(head, loopback_policy());
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->status, 400);
  EXPECT_EQ(refusal->parameter, "body");
}

TEST(RequestGuard, BodiesWithoutALengthAreRefused) {
  for (const char* method : {"POST", "PUT", "PATCH"}) {
    RequestHead head = post_json();
    head.method = method;
    head.path = "/anything";
    head.content_length.clear();
    EXPECT_EQ(status_of(head), 411) << method;
    head.content_length = "0";
    EXPECT_EQ(status_of(head), 0) << method;
  }
  RequestHead get;
  get.method = "GET";
  get.path = "/index.html";
  get.host = "127.0.0.1:8787";
  EXPECT_EQ(status_of(get), 0);
}

TEST(RequestGuard, CompressedBodiesAreRefused) {
  RequestHead head = post_json();
  for (const char* encoding : {"gzip", "br", "deflate", "identity"}) {
    head.content_encoding = encoding;
    EXPECT_EQ(status_of(head), 415) << encoding;
  }
}

TEST(RequestGuard, OnlyOneRangeAndOnlyOnPageFiles) {
  EXPECT_TRUE(honour_ranges("GET", "/index.html", 1));
  EXPECT_FALSE(honour_ranges("GET", "/index.html", 0));
  EXPECT_FALSE(honour_ranges("GET", "/index.html", 2));
  EXPECT_FALSE(honour_ranges("GET", "/index.html", 2700));
  EXPECT_FALSE(honour_ranges("GET", "/api/info", 1));  // would slice the JSON, status 200
  EXPECT_FALSE(honour_ranges("POST", "/api/gradient-flow", 1));
}

TEST(RequestGuard, MessagesQuoteHostileValuesShortAndValid) {
  RequestHead head = post_json(std::string(5000, 'a') + "\xff\xfe");
  const auto refusal = check_request(head, loopback_policy());
  ASSERT_TRUE(refusal);
  EXPECT_LT(refusal->message.size(), 200u);
  EXPECT_EQ(refusal->message.find('\xff'), std::string::npos);
}

}  // namespace
}  // namespace addnorm::server
