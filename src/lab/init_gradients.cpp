// Experiment 5: gradients at initialisation, per block, for post-norm and pre-norm stacks.
#include "addnorm/lab/init_gradients.hpp"

#include <cmath>
#include <numeric>

#include "addnorm/nn/parameter.hpp"
#include "addnorm/nn/sequence_model.hpp"
#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/json_params.hpp"
#include "lab/model_params_json.hpp"
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
  params.seeds = 1;
  return params;
}

void validate(const InitGradientsParams& params) {
  check_count("placements", params.placements.size(), 1, 6);
  check_distinct(params.placements);
  check_count("depths", params.depths.size(), 1, 8);
  check_each_integer<int>("depths", params.depths, 1, 96);
  validate(params.shape);
  check_integer("length", params.length, 1, 64);
  check_integer("symbols", params.symbols, 2, 100);
  check_integer("batch", params.batch, 1, 256);
  check_integer("seeds", params.seeds, 1, 16);
  const double work = forward_work(params);
  if (work > kInitGradientsMaxWork) {
    throw Error("the run needs about " + number_text(work) + " multiply-adds per forward, " +
                "expected at most " + number_text(kInitGradientsMaxWork) +
                " (fewer depths, seeds or placements, or a smaller model or batch)");
  }
}

InitGradientsResult run_init_gradients(const InitGradientsParams& params,
                                       const Progress& progress) {
  validate(params);
  InitGradientsResult result;
  result.params = params;
  const double total = forward_work(params);
  double done = 0.0;
  for (nn::Placement placement : params.placements) {
    for (int depth : params.depths) {
      InitGradientsStack stack;
      stack.placement = placement;
      stack.depth = depth;
      for (int i = 0; i < params.seeds; ++i) {
        const uint64_t seed = params.seed + static_cast<uint64_t>(i);
        nn::SequenceModel model(
            model_config(params.shape, placement, depth, params.symbols + 2, seed));
        numpy_random::Generator generator(seed);
        const TaskBatch batch =
            make_task_batch(params.task, params.symbols, params.length, params.batch, generator);
        const nn::ParameterList parameters = model.parameters();
        nn::zero_grad(parameters);
        stack.loss += model.forward_backward(batch.tokens, batch.targets, batch.batch, batch.seq);
        const LayerGradNorms grads = layer_grad_norms(parameters, depth);
        add_into(stack.attention_grad_norm, grads.attention);
        add_into(stack.ffn_grad_norm, grads.ffn);
        std::vector<double> stream{model.stack().input_stats().mean_token_norm};
        for (const nn::LayerStats& layer : model.stack().layer_stats()) {
          stream.push_back(layer.output.mean_token_norm);
        }
        add_into(stack.stream_norm, stream);
        add_into(stack.stream_grad_norm, model.stack().residual_grad_norms());
        if (progress) {
          done += forward_work(params) / static_cast<double>(params.seeds) /
                  std::accumulate(params.depths.begin(), params.depths.end(), 0.0) /
                  static_cast<double>(params.placements.size()) * depth;
          progress(done / total,
                   std::string(nn::placement_name(placement)) + ", depth " + std::to_string(depth));
        }
      }
      const double count = params.seeds;
      stack.loss /= count;
      divide(stack.attention_grad_norm, count);
      divide(stack.ffn_grad_norm, count);
      divide(stack.stream_norm, count);
      divide(stack.stream_grad_norm, count);
      stack.top_to_bottom_ratio = stack.ffn_grad_norm.back() / stack.ffn_grad_norm.front();
      double sum = 0.0;
      for (int l = 0; l < depth; ++l) {
        sum += std::hypot(stack.attention_grad_norm[l], stack.ffn_grad_norm[l]);
      }
      stack.mean_layer_grad_norm = sum / depth;
      result.stacks.push_back(std::move(stack));
    }
  }
  return result;
}

nlohmann::json to_json(const InitGradientsParams& params) {
  return {{"placements", placements_json(params.placements)},
          {"depths", params.depths},
          {"d_model", params.shape.d_model},
          {"n_heads", params.shape.n_heads},
          {"d_ff", params.shape.d_ff},
          {"task", sequence_task_name(params.task)},
          {"length", params.length},
          {"symbols", params.symbols},
          {"batch", params.batch},
          {"seeds", params.seeds},
          {"seed", params.seed}};
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
                      {"top_to_bottom_ratio", s.top_to_bottom_ratio},
                      {"mean_layer_grad_norm", s.mean_layer_grad_norm}});
  }
  return {{"experiment", "init-gradients"}, {"params", to_json(result.params)}, {"stacks", stacks}};
}

std::string to_csv(const InitGradientsResult& result) {
  CsvWriter csv({"placement", "depth", "layer", "attention_grad_norm", "ffn_grad_norm",
                 "stream_norm", "stream_grad_norm"});
  for (const InitGradientsStack& s : result.stacks) {
    for (int l = 0; l < s.depth; ++l) {
      csv.cell(std::string(nn::placement_name(s.placement)))
          .cell(s.depth)
          .cell(l)
          .cell(s.attention_grad_norm[l])
          .cell(s.ffn_grad_norm[l])
          .cell(s.stream_norm[l + 1])
          .cell(s.stream_grad_norm[l])
          .end_row();
    }
  }
  return csv.text();
}

InitGradientsParams init_gradients_params_from_json(const nlohmann::json& object) {
  JsonParams reader(object, "init-gradients");
  bool quick = false;
  reader.read("quick", quick);
  InitGradientsParams params = quick ? init_gradients_quick() : InitGradientsParams{};
  read_placements(reader, object, params.placements);
  reader.read("depths", params.depths);
  read_shape(reader, params.shape);
  read_task(reader, params.task);
  reader.read("length", params.length);
  reader.read("symbols", params.symbols);
  reader.read("batch", params.batch);
  reader.read("seeds", params.seeds);
  reader.read("seed", params.seed);
  reader.finish();
  return params;
}

}  // namespace addnorm::lab
