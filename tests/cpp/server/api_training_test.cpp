// POST /api/train: the streamed loss curves are the lab's depth-training curves step for step;
// a run stops on request, at its time limit, and when the client goes; only a few run at once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "addnorm/lab/depth_training.hpp"
#include "running_lab_server.hpp"

namespace addnorm::server {
namespace {

using testing::Event;
using testing::parse_events;
using testing::RunningLabServer;

// A small training: two placements of a 2-block stack, a few steps, tens of milliseconds.
const nlohmann::json kSmallRun = {{"placements", {"post_norm", "pre_norm"}},
                                  {"depths", {2}},
                                  {"d_model", 16},
                                  {"n_heads", 2},
                                  {"d_ff", 32},
                                  {"length", 3},
                                  {"batch", 4},
                                  {"steps", 12},
                                  {"warmups", {false, true}},
                                  {"warmup_steps", 4},
                                  {"dropout", 0.1},
                                  {"seeds", 1},
                                  {"grad_history_points", 1}};

// Streams POST /api/train into `text`; `on_chunk` may return false to hang up.
httplib::Result stream_train(httplib::Client& client, const nlohmann::json& body, std::string& text,
                             const std::function<bool(const std::string&)>& on_chunk = {}) {
  httplib::Request request;
  request.method = "POST";
  request.path = "/api/train";
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    text.append(data, length);
    return on_chunk ? on_chunk(text) : true;
  };
  return client.send(request);
}

TEST(ApiTraining, StreamedCurvesEqualTheLabsDepthTraining) {
  RunningLabServer server;
  auto client = server.client();
  std::string text;
  const auto result = stream_train(client, kSmallRun, text);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<Event> events = parse_events(text);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front().name, "start");
  EXPECT_EQ(events.back().name, "done") << events.back().data.dump();

  const lab::DepthTrainingResult lab_result =
      lab::run_depth_training(lab::depth_training_params_from_json(kSmallRun));
  ASSERT_EQ(events.front().data["runs"].size(), lab_result.runs.size());
  ASSERT_EQ(events.size(), 2 + 12u);
  for (size_t step = 0; step < 12; ++step) {
    const Event& event = events[1 + step];
    ASSERT_EQ(event.name, "step");
    EXPECT_EQ(event.data["step"], step + 1);
    for (size_t run = 0; run < lab_result.runs.size(); ++run) {
      EXPECT_EQ(event.data["loss"][run].get<double>(), lab_result.runs[run].loss[step])
          << "run " << run << " step " << step + 1;
      EXPECT_EQ(event.data["grad_norm"][run].get<double>(), lab_result.runs[run].grad_norm[step]);
    }
  }
  const nlohmann::json& done = events.back().data;
  for (size_t run = 0; run < lab_result.runs.size(); ++run) {
    EXPECT_EQ(events.front().data["runs"][run]["placement"],
              nn::placement_name(lab_result.runs[run].placement));
    EXPECT_EQ(done["runs"][run]["eval_loss"].get<double>(), lab_result.runs[run].eval_loss);
    EXPECT_EQ(done["runs"][run]["eval_accuracy"].get<double>(), lab_result.runs[run].eval_accuracy);
    EXPECT_EQ(done["runs"][run]["steps_to_target"], lab_result.runs[run].steps_to_target);
  }
}

// Starts a long training in a thread and returns once its first step has arrived.
class LongTraining {
 public:
  explicit LongTraining(const RunningLabServer& server) : client_(server.client()) {
    nlohmann::json body = kSmallRun;
    body["steps"] = 20000;
    body["warmup_steps"] = 100;
    thread_ = std::thread([this, body] {
      stream_train(client_, body, text_, [this](const std::string& text) {
        if (text.find("event: step") != std::string::npos) started_ = true;
        return !hang_up_;
      });
      finished_ = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!started_ && !finished_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ~LongTraining() {
    hang_up_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool started() const { return started_; }
  std::vector<Event> finish() {
    thread_.join();
    return parse_events(text_);
  }
  void hang_up() { hang_up_ = true; }

 private:
  httplib::Client client_;
  std::thread thread_;
  std::string text_;
  std::atomic<bool> started_{false}, finished_{false}, hang_up_{false};
};

TEST(ApiTraining, StopsOnRequest) {
  RunningLabServer server;
  LongTraining training(server);
  ASSERT_TRUE(training.started());
  auto client = server.client();
  const auto jobs = client.Get("/api/jobs");
  ASSERT_TRUE(jobs);
  const nlohmann::json list = nlohmann::json::parse(jobs->body)["jobs"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["kind"], "training");
  const nlohmann::json stop = {{"job", list[0]["id"]}};
  const auto stopped = client.Post("/api/jobs/stop", stop.dump(), "application/json");
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->status, 200) << stopped->body;
  const std::vector<Event> events = training.finish();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().name, "stopped");
  EXPECT_EQ(events.back().data["reason"], "stopped by request");
  EXPECT_LT(events.back().data["step"].get<int>(), 20000);
}

TEST(ApiTraining, StopsAtTheTimeLimit) {
  LabServerOptions options;
  options.job_time_limit = std::chrono::seconds(1);
  RunningLabServer server(options);
  LongTraining training(server);
  ASSERT_TRUE(training.started());
  const std::vector<Event> events = training.finish();  // within about a second
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().name, "stopped");
  EXPECT_EQ(events.back().data["reason"], "time limit of 1 s reached");
}

TEST(ApiTraining, OnlyAFewAtOnceAndAClientThatLeavesFreesItsSlot) {
  LabServerOptions options;
  options.max_jobs = 1;
  RunningLabServer server(options);
  auto client = server.client();
  {
    LongTraining training(server);
    ASSERT_TRUE(training.started());
    const auto refused = client.Post("/api/train", kSmallRun.dump(), "application/json");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 429);
    const auto refused_experiment =
        client.Post("/api/init-gradients", R"({"quick": true})", "application/json");
    ASSERT_TRUE(refused_experiment);
    EXPECT_EQ(refused_experiment->status, 429);
    // The quick experiments do not queue behind training.
    const auto answered = client.Post("/api/gradient-flow", "{}", "application/json");
    ASSERT_TRUE(answered);
    EXPECT_EQ(answered->status, 200);
    training.hang_up();
  }
  // The run notices the closed connection at its next step and gives its slot back.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    std::string text;
    const auto result = stream_train(client, kSmallRun, text);
    ASSERT_TRUE(result);
    status = result->status;
    if (status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status, 200);
}

}  // namespace
}  // namespace addnorm::server
