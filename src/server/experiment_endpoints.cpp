// The table of experiments behind /api/<name>.
#include "server/experiment_endpoints.hpp"

#include "addnorm/lab/activation_growth.hpp"
#include "addnorm/lab/batch_vs_layer.hpp"
#include "addnorm/lab/depth_training.hpp"
#include "addnorm/lab/gradient_flow.hpp"
#include "addnorm/lab/init_gradients.hpp"
#include "addnorm/lab/norm_steps.hpp"
#include "addnorm/lab/rank_collapse.hpp"
#include "addnorm/lab/trainability_map.hpp"
#include "addnorm/lab/update_size.hpp"

namespace addnorm::server {
namespace {

std::vector<std::string> keys_of(const nlohmann::json& defaults,
                                 std::initializer_list<const char*> extra = {}) {
  std::vector<std::string> keys;
  for (const auto& item : defaults.items()) keys.push_back(item.key());
  for (const char* key : extra) keys.emplace_back(key);
  return keys;
}

std::vector<ExperimentEndpoint> make_endpoints() {
  std::vector<ExperimentEndpoint> endpoints;
  {
    const nlohmann::json defaults = lab::to_json(lab::GradientFlowParams{});
    endpoints.push_back(
        {"gradient-flow", "1 Residuals: per-layer gradient norms", false, defaults,
         keys_of(defaults),
         [](const nlohmann::json& params, const TrainingLimits&, const lab::Progress&) {
           return lab::to_json(lab::run_gradient_flow(lab::gradient_flow_params_from_json(params)));
         }});
  }
  {
    const nlohmann::json defaults = lab::to_json(lab::ActivationGrowthParams{});
    endpoints.push_back(
        {"activation-growth", "2 Normalization: per-layer mean and std", false, defaults,
         keys_of(defaults),
         [](const nlohmann::json& params, const TrainingLimits&, const lab::Progress&) {
           return lab::to_json(
               lab::run_activation_growth(lab::activation_growth_params_from_json(params)));
         }});
  }
  {
    const nlohmann::json defaults = lab::to_json(lab::NormStepsParams{});
    endpoints.push_back(
        {"norm-steps", "3 Normalization steps: the four steps with mu and sigma", false, defaults,
         keys_of(defaults, {"preset"}),
         [](const nlohmann::json& params, const TrainingLimits&, const lab::Progress&) {
           return lab::to_json(lab::run_norm_steps(lab::norm_steps_params_from_json(params)));
         }});
  }
  {
    const nlohmann::json defaults = lab::to_json(lab::BatchVsLayerParams{});
    endpoints.push_back(
        {"batch-vs-layer", "4 Batch norm vs layer norm: the table and the padded batch", false,
         defaults, keys_of(defaults),
         [](const nlohmann::json& params, const TrainingLimits&, const lab::Progress&) {
           return lab::to_json(
               lab::run_batch_vs_layer(lab::batch_vs_layer_params_from_json(params)));
         }});
  }
  {
    const nlohmann::json defaults = lab::to_json(lab::InitGradientsParams{});
    endpoints.push_back(
        {"init-gradients", "5 Deep stacks: per-layer gradients at initialisation", true, defaults,
         keys_of(defaults, {"quick"}),
         [](const nlohmann::json& params, const TrainingLimits&, const lab::Progress& progress) {
           return lab::to_json(
               lab::run_init_gradients(lab::init_gradients_params_from_json(params), progress));
         },
         [](const nlohmann::json& params, const TrainingLimits&, int runs_at_once) {
           const lab::InitGradientsParams parsed = lab::init_gradients_params_from_json(params);
           lab::validate(parsed);
           return init_gradients_peak_bytes(parsed, runs_at_once);
         }});
  }
  {
    const nlohmann::json defaults = lab::to_json(lab::UpdateSizeParams{});
    endpoints.push_back(
        {"update-size", "5 Deep stacks: how far one Adam step moves each layer", true, defaults,
         keys_of(defaults, {"quick"}),
         [](const nlohmann::json& params, const TrainingLimits&, const lab::Progress& progress) {
           return lab::to_json(
               lab::run_update_size(lab::update_size_params_from_json(params), progress));
         },
         [](const nlohmann::json& params, const TrainingLimits&, int runs_at_once) {
           const lab::UpdateSizeParams parsed = lab::update_size_params_from_json(params);
           lab::validate(parsed);
           return update_size_peak_bytes(parsed, runs_at_once);
         }});
  }
  {
    const nlohmann::json defaults = lab::to_json(lab::RankCollapseParams{});
    endpoints.push_back(
        {"rank-collapse", "5 Deep stacks: tokens through attention-only stacks", true, defaults,
         keys_of(defaults, {"quick"}),
         [](const nlohmann::json& params, const TrainingLimits&, const lab::Progress& progress) {
           return lab::to_json(
               lab::run_rank_collapse(lab::rank_collapse_params_from_json(params), progress));
         },
         [](const nlohmann::json& params, const TrainingLimits&, int runs_at_once) {
           const lab::RankCollapseParams parsed = lab::rank_collapse_params_from_json(params);
           lab::validate(parsed);
           return rank_collapse_peak_bytes(parsed, runs_at_once);
         }});
  }
  {
    const nlohmann::json defaults = lab::to_json(lab::TrainabilityMapParams{});
    endpoints.push_back(
        {"trainability-map", "5 Deep stacks: which depth, lr and schedule each placement trains",
         true, defaults, keys_of(defaults, {"quick"}),
         [](const nlohmann::json& params, const TrainingLimits&, const lab::Progress& progress) {
           return lab::to_json(
               lab::run_trainability_map(lab::trainability_map_params_from_json(params), progress));
         },
         [](const nlohmann::json& params, const TrainingLimits&, int runs_at_once) {
           const lab::TrainabilityMapParams parsed = lab::trainability_map_params_from_json(params);
           lab::validate(parsed);
           return trainability_map_peak_bytes(parsed, runs_at_once);
         }});
  }
  {
    // Depth training as one answer at the end (the page streams it from /api/train instead).
    const nlohmann::json defaults = lab::to_json(lab::DepthTrainingParams{});
    endpoints.push_back(
        {"depth-training", "5 Deep stacks: the whole training sweep, answered at the end", true,
         defaults, keys_of(defaults, {"quick"}),
         [](const nlohmann::json& params, const TrainingLimits& limits,
            const lab::Progress& progress) {
           return lab::to_json(
               lab::run_depth_training(checked_training_params(params, limits), progress));
         },
         [](const nlohmann::json& params, const TrainingLimits& limits, int runs_at_once) {
           return training_peak_bytes(checked_training_params(params, limits), runs_at_once);
         }});
  }
  return endpoints;
}

}  // namespace

const std::vector<std::string>& depth_training_keys() {
  static const std::vector<std::string> keys = [] {
    for (const ExperimentEndpoint& endpoint : experiment_endpoints()) {
      if (endpoint.name == "depth-training") return endpoint.keys;
    }
    return std::vector<std::string>{};
  }();
  return keys;
}

const std::vector<ExperimentEndpoint>& experiment_endpoints() {
  static const std::vector<ExperimentEndpoint> endpoints = make_endpoints();
  return endpoints;
}

}  // namespace addnorm::server
