// Experiment 2: activations through a stack of random linear layers, with the norm placed five
// ways. Every norm and residual is the library's op (layer_norm, rms_norm, add_norm_pre,
// add_norm_post), so the widget's bars are the ops' output.
#include "addnorm/lab/activation_growth.hpp"

#include <algorithm>
#include <cmath>

#include "addnorm/numpy_random.hpp"
#include "addnorm/ops.hpp"
#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/experiment_fields.hpp"
#include "lab/float_math.hpp"
#include "lab/json_params.hpp"

namespace addnorm::lab {
namespace {

constexpr GrowthMode kAllModes[] = {GrowthMode::none, GrowthMode::layer_norm, GrowthMode::rms_norm,
                                    GrowthMode::pre_norm, GrowthMode::post_norm};

bool all_finite(const Tensor& tensor) {
  return std::all_of(tensor.values().begin(), tensor.values().end(),
                     [](float v) { return std::isfinite(v); });
}

// One curve's running state: the residual stream x and, for pre-norm, Norm(x) for the next layer.
struct Stream {
  GrowthMode mode;
  Tensor x;
  Tensor normed;  // pre_norm only
  GrowthCurve curve;
};

void record(Stream& stream, int layer) {
  const MeanStd stats = mean_std_of(stream.x);
  stream.curve.mean.push_back(stats.mean);
  stream.curve.std.push_back(stats.std);
  if (!stream.curve.overflowed && !all_finite(stream.x)) stream.curve.overflowed = true;
  if (stream.curve.first_layer_past_100 == 0 && stats.std > 100.0) {
    stream.curve.first_layer_past_100 = layer;
  }
}

}  // namespace

std::string growth_mode_name(GrowthMode mode) {
  switch (mode) {
    case GrowthMode::none:
      return "none";
    case GrowthMode::layer_norm:
      return "layer_norm";
    case GrowthMode::rms_norm:
      return "rms_norm";
    case GrowthMode::pre_norm:
      return "pre_norm";
    case GrowthMode::post_norm:
      return "post_norm";
  }
  return "?";
}

GrowthMode parse_growth_mode(const std::string& name) {
  for (GrowthMode mode : kAllModes) {
    if (growth_mode_name(mode) == name) return mode;
  }
  throw Error("mode is \"" + name +
              "\", expected one of none, layer_norm, rms_norm, pre_norm, post_norm");
}

void validate(const ActivationGrowthParams& params) {
  check_fields(params, kActivationGrowthFields);
  const int64_t weights = int64_t{params.width} * params.width * params.layers;
  const int64_t work = weights * params.tokens * static_cast<int64_t>(params.modes.size());
  if (weights > kActivationGrowthMaxWeights || work > kActivationGrowthMaxWork) {
    throw Error("width^2 * layers is " + std::to_string(weights) + " and tokens * width^2 * " +
                "layers * modes is " + std::to_string(work) + ", expected at most " +
                std::to_string(kActivationGrowthMaxWeights) + " and " +
                std::to_string(kActivationGrowthMaxWork) + " (a smaller width or fewer layers)");
  }
}

namespace {

// Every mode's curve for the input and weights drawn from `seed`.
std::vector<GrowthCurve> grow(const ActivationGrowthParams& params, uint64_t seed) {
  numpy_random::Generator rng(seed);
  const Shape shape{params.tokens, params.width};
  const Shape row_shape{params.width};
  const Tensor input = to_tensor(rng.normal(0.0, 1.0, shape.numel()), shape);
  const double weight_std = params.gain / std::sqrt(static_cast<double>(params.width));
  const auto eps = static_cast<float>(params.eps);

  // The one LayerNorm description serves the plain and the fused ops.
  const NormOptions layer_options{.norm = NormKind::layer_norm, .eps = eps};
  const NormOptions rms_options{.norm = NormKind::rms_norm, .eps = eps};

  std::vector<Stream> streams;
  for (GrowthMode mode : params.modes) {
    Stream stream{mode, input, Tensor(), GrowthCurve{}};
    stream.curve.mode = mode;
    if (mode == GrowthMode::pre_norm) {
      stream.normed = Tensor(shape);
      layer_norm(stream.x.view(), row_shape, stream.normed.view(), layer_options);
    }
    record(stream, 0);
    streams.push_back(std::move(stream));
  }
  for (int layer = 1; layer <= params.layers; ++layer) {
    const std::vector<double> weight =
        rng.normal(0.0, weight_std, static_cast<int64_t>(params.width) * params.width);
    for (Stream& stream : streams) {
      switch (stream.mode) {
        case GrowthMode::none:
          stream.x = times_matrix(stream.x, weight, params.width);
          break;
        case GrowthMode::layer_norm: {
          const Tensor hidden = times_matrix(stream.x, weight, params.width);
          layer_norm(hidden.view(), row_shape, stream.x.view(), layer_options);
          break;
        }
        case GrowthMode::rms_norm: {
          const Tensor hidden = times_matrix(stream.x, weight, params.width);
          rms_norm(hidden.view(), row_shape, stream.x.view(), rms_options);
          break;
        }
        case GrowthMode::pre_norm: {
          // x <- x + F(LN(x)); the fused op also returns LN(x) for the next layer.
          const Tensor sublayer = times_matrix(stream.normed, weight, params.width);
          add_norm_pre(stream.x.view(), sublayer.view(), row_shape, stream.x.view(),
                       stream.normed.view(), layer_options);
          break;
        }
        case GrowthMode::post_norm: {
          // x <- LN(x + F(x)), no dropout: this is the forward at inference.
          const Tensor sublayer = times_matrix(stream.x, weight, params.width);
          Tensor out(shape);
          add_norm_post(stream.x.view(), sublayer.view(), row_shape, out.view(), layer_options);
          stream.x = std::move(out);
          break;
        }
      }
      record(stream, layer);
    }
  }
  std::vector<GrowthCurve> curves;
  for (Stream& stream : streams) curves.push_back(std::move(stream.curve));
  return curves;
}

}  // namespace

ActivationGrowthResult run_activation_growth(const ActivationGrowthParams& params) {
  validate(params);
  ActivationGrowthResult result;
  result.params = params;
  result.curves = grow(params, params.seed);
  if (params.spread_seeds == 0) return result;
  std::vector<std::vector<GrowthCurve>> others;
  for (int i = 1; i <= params.spread_seeds; ++i) {
    others.push_back(grow(params, params.seed + static_cast<uint64_t>(i)));
  }
  for (size_t m = 0; m < result.curves.size(); ++m) {
    GrowthCurve& curve = result.curves[m];
    for (size_t layer = 0; layer < curve.std.size(); ++layer) {
      std::vector<double> stds;
      for (const auto& other : others) stds.push_back(other[m].std[layer]);
      curve.std_spread.push_back(spread_of(stds));
    }
  }
  return result;
}

nlohmann::json to_json(const ActivationGrowthParams& params) {
  return fields_to_json(params, kActivationGrowthFields);
}

nlohmann::json to_json(const ActivationGrowthResult& result) {
  nlohmann::json curves = nlohmann::json::array();
  for (const GrowthCurve& curve : result.curves) {
    curves.push_back({{"mode", growth_mode_name(curve.mode)},
                      {"mean", curve.mean},
                      {"std", curve.std},
                      {"first_layer_past_100", curve.first_layer_past_100},
                      {"std_spread", to_json(curve.std_spread)},
                      {"overflowed", curve.overflowed}});
  }
  return {
      {"experiment", "activation-growth"}, {"params", to_json(result.params)}, {"curves", curves}};
}

std::string to_csv(const ActivationGrowthResult& result) {
  CsvWriter csv({"mode", "layer", "mean", "std"});
  for (const GrowthCurve& curve : result.curves) {
    for (size_t layer = 0; layer < curve.std.size(); ++layer) {
      csv.cell(growth_mode_name(curve.mode))
          .cell(static_cast<int>(layer))
          .cell(curve.mean[layer])
          .cell(curve.std[layer])
          .end_row();
    }
  }
  return csv.text();
}

ActivationGrowthParams activation_growth_params_from_json(const nlohmann::json& object) {
  return read_params<ActivationGrowthParams>(object, "activation-growth", kActivationGrowthFields);
}

}  // namespace addnorm::lab
