// The API refuses what it should: bad parameters (400, JSON naming the parameter), bodies over
// the limit (413), non-JSON bodies (415), unknown paths (404), requests for another host name
// (403), and any path that is not one of the embedded files, however it is spelled.
#include <gtest/gtest.h>

#include <string>

#include "running_lab_server.hpp"
#include "server/api_error.hpp"
#include "server/embedded_files.hpp"

namespace addnorm::server {
namespace {

using testing::RunningLabServer;

class ApiErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RunningLabServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  // Posts `body` and expects `status` with a JSON error naming `parameter` ("" for null).
  static nlohmann::json expect_refused(const std::string& path, const std::string& body, int status,
                                       const std::string& parameter,
                                       const std::string& content_type = "application/json") {
    auto client = server_->client();
    const auto result = client.Post(path.c_str(), body, content_type.c_str());
    EXPECT_TRUE(result);
    if (!result) return {};
    EXPECT_EQ(result->status, status)
        << path << " " << body.substr(0, 200) << " -> " << result->body.substr(0, 300);
    EXPECT_EQ(result->get_header_value("Content-Type"), "application/json; charset=utf-8");
    const nlohmann::json error = nlohmann::json::parse(result->body);
    EXPECT_TRUE(error["error"].is_string());
    if (parameter.empty()) {
      EXPECT_TRUE(error["parameter"].is_null()) << error.dump();
    } else {
      EXPECT_EQ(error["parameter"], parameter) << error.dump();
    }
    return error;
  }

  static RunningLabServer* server_;
};
RunningLabServer* ApiErrors::server_ = nullptr;

TEST_F(ApiErrors, OutOfRangeParametersAreNamed) {
  const auto error = expect_refused("/api/gradient-flow", R"({"depths": [6, 0]})", 400, "depths");
  EXPECT_NE(error["error"].get<std::string>().find("depths[1] is 0"), std::string::npos);
  expect_refused("/api/gradient-flow", R"({"width": 1000})", 400, "width");
  expect_refused("/api/gradient-flow", R"({"depths": [1000], "width": 256})", 400, "depths");
  expect_refused("/api/activation-growth", R"({"layers": 201})", 400, "layers");
  expect_refused("/api/activation-growth", R"({"modes": ["none", "batch"]})", 400, "modes");
  expect_refused("/api/norm-steps", R"({"x": []})", 400, "x");
  expect_refused("/api/norm-steps", R"({"preset": "dog"})", 400, "preset");
  expect_refused("/api/norm-steps", R"({"eps": -1})", 400, "eps");
  expect_refused("/api/batch-vs-layer", R"({"table": [1, 2, 3, 4, 5]})", 400, "table");
  expect_refused("/api/init-gradients", R"({"depths": [97]})", 400, "depths");
  expect_refused("/api/train", R"({"steps": 0})", 400, "steps");
  expect_refused("/api/train", R"({"placements": ["sideways"]})", 400, "placements");
}

TEST_F(ApiErrors, WrongTypesAndUnknownKeysAreNamed) {
  const auto error = expect_refused("/api/gradient-flow", R"({"width": "wide"})", 400, "width");
  EXPECT_NE(error["error"].get<std::string>().find("expected an integer"), std::string::npos);
  expect_refused("/api/gradient-flow", R"({"widht": 8})", 400, "widht");
  expect_refused("/api/norm-steps", R"({"x": [1, "two"]})", 400, "x");
  expect_refused("/api/gradient-flow", R"([1, 2])", 400, "body");
  expect_refused("/api/gradient-flow", R"({"depths": [6,)", 400, "body");
  expect_refused("/api/jobs/stop", R"({"job": "all"})", 400, "job");
  expect_refused("/api/jobs/stop", R"({"job": 12345})", 404, "job");
}

TEST_F(ApiErrors, TrainingRequestsOverTheServersLimits) {
  expect_refused("/api/train", R"({"seeds": 16})", 400, "placements");
  expect_refused("/api/train", R"({"depths": [48], "d_model": 512, "d_ff": 2048, "seeds": 1,
                                   "warmups": [false], "steps": 1, "warmup_steps": 1})",
                 400, "depths");
}

