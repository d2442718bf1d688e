// Issue 37: POST /api/depth-training (one answer at the end, its runs in parallel over OpenMP
// threads) ends within one optimiser step when its job is stopped, reaches its time limit, loses
// its client, or the server stops. The check used to run only between whole runs: a stopped or
// SIGTERMed server computed on for 90 s.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "running_lab_server.hpp"

namespace addnorm::server {
namespace {

using testing::RunningLabServer;
using Clock = std::chrono::steady_clock;

// Four runs of 20000 steps of a small stack: minutes of work, a step of a few milliseconds.
const nlohmann::json kLongRun = {{"placements", {"post_norm", "pre_norm"}},
                                 {"depths", {2}},
                                 {"d_model", 16},
                                 {"n_heads", 2},
                                 {"d_ff", 32},
                                 {"length", 3},
                                 {"batch", 4},
                                 {"steps", 20000},
                                 {"warmups", {false, true}},
                                 {"warmup_steps", 100},
                                 {"seeds", 1},
                                 {"grad_history_points", 1}};

// The longest a cancelled depth-training may take to answer (a step is milliseconds; the rest
// is scheduling on a busy 2-core machine).
constexpr auto kStopLatency = std::chrono::seconds(2);

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

nlohmann::json running_jobs(const RunningLabServer& server) {
  auto client = server.client();
  const auto jobs = client.Get("/api/jobs");
  return jobs ? nlohmann::json::parse(jobs->body)["jobs"] : nlohmann::json::array();
}

// POST /api/depth-training in a thread; its answer once it comes.
class DepthTraining {
 public:
  DepthTraining(const RunningLabServer& server, int read_timeout_s = 120)
      : client_(server.client()) {
    client_.set_read_timeout(read_timeout_s, 0);
    thread_ = std::thread([this] {
      const auto result = client_.Post("/api/depth-training", kLongRun.dump(), "application/json");
      status_ = result ? result->status : 0;
      body_ = result ? result->body : "";
      answered_at_ = Clock::now();
      done_ = true;
    });
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (running_jobs(server).empty() && !done_ && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // Well into the runs, past building the models.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ~DepthTraining() {
    if (thread_.joinable()) thread_.join();
  }
  void wait() { thread_.join(); }
  bool done() const { return done_; }
  int status() const { return status_; }
  const std::string& body() const { return body_; }
  Clock::time_point answered_at() const { return answered_at_; }

 private:
  httplib::Client client_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  int status_ = 0;
  std::string body_;
  Clock::time_point answered_at_;
};

TEST(ApiCancellation, DepthTrainingStopsWithinAStepOfAStopRequest) {
  RunningLabServer server;
  DepthTraining training(server);
  const nlohmann::json jobs = running_jobs(server);
  ASSERT_EQ(jobs.size(), 1u);
  ASSERT_FALSE(training.done());
  auto client = server.client();
  const auto asked = Clock::now();
  const auto stopped = client.Post("/api/jobs/stop", nlohmann::json{{"job", jobs[0]["id"]}}.dump(),
                                   "application/json");
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->status, 200);
  training.wait();
  const double latency = std::chrono::duration<double>(training.answered_at() - asked).count();
  EXPECT_EQ(training.status(), 503) << training.body();
  EXPECT_NE(training.body().find("stopped by request"), std::string::npos) << training.body();
  EXPECT_LT(latency, std::chrono::duration<double>(kStopLatency).count());
  RecordProperty("stop_latency_ms", static_cast<int>(latency * 1000));
  EXPECT_TRUE(running_jobs(server).empty());
}

TEST(ApiCancellation, DepthTrainingStopsAtTheTimeLimit) {
  LabServerOptions options;
  options.job_time_limit = std::chrono::seconds(1);
  RunningLabServer server(options);
  const auto started = Clock::now();
  DepthTraining training(server);
  training.wait();
  EXPECT_EQ(training.status(), 503) << training.body();
  EXPECT_NE(training.body().find("time limit of 1 s"), std::string::npos) << training.body();
  const double answered = seconds_since(started);
  RecordProperty("answered_after_ms", static_cast<int>(answered * 1000));
  EXPECT_LT(answered, 1.0 + std::chrono::duration<double>(kStopLatency).count());
}

TEST(ApiCancellation, DepthTrainingStopsWhenTheClientHangsUp) {
  RunningLabServer server;
  // The client gives up after 1 s and closes its connection.
  DepthTraining training(server, /*read_timeout_s=*/1);
  training.wait();
  EXPECT_EQ(training.status(), 0);
  const auto gone = Clock::now();
  while (!running_jobs(server).empty() && Clock::now() - gone < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(running_jobs(server).empty());
  const double latency = seconds_since(gone);
  RecordProperty("hang_up_latency_ms", static_cast<int>(latency * 1000));
  EXPECT_LT(latency, std::chrono::duration<double>(kStopLatency).count());
}

TEST(ApiCancellation, StoppingTheServerEndsWorkInFlight) {
  auto server = std::make_unique<RunningLabServer>();
  DepthTraining training(*server);
  ASSERT_FALSE(training.done());
  const auto stopping = Clock::now();
  server.reset();  // LabServer::stop(), what SIGTERM does, then joins the server's thread
  const double latency = seconds_since(stopping);
  RecordProperty("server_stop_latency_ms", static_cast<int>(latency * 1000));
  training.wait();
  EXPECT_LT(latency, std::chrono::duration<double>(kStopLatency).count());
  EXPECT_EQ(training.status(), 503) << training.body();
  EXPECT_NE(training.body().find("the server is stopping"), std::string::npos) << training.body();
}

}  // namespace
}  // namespace addnorm::server
