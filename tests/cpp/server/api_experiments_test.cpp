// The JSON API's numbers: every experiment endpoint answers exactly what the lab function
// returns for the same parameters, and at the defaults the seed pages' printed figures.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "addnorm/lab/activation_growth.hpp"
#include "addnorm/lab/batch_vs_layer.hpp"
#include "addnorm/lab/gradient_flow.hpp"
#include "addnorm/lab/init_gradients.hpp"
#include "addnorm/lab/norm_steps.hpp"
#include "running_lab_server.hpp"

namespace addnorm::server {
namespace {

using testing::RunningLabServer;

std::string sci(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", value);
  return text;
}
std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

class ApiExperiments : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RunningLabServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static nlohmann::json post(const std::string& path, const nlohmann::json& body) {
    auto client = server_->client();
    const auto result = client.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(result) << "no answer from " << path;
    if (!result) return {};
    EXPECT_EQ(result->status, 200) << result->body;
    EXPECT_EQ(result->get_header_value("Content-Type"), "application/json; charset=utf-8");
    return nlohmann::json::parse(result->body);
  }
  static nlohmann::json get(const std::string& path) {
    auto client = server_->client();
    const auto result = client.Get(path.c_str());
    EXPECT_TRUE(result) << "no answer from " << path;
    if (!result) return {};
    EXPECT_EQ(result->status, 200) << result->body;
    return nlohmann::json::parse(result->body);
  }
  // The lab's JSON as it travels: dumped and parsed (NaN and infinity become null on the way).
  static nlohmann::json as_sent(const nlohmann::json& lab_json) {
    return nlohmann::json::parse(lab_json.dump());
  }

  static RunningLabServer* server_;
};
RunningLabServer* ApiExperiments::server_ = nullptr;

TEST_F(ApiExperiments, GradientFlowDefaultsArePagesFigures) {
  const nlohmann::json answer = post("/api/gradient-flow", nlohmann::json::object());
  ASSERT_EQ(answer["stacks"].size(), 2u);
  const auto& six = answer["stacks"][0];
  const auto& twenty_four = answer["stacks"][1];
  EXPECT_EQ(six["depth"], 6);
  EXPECT_EQ(sci(six["without_residual"].back().get<double>()), "8.62e-04");
  EXPECT_EQ(fixed(six["with_residual"].back().get<double>(), 2), "3.31");
  EXPECT_EQ(twenty_four["depth"], 24);
  EXPECT_EQ(sci(twenty_four["without_residual"].back().get<double>()), "6.86e-14");
  EXPECT_EQ(fixed(twenty_four["with_residual"].back().get<double>(), 2), "2.79");
  EXPECT_EQ(fixed(answer["top_norm"].get<double>(), 2), "2.83");
  EXPECT_EQ(answer, as_sent(lab::to_json(lab::run_gradient_flow({}))));
}

TEST_F(ApiExperiments, GradientFlowWidgetRequestEqualsLab) {
  // What the Residuals widget sends at its largest setting: the page's two stacks, then the
  // slider's 50 layers from the same generator.
  const nlohmann::json body = {{"depths", {6, 24, 50}}, {"weight_std", 0.2}};
  const nlohmann::json answer = post("/api/gradient-flow", body);
  lab::GradientFlowParams params;
  params.depths = {6, 24, 50};
  params.weight_std = 0.2;
  EXPECT_EQ(answer, as_sent(lab::to_json(lab::run_gradient_flow(params))));
  EXPECT_EQ(answer["stacks"][2]["with_residual"].size(), 51u);
}

TEST_F(ApiExperiments, ActivationGrowthEqualsLabAndExplodesWithoutNorm) {
  const nlohmann::json answer = post("/api/activation-growth", {{"layers", 50}});
  lab::ActivationGrowthParams params;
  params.layers = 50;
  EXPECT_EQ(answer, as_sent(lab::to_json(lab::run_activation_growth(params))));
  for (const auto& curve : answer["curves"]) {
    const std::string mode = curve["mode"];
    if (mode == "none") {
      // The page: "With 15+ layers, values explode past 100."
      EXPECT_GE(curve["first_layer_past_100"].get<int>(), 10);
      EXPECT_LE(curve["first_layer_past_100"].get<int>(), 20);
    } else if (mode == "layer_norm" || mode == "rms_norm" || mode == "post_norm") {
      // "every layer stays near sigma = 1.0"
      EXPECT_NEAR(curve["std"].back().get<double>(), 1.0, 0.05) << mode;
      EXPECT_EQ(curve["first_layer_past_100"], 0) << mode;
    }
  }
}

TEST_F(ApiExperiments, NormStepsDefaultIsPagesWorkedExample) {
  const nlohmann::json answer = post("/api/norm-steps", nlohmann::json::object());
  EXPECT_EQ(answer, as_sent(lab::to_json(lab::run_norm_steps({}))));
  const auto& steps = answer["steps"];
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[0]["values"], nlohmann::json({2.0, -3.0, 1.0, 4.0}));
  EXPECT_DOUBLE_EQ(steps[0]["mean"].get<double>(), 1.0);
  EXPECT_EQ(fixed(steps[0]["std"].get<double>(), 2), "2.55");
  EXPECT_NEAR(steps[1]["mean"].get<double>(), 0.0, 1e-12);
  EXPECT_NEAR(steps[2]["std"].get<double>(), 1.0, 1e-6);
  const std::vector<std::string> normalised = {"0.39", "-1.57", "0.00", "1.18"};
  // The page scales its rounded x-hat (2 * 1.18 + 0.5 = 2.86); unrounded, 2 * 1.1767 + 0.5 =
  // 2.853. So the page's outputs hold to 0.01, not to the last printed digit.
  const std::vector<double> output = {1.28, -2.64, 0.5, 2.86};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(fixed(steps[2]["values"][i].get<double>(), 2), normalised[i]);
    EXPECT_NEAR(steps[3]["values"][i].get<double>(), output[i], 0.01);
  }
  EXPECT_EQ(fixed(steps[3]["values"][3].get<double>(), 3), "2.853");
}

