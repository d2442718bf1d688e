#include "server/compute_pool.hpp"

#include <omp.h>

#include <algorithm>
#include <string>
#include <system_error>

#include "addnorm/error.hpp"

namespace addnorm::server {

int threads_per_worker(int workers) {
  return std::max(1, omp_get_num_procs() / std::max(1, workers));
}

ComputePool::ComputePool(int workers, int team, size_t max_queued)
    : team_(std::max(1, team)), max_queued_(max_queued) {
  // One level of parallelism: the runs of an experiment over the worker's team, the layers
  // inside a run on their own thread (parallel_runs.hpp). An environment that enables nested
  // regions (OMP_MAX_ACTIVE_LEVELS) would otherwise give every team thread a team of its own.
  omp_set_max_active_levels(1);
  std::string failure;
  for (int i = 0; i < workers; ++i) {
    try {
      threads_.emplace_back([this] { work(); });
    } catch (const std::system_error& e) {
      failure = e.what();
      break;
    }
  }
  if (threads_.empty()) {
    throw Error("cannot start the lab server's job workers (" + failure +
                "): the process or user thread limit (ulimit -u) leaves none");
  }
  // Serve only once every worker's OpenMP team exists: if the system refuses one of those
  // threads, libgomp ends the process, and that must happen here at start, never mid-request.
  std::unique_lock lock(mutex_);
  started_cv_.wait(lock, [this] { return started_ == static_cast<int>(threads_.size()); });
}

ComputePool::~ComputePool() {
  shutdown();
}

bool ComputePool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(task));
  }
  ready_.notify_one();
  return true;
}

void ComputePool::shutdown() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    dropped.swap(queue_);
  }
  dropped.clear();  // outside the lock: a task's destructor may report that it never ran
  ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void ComputePool::work() {
  // This thread's team size (an OpenMP per-thread setting), and the team itself, made now by
  // a region that counts its threads; libgomp keeps the team for the regions of every later
  // task. (GCC drops an empty region entirely, so the region must do something.)
  omp_set_num_threads(team_);
  int members = 0;
#pragma omp parallel reduction(+ : members)
  members += 1;
  {
    std::lock_guard lock(mutex_);
    ++started_;
    team_threads_ += members;
  }
  started_cv_.notify_all();
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
    task = nullptr;  // before waiting again: the task's captures (a job, its budget) go now
  }
}

}  // namespace addnorm::server
