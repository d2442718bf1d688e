// The long jobs the server runs (training streams, the transformer experiments): at most a few at
// once, each with an id, a deadline and a stop flag. A request that would start one more than
// allowed is refused rather than queued, so the machine never disappears under runs nobody is
// watching; stop() and the deadline end a job at its next check.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace addnorm::server {

class Job {
 public:
  Job(int64_t id, std::string kind, std::chrono::steady_clock::duration time_limit);

  int64_t id() const { return id_; }
  const std::string& kind() const { return kind_; }
  double elapsed_seconds() const;

  void request_stop(const std::string& reason);
  // "" while the job may go on; otherwise why it must end (a stop request or the time limit).
  std::string stop_reason() const;

 private:
  int64_t id_;
  std::string kind_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::steady_clock::duration time_limit_;
  mutable std::mutex mutex_;
  std::string stop_reason_;
};

class JobBoard {
 public:
  JobBoard(int max_jobs, std::chrono::steady_clock::duration time_limit);

  // A new job, or nullptr when max_jobs are running. The job leaves the board when the last
  // shared_ptr to it goes.
  std::shared_ptr<Job> start(const std::string& kind);
  // Asks job `id` to stop; false when there is no such job.
  bool stop(int64_t id, const std::string& reason);
  void stop_all(const std::string& reason);
  nlohmann::json list() const;

  int max_jobs() const { return max_jobs_; }
  double time_limit_seconds() const;

 private:
  void remove(int64_t id);
  std::vector<std::shared_ptr<Job>> running() const;

  int max_jobs_;
  std::chrono::steady_clock::duration time_limit_;
  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<Job>> jobs_;
  int64_t next_id_ = 1;
};

}  // namespace addnorm::server