TEST_F(ApiExperiments, NormStepsCatPresetAndSliders) {
  const nlohmann::json cat = post("/api/norm-steps", {{"preset", "cat"}});
  const std::vector<std::string> x_hat = {"-1.3416", "-0.4472", "0.4472", "1.3416"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(fixed(cat["steps"][2]["values"][i].get<double>(), 4), x_hat[i]);
  }
  EXPECT_EQ(fixed(cat["op_divisor"].get<double>(), 5), "2.23607");
  EXPECT_EQ(fixed(cat["steps"][0]["mean"].get<double>(), 1), "5.0");

  // What the widget sends when the γ and β sliders move.
  const nlohmann::json body = {
      {"x", {2, -3, 1, 4}}, {"gamma", {0.5}}, {"beta", {-1.25}}, {"norm", "rms_norm"}};
  const nlohmann::json answer = post("/api/norm-steps", body);
  lab::NormStepsParams params;
  params.gamma = {0.5};
  params.beta = {-1.25};
  params.norm = NormKind::rms_norm;
  EXPECT_EQ(answer, as_sent(lab::to_json(lab::run_norm_steps(params))));
  EXPECT_EQ(answer["beta_applied"], false);
}

TEST_F(ApiExperiments, BatchVsLayerHouseTableIsPagesAndEditsEqualLab) {
  const nlohmann::json answer = post("/api/batch-vs-layer", nlohmann::json::object());
  EXPECT_EQ(answer, as_sent(lab::to_json(lab::run_batch_vs_layer({}))));
  const auto& table = answer["table"];
  const std::vector<std::string> batch_row0 = {"-1.1112", "-1.3363", "-1.3587"};
  const std::vector<std::string> layer_row0 = {"1.4135", "-0.7455", "-0.6680"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(fixed(table["batch_norm"][i].get<double>(), 4), batch_row0[i]);
    EXPECT_EQ(fixed(table["layer_norm"][i].get<double>(), 4), layer_row0[i]);
  }
  EXPECT_GT(answer["padding"]["sentence0_output_shift"].get<double>(), 0.0);

  // An edited table with a fourth house added: what the widget sends.
  const nlohmann::json body = {
      {"table", {1200, 2.0, 45, 1500, 3.0, 70, 2000, 3.5, 80, 900, 1.0, 30}}, {"table_columns", 3}};
  const nlohmann::json edited = post("/api/batch-vs-layer", body);
  lab::BatchVsLayerParams params;
  params.table = {1200, 2.0, 45, 1500, 3.0, 70, 2000, 3.5, 80, 900, 1.0, 30};
  EXPECT_EQ(edited, as_sent(lab::to_json(lab::run_batch_vs_layer(params))));
  EXPECT_EQ(edited["table"]["rows"], 4);
}

TEST_F(ApiExperiments, InitGradientsEqualsLab) {
  const nlohmann::json body = {{"quick", true}, {"depths", {2, 4}}, {"d_model", 16},
                               {"d_ff", 32},    {"batch", 2},       {"length", 3}};
  const nlohmann::json answer = post("/api/init-gradients", body);
  lab::InitGradientsParams params = lab::init_gradients_quick();
  params.depths = {2, 4};
  params.shape.d_model = 16;
  params.shape.d_ff = 32;
  params.batch = 2;
  params.length = 3;
  EXPECT_EQ(answer, as_sent(lab::to_json(lab::run_init_gradients(params))));
  ASSERT_EQ(answer["stacks"].size(), 4u);  // post and pre norm, two depths each
}

TEST_F(ApiExperiments, InfoListsEveryEndpointWithDefaults) {
  const nlohmann::json info = get("/api/info");
  for (const char* name : {"gradient-flow", "activation-growth", "norm-steps", "batch-vs-layer",
                           "init-gradients", "update-size", "depth-training"}) {
    ASSERT_TRUE(info["experiments"].contains(name)) << name;
  }
  EXPECT_EQ(info["experiments"]["gradient-flow"]["defaults"],
            as_sent(lab::to_json(lab::GradientFlowParams{})));
  EXPECT_EQ(info["limits"]["max_body_bytes"], 256 * 1024);
}

TEST_F(ApiExperiments, AnswersAreNeverCompressed) {
  // Compressing a large answer costs far more than sending it over the loopback (brotli: ~0.7 s
  // for the 4096-value norm steps), so the API answers plainly even to clients that accept both.
  auto client = server_->client();
  const auto result = client.Post("/api/norm-steps", {{"Accept-Encoding", "gzip, deflate, br"}},
                                  R"({"preset": "cat"})", "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
  EXPECT_FALSE(result->has_header("Content-Encoding"));
  EXPECT_EQ(nlohmann::json::parse(result->body)["steps"].size(), 4u);
}

}  // namespace
}  // namespace addnorm::server
