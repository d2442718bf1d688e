#include "server/connection_pool.hpp"

#include <system_error>

namespace addnorm::server {

ConnectionPool::ConnectionPool(size_t max_connections) : max_connections_(max_connections) {}

ConnectionPool::~ConnectionPool() {
  shutdown();
}

void ConnectionPool::enqueue(std::function<void()> connection) {
  std::unique_lock lock(mutex_);
  waiting_.push_back(std::move(connection));
  // Threads start on demand and then stay for later connections.
  if (idle_ < waiting_.size() && threads_.size() < max_connections_) {
    try {
      threads_.emplace_back([this] { serve(); });
      ++idle_;
    } catch (const std::system_error&) {
      // No thread to be had (a process or user thread limit): this is called from httplib's
      // accept loop, where the exception would end the server. The connection waits for a
      // running thread instead; with none at all, it is served here, holding up accepts.
      if (threads_.empty()) {
        std::function<void()> now = std::move(waiting_.back());
        waiting_.pop_back();
        lock.unlock();
        now();
        return;
      }
    }
  }
  ready_.notify_one();
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void ConnectionPool::serve() {
  for (;;) {
    std::function<void()> connection;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
      // Connections already accepted are still served when the server stops.
      if (waiting_.empty()) return;
      connection = std::move(waiting_.front());
      waiting_.pop_front();
      --idle_;
    }
    connection();
    std::lock_guard lock(mutex_);
    ++idle_;
  }
}

}  // namespace addnorm::server
