// The lab server's connections, one thread each, up to a cap. httplib's own pool has a fixed
// number of threads, each held by one connection until it ends: 20 clients that send a byte now
// and then (slowloris) held all 16 and the page got no answer. Here a new connection gets a
// thread of its own while fewer than `max_connections` are open; past the cap, connections wait
// in order for one to end (they are queued, not refused, and cost a file descriptor each).
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace addnorm::server {

class ConnectionPool : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(size_t max_connections);
  ~ConnectionPool() override;

  void enqueue(std::function<void()> connection) override;
  void shutdown() override;

 private:
  void serve();

  const size_t max_connections_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> waiting_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace addnorm::server
