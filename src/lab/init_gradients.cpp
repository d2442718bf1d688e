// Experiment 5: gradients at initialisation, per block, for post-norm and pre-norm stacks.
#include "addnorm/lab/init_gradients.hpp"

#include <cmath>
#include <numeric>

#include "addnorm/nn/parameter.hpp"
#include "addnorm/nn/sequence_model.hpp"
#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/experiment_fields.hpp"
#include "lab/parallel_runs.hpp"
#include "lab/stream_probe.hpp"
#include "lab/transformer_probe.hpp"

namespace addnorm::lab {
namespace {

void add_into(std::vector<double>& sum, const std::vector<double>& values) {
  if (sum.empty()) sum.assign(values.size(), 0.0);
  for (size_t i = 0; i < values.size(); ++i) sum[i] += values[i];
}

void divide(std::vector<double>& values, double count) {
  for (double& v : values) v /= count;
}

double forward_work(const InitGradientsParams& p) {
  const double seq = 2.0 * p.length + 1.0;
  const double blocks = std::accumulate(p.depths.begin(), p.depths.end(), 0.0);
  return blocks * static_cast<double>(p.placements.size()) * p.seeds * p.batch * seq *
         p.shape.d_model * (4.0 * p.shape.d_model + 2.0 * p.shape.d_ff + 2.0 * seq);
}

}  // namespace

InitGradientsParams init_gradients_quick() {
  InitGradientsParams params;
  params.depths = {6, 12};
  params.shape = {32, 4, 64};
  params.seeds = 4;
  return params;
}

void validate(const InitGradientsParams& params) {
  check_fields(params, init_gradients_fields());
  validate(params.shape);
  if (params.shape.sublayers == Sublayers::attn) {
    throw Error(
        "sublayers is attn, expected attn_ffn or ffn (init-gradients' headline is the FFN "
        "weights' gradient; rank-collapse studies attention-only stacks)");
  }
  const double work = forward_work(params);
  if (work > kInitGradientsMaxWork) {
    throw Error("the run needs about " + number_text(work) + " multiply-adds per forward, " +
                "expected at most " + number_text(kInitGradientsMaxWork) +
                " (fewer depths, seeds or placements, or a smaller model or batch)");
  }
}

namespace {

// What one model (one seed) gives.
struct SeedMeasurement {
  double loss = 0.0;
  std::vector<double> attention, ffn, stream, stream_grad, cosine;
  std::vector<double> attention_norm_input, attention_norm_output, ffn_norm_input, ffn_norm_output;
};

SeedMeasurement measure_one(const InitGradientsParams& params, nn::Placement placement, int depth,
                            uint64_t seed) {
  SeedMeasurement m;
  nn::SequenceModel model(model_config(params.shape, placement, depth, params.symbols + 2, seed));
  numpy_random::Generator generator(seed);
  const TaskBatch batch =
      make_task_batch(params.task, params.symbols, params.length, params.batch, generator);
  const nn::ParameterList parameters = model.parameters();
  nn::zero_grad(parameters);
  m.loss = model.forward_backward(batch.tokens, batch.targets, batch.batch, batch.seq);
  const LayerGradNorms grads = layer_grad_norms(parameters, depth);
  m.attention = grads.attention;
  m.ffn = grads.ffn;
  nn::Stack& stack = model.stack();
  m.stream.push_back(stack.input_stats().mean_token_norm);
  for (const nn::LayerStats& layer : stack.layer_stats()) {
    m.stream.push_back(layer.output.mean_token_norm);
  }
  m.stream_grad = stack.residual_grad_norms();
  const bool pre = placement == nn::Placement::pre_norm;
  for (int l = 0; l < depth; ++l) {
    nn::TransformerBlock& block = stack.block(l);
    if (l == 0) m.cosine.push_back(mean_token_cosine(block.input()));  // the embedded batch
    m.cosine.push_back(mean_token_cosine(block.output()));
    // A norm's output is what the sub-layer read (pre-norm) or the stream after the box.
    if (const nn::Norm* norm = block.attention_norm()) {
      m.attention_norm_input.push_back(norm_input_token_norm(*norm));
      m.attention_norm_output.push_back(
          mean_token_norm(pre ? block.attention_input() : block.after_attention()));
    }
    if (const nn::Norm* norm = block.ffn_norm()) {
      m.ffn_norm_input.push_back(norm_input_token_norm(*norm));
      m.ffn_norm_output.push_back(mean_token_norm(pre ? block.ffn_input() : block.output()));
    }
  }
  return m;
}

std::vector<double> mean_over(const std::vector<SeedMeasurement>& runs,
                              std::vector<double> SeedMeasurement::*field) {
  std::vector<double> sum;
  for (const SeedMeasurement& run : runs) add_into(sum, run.*field);
  divide(sum, static_cast<double>(runs.size()));
  return sum;
}

}  // namespace

InitGradientsResult run_init_gradients(const InitGradientsParams& params,
                                       const Progress& progress) {
  validate(params);
  InitGradientsResult result;
  result.params = params;
  // One run per (placement, depth, seed), in parallel; combined in this order below.
  const std::vector<SeedMeasurement> measured = measure_every_run(
      params,
      [&](nn::Placement placement, int depth, uint64_t seed) {
        return measure_one(params, placement, depth, seed);
      },
      progress);

  size_t next = 0;
  for (nn::Placement placement : params.placements) {
    for (int depth : params.depths) {
      const std::vector<SeedMeasurement> runs(
          measured.begin() + static_cast<std::ptrdiff_t>(next),
          measured.begin() + static_cast<std::ptrdiff_t>(next + params.seeds));
      next += static_cast<size_t>(params.seeds);
      InitGradientsStack stack;
      stack.placement = placement;
      stack.depth = depth;
      std::vector<double> top, ratio, mean_grad;
      for (const SeedMeasurement& run : runs) {
        stack.loss += run.loss / params.seeds;
        top.push_back(run.ffn.back());
        ratio.push_back(run.ffn.back() / run.ffn.front());
        double sum = 0.0;
        for (int l = 0; l < depth; ++l) sum += std::hypot(run.attention[l], run.ffn[l]);
        mean_grad.push_back(sum / depth);
      }
      stack.attention_grad_norm = mean_over(runs, &SeedMeasurement::attention);
      stack.ffn_grad_norm = mean_over(runs, &SeedMeasurement::ffn);
      stack.stream_norm = mean_over(runs, &SeedMeasurement::stream);
      stack.stream_grad_norm = mean_over(runs, &SeedMeasurement::stream_grad);
      stack.token_cosine = mean_over(runs, &SeedMeasurement::cosine);
      stack.attention_norm_input = mean_over(runs, &SeedMeasurement::attention_norm_input);
      stack.attention_norm_output = mean_over(runs, &SeedMeasurement::attention_norm_output);
      stack.ffn_norm_input = mean_over(runs, &SeedMeasurement::ffn_norm_input);
      stack.ffn_norm_output = mean_over(runs, &SeedMeasurement::ffn_norm_output);
      stack.top_ffn_grad = spread_of(top);
      stack.top_to_bottom = spread_of(ratio);
      stack.mean_layer_grad = spread_of(mean_grad);
      stack.top_to_bottom_ratio = stack.top_to_bottom.median;
      stack.mean_layer_grad_norm = stack.mean_layer_grad.median;
      stack.top_ffn_grad_per_seed = top;
      result.stacks.push_back(std::move(stack));
    }
  }
  const auto find = [&](nn::Placement placement, int depth) -> const InitGradientsStack* {
    for (const InitGradientsStack& s : result.stacks) {
      if (s.placement == placement && s.depth == depth) return &s;
    }
    return nullptr;
  };
  for (int depth : params.depths) {
    const InitGradientsStack* post = find(nn::Placement::post_norm, depth);
    const InitGradientsStack* pre = find(nn::Placement::pre_norm, depth);
    if (post == nullptr || pre == nullptr) continue;
    std::vector<double> ratios;
    for (size_t i = 0; i < post->top_ffn_grad_per_seed.size(); ++i) {
      ratios.push_back(post->top_ffn_grad_per_seed[i] / pre->top_ffn_grad_per_seed[i]);
    }
    result.post_over_pre.push_back({depth, spread_of(ratios)});
  }
  return result;
}

nlohmann::json to_json(const InitGradientsParams& params) {
  return fields_to_json(params, init_gradients_fields());
}

nlohmann::json to_json(const InitGradientsResult& result) {
  nlohmann::json stacks = nlohmann::json::array();
  for (const InitGradientsStack& s : result.stacks) {
    stacks.push_back({{"placement", std::string(nn::placement_name(s.placement))},
                      {"depth", s.depth},
                      {"loss", s.loss},
                      {"attention_grad_norm", s.attention_grad_norm},
                      {"ffn_grad_norm", s.ffn_grad_norm},
                      {"stream_norm", s.stream_norm},
                      {"stream_grad_norm", s.stream_grad_norm},
                      {"token_cosine", s.token_cosine},
                      {"attention_norm_input", s.attention_norm_input},
                      {"attention_norm_output", s.attention_norm_output},
                      {"ffn_norm_input", s.ffn_norm_input},
                      {"ffn_norm_output", s.ffn_norm_output},
                      {"top_to_bottom_ratio", s.top_to_bottom_ratio},
                      {"mean_layer_grad_norm", s.mean_layer_grad_norm},
                      {"top_ffn_grad", to_json(s.top_ffn_grad)},
                      {"top_to_bottom", to_json(s.top_to_bottom)},
                      {"mean_layer_grad", to_json(s.mean_layer_grad)},
                      {"top_ffn_grad_per_seed", s.top_ffn_grad_per_seed}});
  }
  nlohmann::json ratios = nlohmann::json::array();
  for (const PlacementRatio& r : result.post_over_pre) {
    ratios.push_back({{"depth", r.depth}, {"top_ffn_grad", to_json(r.post_over_pre)}});
  }
  return {{"experiment", "init-gradients"},
          {"params", to_json(result.params)},
          {"stacks", stacks},
          {"post_over_pre", ratios}};
}

std::string to_csv(const InitGradientsResult& result) {
  CsvWriter csv({"placement", "depth", "layer", "attention_grad_norm", "ffn_grad_norm",
                 "stream_norm", "stream_grad_norm", "token_cosine"});
  for (const InitGradientsStack& s : result.stacks) {
    for (int l = 0; l < s.depth; ++l) {
      csv.cell(std::string(nn::placement_name(s.placement)))
          .cell(s.depth)
          .cell(l)
          .cell(s.attention_grad_norm[l])
          .cell(s.ffn_grad_norm[l])
          .cell(s.stream_norm[l + 1])
          .cell(s.stream_grad_norm[l])
          .cell(s.token_cosine[l + 1])
          .end_row();
    }
  }
  return csv.text();
}

InitGradientsParams init_gradients_params_from_json(const nlohmann::json& object) {
  return read_params(object, "init-gradients", init_gradients_fields(), init_gradients_quick);
}

}  // namespace addnorm::lab