TEST_F(ApiErrors, OnlyJsonBodiesAreRead) {
  // A cross-site form post arrives as text/plain or form data: refused before anything runs.
  expect_refused("/api/train", R"({"steps": 5})", 415, "body", "text/plain");
  expect_refused("/api/gradient-flow", "width=8", 415, "body", "application/x-www-form-urlencoded");
  expect_refused("/api/gradient-flow?width=8", "{}", 400, "width");
}

TEST_F(ApiErrors, OversizedBodyIsRefused) {
  // 4096 values at full precision fit the 256 KiB body limit; a body over it is not read.
  std::string body = R"({"x": [)";
  while (body.size() < 300 * 1024) body += "1.2345678901234,";
  body += "1]}";
  const auto error = expect_refused("/api/norm-steps", body, 413, "body");
  EXPECT_NE(error["error"].get<std::string>().find("262144 bytes"), std::string::npos);
}

TEST_F(ApiErrors, UnknownPathsAre404) {
  auto client = server_->client();
  for (const char* path : {"/api/nope", "/api/", "/nope.html", "/js/nope.js", "/web/index.html",
                           "/index.html.bak", "/CMakeLists.txt"}) {
    const auto result = client.Get(path);
    ASSERT_TRUE(result) << path;
    EXPECT_EQ(result->status, 404) << path;
    EXPECT_TRUE(nlohmann::json::parse(result->body)["error"].is_string()) << path;
  }
  const auto result = client.Post("/api/nope", "{}", "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 404);
}

TEST_F(ApiErrors, NoPathTraversal) {
  auto client = server_->client();
  for (const char* path :
       {"/../../../../etc/passwd", "/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/..%2f..%2f..%2fetc/passwd",
        "/js/../../src/server/lab_server.cpp", "//etc/passwd", "/./../CMakeLists.txt",
        "/%2e%2e%5c%2e%2e%5cetc%5cpasswd"}) {
    const auto result = client.Get(path);
    ASSERT_TRUE(result) << path;
    EXPECT_TRUE(result->status == 404 || result->status == 400) << path << " " << result->status;
    EXPECT_EQ(result->body.find("root:"), std::string::npos) << path;
    EXPECT_EQ(result->body.find("cmake_minimum_required"), std::string::npos) << path;
  }
}

TEST_F(ApiErrors, OtherHostNamesAreRefused) {
  // DNS rebinding: a page on another name that resolves to 127.0.0.1 must not read the API.
  auto client = server_->client();
  const std::string port = std::to_string(server_->port());
  const auto result = client.Get("/api/info", {{"Host", "attacker.example:" + port}});
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 403);
  const auto ok = client.Get("/api/info", {{"Host", "localhost:" + port}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ApiErrors, EveryEmbeddedFileIsServedWithItsType) {
  auto client = server_->client();
  ASSERT_FALSE(embedded_files().empty());
  for (const EmbeddedFile& file : embedded_files()) {
    const auto result = client.Get(std::string(file.path).c_str());
    ASSERT_TRUE(result) << file.path;
    EXPECT_EQ(result->status, 200) << file.path;
    EXPECT_EQ(result->get_header_value("Content-Type"), file.content_type) << file.path;
    EXPECT_EQ(result->body, file.data) << file.path;
  }
  const auto root = client.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->status, 200);
  EXPECT_NE(root->body.find("<title>"), std::string::npos);
}

TEST(ApiErrorParameter, FoundInTheLabsMessages) {
  const std::vector<std::string> keys = {"depths", "width", "modes", "table", "x", "lr"};
  EXPECT_EQ(parameter_named_in("depths[1] is 0, expected an integer in [1, 1000]", keys), "depths");
  EXPECT_EQ(parameter_named_in("gradient-flow parameter width is \"a\", expected an integer", keys),
            "width");
  EXPECT_EQ(parameter_named_in("gradient-flow has no parameter named widht", keys), "widht");
  EXPECT_EQ(parameter_named_in("sum(depths) * width^2 is 3000000, expected at most 2097152", keys),
            "depths");
  EXPECT_EQ(parameter_named_in("mode is \"batch\", expected none, ...", keys), "modes");
  EXPECT_EQ(parameter_named_in("table has 5 values, expected a multiple of 3", keys), "table");
  EXPECT_EQ(parameter_named_in("norm-steps parameters must be a JSON object, got []", keys),
            "body");
  EXPECT_EQ(parameter_named_in("the run needs about 3e13 multiply-adds", keys), "");
}

}  // namespace
}  // namespace addnorm::server
