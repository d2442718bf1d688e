// A LabServer on a free loopback port, serving from a thread for the length of a test, and the
// helpers the API tests share.
#pragma once

#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/lab_server.hpp"

namespace addnorm::server::testing {

class RunningLabServer {
 public:
  explicit RunningLabServer(LabServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    server_ = std::make_unique<LabServer>(options);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }
  ~RunningLabServer() {
    server_->stop();
    thread_.join();
  }
  RunningLabServer(const RunningLabServer&) = delete;
  RunningLabServer& operator=(const RunningLabServer&) = delete;

  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(60, 0);
    return client;
  }

 private:
  std::unique_ptr<LabServer> server_;
  int port_ = 0;
  std::thread thread_;
};

// One server-sent event.
struct Event {
  std::string name;
  nlohmann::json data;
};

// Splits a text/event-stream body into its events.
inline std::vector<Event> parse_events(const std::string& stream) {
  std::vector<Event> events;
  size_t start = 0;
  while (start < stream.size()) {
    size_t end = stream.find("\n\n", start);
    if (end == std::string::npos) break;
    Event event;
    const std::string block = stream.substr(start, end - start);
    size_t line_start = 0;
    while (line_start < block.size()) {
      size_t line_end = block.find('\n', line_start);
      if (line_end == std::string::npos) line_end = block.size();
      const std::string line = block.substr(line_start, line_end - line_start);
      if (line.rfind("event: ", 0) == 0) event.name = line.substr(7);
      if (line.rfind("data: ", 0) == 0) event.data = nlohmann::json::parse(line.substr(6));
      line_start = line_end + 1;
    }
    events.push_back(std::move(event));
    start = end + 2;
  }
  return events;
}

}  // namespace addnorm::server::testing
