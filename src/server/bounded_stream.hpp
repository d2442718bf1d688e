// The stream httplib reads a request from and writes its answer to, in place of its own socket
// stream: it hands out the head the server has already read and checked (raw_head.hpp), then at
// most the body length that head declared (never more than the body limit), then end of input.
// So whatever httplib does with a request, with a length or without, chunked or not, it cannot
// read more than head + body limit bytes of it: the memory bound holds by construction, not by
// each of httplib's reading paths agreeing with the request guard.
//
// Every wait to read is cut into short slices that look at the server's stop flag, so a
// client that sends a byte now and then cannot hold up a server that is shutting down.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace addnorm::server {

// Waits until `socket` is ready for `events` (POLLIN, POLLOUT); false on timeout, error, or
// once `stopping` is set.
bool wait_for_socket(int socket, short events, std::chrono::milliseconds timeout,
                     const std::atomic<bool>& stopping);

class BoundedStream : public httplib::Stream {
 public:
  struct Timeouts {
    std::chrono::milliseconds read;   // the longest wait for the next bytes of the body
    std::chrono::milliseconds write;  // the longest wait for room to send
  };
  // `received`: the bytes already read (the head, maybe some of the body); `more`: how many more
  // the request may still read from the socket.
  BoundedStream(int socket, std::string received, uint64_t more, Timeouts timeouts,
                const std::atomic<bool>& stopping);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  using httplib::Stream::write;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return socket_; }

 private:
  int socket_;
  std::string received_;
  size_t offset_ = 0;  // into received_
  uint64_t more_;
  Timeouts timeouts_;
  const std::atomic<bool>& stopping_;
};

}  // namespace addnorm::server
