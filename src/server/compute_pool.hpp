// The lab server's compute: a fixed set of job workers, started once with the server, on which
// every experiment and training run computes. Connection threads only read requests, hand the
// work over, and wait for (or stream) its result.
//
// Why (issue 37): OpenMP (libgomp) gives every thread that opens a parallel region a team of its
// own and keeps it for the thread's life. When experiments ran on connection threads, threads
// grew to connections x team size (2,051 with OMP_NUM_THREADS=8), and when libgomp could not
// create one it ended the process mid-request. Here each worker's team is created when the
// worker starts, its size set so that all workers together use one team's worth of threads
// (the hardware threads, split between the workers), so the process has at most
// connections + workers x team + a constant threads, and a failure to create one happens at
// start, not in the middle of a request.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace addnorm::server {

// OpenMP threads per worker: the hardware threads this process may use (omp_get_num_procs,
// which follows the CPU affinity mask) divided between the workers, at least 1.
int threads_per_worker(int workers);

class ComputePool {
 public:
  // Starts `workers` threads, each with an OpenMP team of `team` threads (created now). When a
  // thread cannot be created the pool keeps those it has (workers() says how many); with none
  // at all it throws addnorm::Error.
  ComputePool(int workers, int team, size_t max_queued);
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  // Queues `task` for the next free worker; false (and `task` is dropped) when max_queued
  // tasks are already waiting or the pool is shutting down. A task must not throw: it reports
  // its own outcome. A queued task that never runs (shutdown) is destroyed unrun, so tasks
  // that must report something do it from a destructor too.
  bool submit(std::function<void()> task);
  // Drops the queued tasks, lets the running ones finish, and joins the workers.
  void shutdown();

  int workers() const { return static_cast<int>(threads_.size()); }
  int team() const { return team_; }
  // The OpenMP threads the workers' teams hold, counted by each worker at its start (the
  // workers themselves included): workers() x team() unless the runtime gave fewer.
  int team_threads() const { return team_threads_; }
  size_t max_queued() const { return max_queued_; }

 private:
  void work();

  const int team_;
  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  int started_ = 0;       // workers whose OpenMP team exists
  int team_threads_ = 0;  // written before the constructor returns, read-only after
  std::condition_variable started_cv_;
  bool stopping_ = false;
};

}  // namespace addnorm::server
