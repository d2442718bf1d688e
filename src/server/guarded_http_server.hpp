// httplib's server with its connection handling replaced: each connection's head is read here,
// within HeadLimits and a deadline, before httplib sees a byte of it; a head past the limits is
// answered 431 here; httplib then reads the request from a BoundedStream (bounded_stream.hpp),
// which ends where the declared body ends. One request per connection.
//
// httplib 0.11 declares Server::process_and_close_socket virtual (for its TLS server); Debian's
// compiled library calls it through the vtable, so this override runs for every connection.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>

#include "server/raw_head.hpp"

namespace addnorm::server {

struct ConnectionLimits {
  HeadLimits head;
  size_t max_body_bytes = 256 * 1024;
  std::chrono::milliseconds read_timeout{5000};   // the longest wait for a request's next bytes
  std::chrono::milliseconds write_timeout{5000};  // the longest wait to send
  // The whole head must arrive within this: a client that sends a byte every few seconds keeps
  // a connection thread for this long at most, not for as long as it likes.
  std::chrono::milliseconds head_deadline{10000};
};

class GuardedHttpServer : public httplib::Server {
 public:
  // `stopping`: the owner's stop flag; once set, every wait on a client gives up.
  GuardedHttpServer(ConnectionLimits limits, const std::atomic<bool>& stopping);

 private:
  bool process_and_close_socket(socket_t sock) override;

  ConnectionLimits limits_;
  const std::atomic<bool>& stopping_;
};

// Whether the client of the request this thread is serving has closed its side (a handler of
// long work asks this between steps, and stops). False outside a request.
bool client_has_gone();

}  // namespace addnorm::server
