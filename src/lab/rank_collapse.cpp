// Experiment 8: the relative residual and token cosine through attention-only stacks, one curve
// per placement of the Add & Norm box (rank_collapse.hpp).
#include "addnorm/lab/rank_collapse.hpp"

#include <cmath>
#include <limits>

#include "addnorm/nn/stack.hpp"
#include "addnorm/numpy_random.hpp"
#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/experiment_fields.hpp"
#include "lab/float_math.hpp"
#include "lab/json_params.hpp"
#include "lab/parallel_runs.hpp"
#include "lab/stream_probe.hpp"
#include "lab/transformer_probe.hpp"

namespace addnorm::lab {

namespace {

// Below this median relative residual a stack counts as collapsed: the tokens differ from their
// mean by a thousandth of their size.
constexpr double kCollapsedResidual = 1e-3;

double forward_work(const RankCollapseParams& p) {
  const double d = p.shape.d_model;
  const double per_token = d * (4.0 * d + 2.0 * p.tokens + 2.0 * p.shape.d_ff);
  return static_cast<double>(p.placements.size()) * p.seeds * p.depth * p.batch * p.tokens *
         per_token;
}

// One seed's curves: index 0 the input, index l + 1 after block l.
struct SeedCurves {
  std::vector<double> residual, cosine;
};

SeedCurves measure_one(const RankCollapseParams& params, nn::Placement placement, uint64_t seed) {
  nn::StackConfig config = model_config(params.shape, placement, params.depth, 2, seed).stack;
  config.final_norm = false;
  config.record_stats = false;
  nn::Stack stack(config);
  stack.set_training(false);
  numpy_random::Generator generator(seed);
  const Shape shape{params.batch, params.tokens, params.shape.d_model};
  const Tensor x = to_tensor(generator.normal(0.0, 1.0, shape.numel()), shape);
  stack.forward(x);
  SeedCurves curves;
  curves.residual.push_back(relative_residual(x));
  curves.cosine.push_back(mean_token_cosine(x));
  for (int l = 0; l < params.depth; ++l) {
    const Tensor& out = stack.block(l).output();
    curves.residual.push_back(relative_residual(out));
    curves.cosine.push_back(mean_token_cosine(out));
  }
  return curves;
}

}  // namespace

RankCollapseParams rank_collapse_quick() {
  RankCollapseParams params;
  params.depth = 12;
  params.seeds = 4;
  return params;
}

double relative_residual(const Tensor& x) {
  if (x.shape().rank() != 3) {
    throw Error("relative residual: x has shape " + x.shape().to_string() +
                ", expected [batch, seq, d]");
  }
  const int64_t batch = x.shape()[0], seq = x.shape()[1], dim = x.shape()[2];
  if (batch == 0) return 0.0;
  std::vector<double> mean(static_cast<size_t>(dim));
  double sum = 0.0;
  for (int64_t b = 0; b < batch; ++b) {
    const float* tokens = x.data() + b * seq * dim;
    std::fill(mean.begin(), mean.end(), 0.0);
    double total = 0.0;
    for (int64_t i = 0; i < seq; ++i) {
      for (int64_t k = 0; k < dim; ++k) {
        const double v = tokens[i * dim + k];
        mean[static_cast<size_t>(k)] += v;
        total += v * v;
      }
    }
    for (double& m : mean) m /= static_cast<double>(seq);
    double residual = 0.0;
    for (int64_t i = 0; i < seq; ++i) {
      for (int64_t k = 0; k < dim; ++k) {
        const double r = tokens[i * dim + k] - mean[static_cast<size_t>(k)];
        residual += r * r;
      }
    }
    // A stream that overflowed is not a collapsed one: NaN, not 0.
    if (!std::isfinite(total) || !std::isfinite(residual)) {
      return std::numeric_limits<double>::quiet_NaN();
    }
    if (total > 0.0) sum += std::sqrt(residual / total);
  }
  return sum / static_cast<double>(batch);
}

void validate(const RankCollapseParams& params) {
  check_fields(params, kRankCollapseFields);
  validate(params.shape);
  const double work = forward_work(params);
  if (work > kRankCollapseMaxWork) {
    throw Error("the run needs about " + number_text(work) + " multiply-adds, expected at most " +
                number_text(kRankCollapseMaxWork) +
                " (fewer placements, seeds or blocks, or a smaller model or batch)");
  }
}

RankCollapseResult run_rank_collapse(const RankCollapseParams& params, const Progress& progress) {
  validate(params);
  struct Runs {
    std::vector<nn::Placement> placements;
    std::vector<int> depths;
    int seeds;
    uint64_t seed;
  } runs{params.placements, {params.depth}, params.seeds, params.seed};
  const std::vector<SeedCurves> measured = measure_every_run(
      runs,
      [&](nn::Placement placement, int, uint64_t seed) {
        return measure_one(params, placement, seed);
      },
      progress);
  RankCollapseResult result;
  result.params = params;
  size_t next = 0;
  for (nn::Placement placement : params.placements) {
    RankCollapseCurve curve;
    curve.placement = placement;
    for (int index = 0; index <= params.depth; ++index) {
      std::vector<double> residual, cosine;
      for (int i = 0; i < params.seeds; ++i) {
        const SeedCurves& run = measured[next + static_cast<size_t>(i)];
        residual.push_back(run.residual[static_cast<size_t>(index)]);
        cosine.push_back(run.cosine[static_cast<size_t>(index)]);
      }
      curve.residual.push_back(spread_of(residual));
      curve.cosine.push_back(spread_of(cosine));
      if (curve.collapsed_at == 0 && index > 0 &&
          curve.residual.back().median < kCollapsedResidual) {
        curve.collapsed_at = index;
      }
    }
    next += static_cast<size_t>(params.seeds);
    result.curves.push_back(std::move(curve));
  }
  return result;
}

nlohmann::json to_json(const RankCollapseParams& params) {
  return fields_to_json(params, kRankCollapseFields);
}

nlohmann::json to_json(const RankCollapseResult& result) {
  nlohmann::json curves = nlohmann::json::array();
  for (const RankCollapseCurve& curve : result.curves) {
    curves.push_back({{"placement", std::string(nn::placement_name(curve.placement))},
                      {"residual", to_json(curve.residual)},
                      {"cosine", to_json(curve.cosine)},
                      {"collapsed_at", curve.collapsed_at}});
  }
  return {{"experiment", "rank-collapse"},
          {"params", to_json(result.params)},
          {"collapsed_below", kCollapsedResidual},
          {"curves", curves}};
}

std::string to_csv(const RankCollapseResult& result) {
  CsvWriter csv({"placement", "block", "residual_median", "residual_q25", "residual_q75",
                 "cosine_median", "cosine_q25", "cosine_q75"});
  for (const RankCollapseCurve& curve : result.curves) {
    for (size_t index = 0; index < curve.residual.size(); ++index) {
      csv.cell(std::string(nn::placement_name(curve.placement)))
          .cell(static_cast<int>(index))
          .cell(curve.residual[index].median)
          .cell(curve.residual[index].low)
          .cell(curve.residual[index].high)
          .cell(curve.cosine[index].median)
          .cell(curve.cosine[index].low)
          .cell(curve.cosine[index].high)
          .end_row();
    }
  }
  return csv.text();
}

RankCollapseParams rank_collapse_params_from_json(const nlohmann::json& object) {
  return read_params(object, "rank-collapse", kRankCollapseFields, rank_collapse_quick);
}

}  // namespace addnorm::lab
