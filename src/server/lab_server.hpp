// The lab's local web server behind `addnorm lab`: the embedded page and the JSON API over the
// lab's experiments (see docs/web-lab.md). One object owns the HTTP server, its worker threads
// and the board of long jobs; bind() then run() serve until stop() is called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "server/work_limits.hpp"

namespace addnorm::server {

struct LabServerOptions {
  std::string host = "127.0.0.1";      // loopback only unless the user says otherwise
  int port = 8787;                     // 0: any free port (bind() returns it)
  size_t max_body_bytes = 256 * 1024;  // room for 4096 values at full precision
  // Connections served at once, a thread each; more wait their turn. Slow clients hold one each.
  int max_connections = 256;
  std::chrono::seconds read_timeout{5};  // the longest wait for a request's next bytes
  // A request's head: at most this many bytes and header fields (else 431), arriving within
  // head_deadline (else the connection is closed).
  size_t max_head_bytes = 16 * 1024;
  size_t max_header_fields = 100;
  size_t max_request_line = 1024;  // else 414
  std::chrono::seconds head_deadline{10};
  int max_jobs = 3;  // training streams and long experiments running at once
  // Every experiment computes on one of max_jobs + 1 job workers started with the server, never
  // on a connection thread (the extra one keeps quick experiments from waiting behind long
  // runs); each worker's OpenMP team has this many threads (0: the hardware threads divided
  // between the workers, at least 1). Requests wait for a free worker in a
  // queue of at most max_queued; past that they are answered 503 with Retry-After.
  int threads_per_job = 0;
  size_t max_queued = 64;
  std::chrono::seconds job_time_limit{120};
  TrainingLimits training;
};

bool is_loopback_host(const std::string& host);

class LabServer {
 public:
  explicit LabServer(LabServerOptions options = {});
  ~LabServer();
  LabServer(const LabServer&) = delete;
  LabServer& operator=(const LabServer&) = delete;

  // Binds the listening socket; returns the port. Throws addnorm::Error when it cannot.
  int bind();
  // Serves until stop(); returns false if the server failed.
  bool run();
  // Stops every job, then the server; safe from any thread, and more than once.
  void stop();

  const LabServerOptions& options() const;
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace addnorm::server
