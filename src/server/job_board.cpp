// The board of running jobs: admission, stop requests and deadlines.
#include "server/job_board.hpp"

#include <algorithm>

namespace addnorm::server {

Job::Job(int64_t id, std::string kind, std::chrono::steady_clock::duration time_limit)
    : id_(id),
      kind_(std::move(kind)),
      started_(std::chrono::steady_clock::now()),
      deadline_(started_ + time_limit),
      time_limit_(time_limit) {}

double Job::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void Job::request_stop(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (stop_reason_.empty()) stop_reason_ = reason;
}

std::string Job::stop_reason() const {
  {
    std::lock_guard lock(mutex_);
    if (!stop_reason_.empty()) return stop_reason_;
  }
  if (std::chrono::steady_clock::now() >= deadline_) {
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(time_limit_).count();
    return "time limit of " + std::to_string(seconds) + " s reached";
  }
  return {};
}

JobBoard::JobBoard(int max_jobs, std::chrono::steady_clock::duration time_limit)
    : max_jobs_(max_jobs), time_limit_(time_limit) {}

std::shared_ptr<Job> JobBoard::start(const std::string& kind) {
  std::lock_guard lock(mutex_);
  std::erase_if(jobs_, [](const std::weak_ptr<Job>& job) { return job.expired(); });
  if (static_cast<int>(jobs_.size()) >= max_jobs_) return nullptr;
  const int64_t id = next_id_++;
  // The deleter takes the job off the board as soon as its handler lets go of it.
  std::shared_ptr<Job> job(new Job(id, kind, time_limit_), [this](Job* done) {
    remove(done->id());
    delete done;
  });
  jobs_.push_back(job);
  return job;
}

void JobBoard::remove(int64_t id) {
  std::lock_guard lock(mutex_);
  // Only expired entries and this id: lock() here could never be the last owner of another job.
  std::erase_if(jobs_, [id](const std::weak_ptr<Job>& job) {
    const auto alive = job.lock();
    return !alive || alive->id() == id;
  });
}

std::vector<std::shared_ptr<Job>> JobBoard::running() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<Job>> jobs;
  for (const auto& weak : jobs_) {
    if (auto job = weak.lock()) jobs.push_back(std::move(job));
  }
  return jobs;
}

bool JobBoard::stop(int64_t id, const std::string& reason) {
  // The copies are released outside the board's lock: if one of them turns out to be the last
  // owner, its deleter takes the lock to remove the job.
  for (const auto& job : running()) {
    if (job->id() == id) {
      job->request_stop(reason);
      return true;
    }
  }
  return false;
}

void JobBoard::stop_all(const std::string& reason) {
  for (const auto& job : running()) job->request_stop(reason);
}

nlohmann::json JobBoard::list() const {
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& job : running()) {
    jobs.push_back({{"id", job->id()},
                    {"kind", job->kind()},
                    {"elapsed_s", job->elapsed_seconds()},
                    {"stopping", !job->stop_reason().empty()}});
  }
  return jobs;
}

double JobBoard::time_limit_seconds() const {
  return std::chrono::duration<double>(time_limit_).count();
}

}  // namespace addnorm::server
