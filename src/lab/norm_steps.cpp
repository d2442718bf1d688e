// Experiment 3: LayerNorm and RMSNorm taken apart into their four steps, computed by the ops.
#include "addnorm/lab/norm_steps.hpp"

#include <cmath>

#include "addnorm/ops.hpp"
#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/experiment_fields.hpp"
#include "lab/float_math.hpp"
#include "lab/json_params.hpp"

namespace addnorm::lab {
namespace {

NormStep make_step(std::string name, std::vector<double> values) {
  NormStep step;
  step.name = std::move(name);
  const MeanStd stats = mean_std_of<double>(values);
  step.mean = stats.mean;
  step.std = stats.std;
  double squares = 0.0;
  for (double v : values) squares += v * v;
  step.rms = std::sqrt(squares / static_cast<double>(values.size()));
  step.values = std::move(values);
  return step;
}

// One value for every feature, or the list as given.
std::vector<double> per_feature(const std::vector<double>& values, size_t dim) {
  return values.size() == 1 ? std::vector<double>(dim, values[0]) : values;
}

std::vector<double> to_doubles(const Tensor& tensor) {
  return {tensor.values().begin(), tensor.values().end()};
}

}  // namespace

NormStepsParams norm_steps_preset(const std::string& name) {
  NormStepsParams params;  // the defaults are the "page" preset
  if (name == "page") return params;
  if (name == "cat") {
    params.x = {2.0, 4.0, 6.0, 8.0};
    params.gamma = {1.0};
    params.beta = {0.0};
    params.eps = 1e-5;
    return params;
  }
  throw Error("preset is \"" + name + "\", expected page or cat");
}

void validate(const NormStepsParams& params) {
  check_fields(params, kNormStepsFields);
  for (const auto& [name, values] : {std::pair{"gamma", &params.gamma}, {"beta", &params.beta}}) {
    if (values->size() != 1 && values->size() != params.x.size()) {
      throw Error(std::string(name) + " has " + std::to_string(values->size()) +
                  " values, expected 1 (for every feature) or " + std::to_string(params.x.size()) +
                  " (one per value of x)");
    }
  }
}

NormStepsResult run_norm_steps(const NormStepsParams& params) {
  validate(params);
  NormStepsResult result;
  result.params = params;
  const size_t dim = params.x.size();
  const bool layer = norm_traits(params.norm).centres;
  result.gamma = per_feature(params.gamma, dim);
  result.beta = layer ? per_feature(params.beta, dim) : std::vector<double>(dim, 0.0);
  result.beta_applied = layer;

  const Shape shape{static_cast<int64_t>(dim)};
  const Tensor x = to_tensor(params.x, shape);
  const Tensor gamma = to_tensor(result.gamma, shape);
  const Tensor beta = to_tensor(result.beta, shape);
  const auto eps = static_cast<float>(params.eps);
  Tensor normalised(shape), output(shape), mean({1}), rstd({1});
  const NormOptions plain{.norm = params.norm, .eps = eps};
  norm(x.view(), shape, normalised.view(), plain, NormStats{mean.view(), rstd.view()});
  const NormOptions affine{.norm = params.norm,
                           .gamma = gamma.cview(),
                           .beta = layer ? OptionalConst(beta.cview()) : std::nullopt,
                           .eps = eps};
  norm(x.view(), shape, output.view(), affine);
  result.op_mean = layer ? mean[0] : 0.0;
  result.op_divisor = 1.0 / static_cast<double>(rstd[0]);

  std::vector<double> centred = to_doubles(x);
  for (double& v : centred) v -= result.op_mean;
  result.steps.push_back(make_step("input", to_doubles(x)));
  result.steps.push_back(make_step("centred", std::move(centred)));
  result.steps.push_back(make_step("normalised", to_doubles(normalised)));
  result.steps.push_back(make_step("scaled and shifted", to_doubles(output)));

  if (layer) {
    // gamma = sqrt(var + eps), beta = mean: the affine step can undo the normalisation.
    Tensor undo_gamma(shape, std::vector<float>(dim, static_cast<float>(result.op_divisor)));
    Tensor undo_beta(shape, std::vector<float>(dim, mean[0]));
    Tensor undone(shape);
    NormOptions undo{.gamma = undo_gamma.cview(), .beta = undo_beta.cview(), .eps = eps};
    layer_norm(x.view(), shape, undone.view(), undo);
    result.undone = to_doubles(undone);
  }
  return result;
}

nlohmann::json to_json(const NormStepsParams& params) {
  return fields_to_json(params, kNormStepsFields);
}

nlohmann::json to_json(const NormStepsResult& result) {
  nlohmann::json steps = nlohmann::json::array();
  for (const NormStep& step : result.steps) {
    steps.push_back({{"name", step.name},
                     {"values", step.values},
                     {"mean", step.mean},
                     {"std", step.std},
                     {"rms", step.rms}});
  }
  return {{"experiment", "norm-steps"},
          {"params", to_json(result.params)},
          {"gamma", result.gamma},
          {"beta", result.beta},
          {"beta_applied", result.beta_applied},
          {"op_mean", result.op_mean},
          {"op_divisor", result.op_divisor},
          {"steps", steps},
          {"undone", result.undone}};
}

std::string to_csv(const NormStepsResult& result) {
  CsvWriter csv({"step", "index", "value"});
  for (const NormStep& step : result.steps) {
    for (size_t i = 0; i < step.values.size(); ++i) {
      csv.cell(step.name).cell(static_cast<int>(i)).cell(step.values[i]).end_row();
    }
  }
  return csv.text();
}

NormStepsParams norm_steps_params_from_json(const nlohmann::json& object) {
  JsonParams reader(object, "norm-steps");
  std::string preset = "page";
  reader.read("preset", preset);
  NormStepsParams params = norm_steps_preset(preset);
  read_fields(reader, params, kNormStepsFields);
  reader.finish();
  return params;
}

}  // namespace addnorm::lab
