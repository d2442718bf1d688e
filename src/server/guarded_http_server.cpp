#include "server/guarded_http_server.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "lab/json_text.hpp"
#include "server/api_error.hpp"
#include "server/bounded_stream.hpp"
#include "server/request_guard.hpp"

namespace addnorm::server {
namespace {

// The connection this thread serves, for client_has_gone(); -1 outside a request.
thread_local int current_socket = -1;

constexpr size_t kReadChunk = 4096;
// After the answer: how long, and how much, to read what the client still sends before
// closing. Closing with unread bytes makes the kernel reset the connection, and a client that
// was still sending (a refused oversized head) would then lose the answer.
constexpr std::chrono::milliseconds kLingerTime{500};
constexpr size_t kLingerBytes = 1 << 20;

void send_all(int socket, const std::string& text, const std::atomic<bool>& stopping,
              std::chrono::milliseconds timeout) {
  size_t sent = 0;
  while (sent < text.size() && wait_for_socket(socket, POLLOUT, timeout, stopping)) {
    const ssize_t n = ::send(socket, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// The answer to a head past the limits, written here because httplib never sees the request.
std::string head_refusal(const RawHead& head, const HeadLimits& limits) {
  std::string status = "431 Request Header Fields Too Large", message, part = "headers";
  switch (head.state) {
    case RawHead::State::too_many_fields:
      message = "the request has more than " + std::to_string(limits.max_fields) + " header fields";
      break;
    case RawHead::State::line_too_long:
      status = "414 URI Too Long";
      message =
          "the request line is longer than " + std::to_string(limits.max_request_line) + " bytes";
      part = "path";
      break;
    default:
      message = "the request's head (request line and header fields) is larger than " +
                std::to_string(limits.max_bytes) + " bytes";
  }
  const std::string body = lab::dump_json_safely(error_body(message, part));
  return "HTTP/1.1 " + status +
         "\r\nContent-Type: application/json; charset=utf-8\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

void close_after_answer(int socket, const std::atomic<bool>& stopping) {
  ::shutdown(socket, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + kLingerTime;
  char sink[kReadChunk];
  size_t drained = 0;
  while (drained < kLingerBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!wait_for_socket(socket, POLLIN, left, stopping)) break;
    const ssize_t n = ::recv(socket, sink, sizeof sink, 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  ::close(socket);
}

}  // namespace

GuardedHttpServer::GuardedHttpServer(ConnectionLimits limits, const std::atomic<bool>& stopping)
    : limits_(limits), stopping_(stopping) {}

bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  // Answers go out in several writes; without TCP_NODELAY, Nagle's algorithm meets the
  // client's delayed ACK and an answer waits ~40 ms for nothing.
  const int yes = 1;
  ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);

  const auto deadline = std::chrono::steady_clock::now() + limits_.head_deadline;
  std::string received;
  RawHead head;
  char chunk[kReadChunk];
  for (;;) {
    head = scan_head(received, limits_.head);
    if (head.state != RawHead::State::incomplete) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!wait_for_socket(sock, POLLIN, std::min(left, limits_.read_timeout), stopping_)) {
      ::close(sock);  // silent, as httplib is when a head does not come
      return false;
    }
    const ssize_t n = ::recv(sock, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(sock);
      return false;
    }
    received.append(chunk, static_cast<size_t>(n));
  }
  if (head.state != RawHead::State::complete) {
    send_all(sock, head_refusal(head, limits_.head), stopping_, limits_.write_timeout);
    close_after_answer(sock, stopping_);
    return false;
  }

  // The body httplib may read: the declared length when it is within the limit, else none
  // (the request guard refuses such a request before reading; should any path of httplib's
  // read anyway, it finds the end of input).
  const uint64_t body = head.content_length && *head.content_length <= limits_.max_body_bytes
                            ? *head.content_length
                            : 0;
  const size_t body_received =
      static_cast<size_t>(std::min<uint64_t>(received.size() - head.bytes, body));
  std::string request = with_plain_range_only(std::string_view(received).substr(0, head.bytes));
  request.append(received, head.bytes, body_received);
  BoundedStream stream(sock, std::move(request), body - body_received,
                       {limits_.read_timeout, limits_.write_timeout}, stopping_);
  struct Serving {  // current_socket for exactly as long as the request is served
    explicit Serving(int socket) { current_socket = socket; }
    ~Serving() { current_socket = -1; }
  };
  bool ok = false;
  {
    const Serving serving(sock);
    bool connection_closed = false;
    ok = process_request(stream, /*close_connection=*/true, connection_closed,
                         [](httplib::Request& req) {
                           if (!honour_ranges(req.method, req.path, req.ranges.size())) {
                             req.ranges.clear();
                           }
                         });
  }
  close_after_answer(sock, stopping_);
  return ok;
}

bool client_has_gone() {
  if (current_socket < 0) return false;
  pollfd entry{current_socket, POLLIN | POLLRDHUP, 0};
  if (::poll(&entry, 1, 0) <= 0) return false;
  if (entry.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  // Readable: either more bytes (not a sign of leaving) or the end of the stream.
  char byte = 0;
  return ::recv(current_socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace addnorm::server
