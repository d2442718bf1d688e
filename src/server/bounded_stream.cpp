#include "server/bounded_stream.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace addnorm::server {
namespace {

// How often a wait looks at the stop flag.
constexpr std::chrono::milliseconds kStopCheck{100};

void address_of(const sockaddr_storage& address, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    port = ntohs(v4.sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    port = ntohs(v6.sin6_port);
  }
  ip = text;
}

}  // namespace

bool wait_for_socket(int socket, short events, std::chrono::milliseconds timeout,
                     const std::atomic<bool>& stopping) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (stopping.load()) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd entry{socket, events, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::min(left, kStopCheck).count()));
    if (ready < 0 && errno != EINTR) return false;
    if (ready > 0) return (entry.revents & (events | POLLHUP | POLLERR)) != 0;
  }
}

BoundedStream::BoundedStream(int socket, std::string received, uint64_t more, Timeouts timeouts,
                             const std::atomic<bool>& stopping)
    : socket_(socket),
      received_(std::move(received)),
      more_(more),
      timeouts_(timeouts),
      stopping_(stopping) {}

bool BoundedStream::is_readable() const {
  if (offset_ < received_.size()) return true;
  return more_ > 0 && wait_for_socket(socket_, POLLIN, timeouts_.read, stopping_);
}

bool BoundedStream::is_writable() const {
  // Writes do not watch the stop flag: an answer under way (a stopped run's last events, say)
  // still goes out when the server stops, waiting at most the write timeout for a client that
  // does not read.
  static const std::atomic<bool> never{false};
  return wait_for_socket(socket_, POLLOUT, timeouts_.write, never);
}

ssize_t BoundedStream::read(char* ptr, size_t size) {
  if (offset_ < received_.size()) {
    const size_t n = std::min(size, received_.size() - offset_);
    std::memcpy(ptr, received_.data() + offset_, n);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }
  if (more_ == 0) return 0;  // the end of what this request may read
  if (!wait_for_socket(socket_, POLLIN, timeouts_.read, stopping_)) return -1;
  const size_t wanted = static_cast<size_t>(std::min<uint64_t>(size, more_));
  ssize_t n = 0;
  do {
    n = ::recv(socket_, ptr, wanted, 0);
  } while (n < 0 && errno == EINTR);
  if (n > 0) more_ -= static_cast<uint64_t>(n);
  return n;
}

ssize_t BoundedStream::write(const char* ptr, size_t size) {
  if (!is_writable()) return -1;
  ssize_t n = 0;
  do {
    n = ::send(socket_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

void BoundedStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getpeername(socket_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    address_of(address, ip, port);
  }
}

void BoundedStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(socket_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    address_of(address, ip, port);
  }
}

}  // namespace addnorm::server
