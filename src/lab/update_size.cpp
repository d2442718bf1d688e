// Experiment 7: the output change after one Adam step, per placement and depth.
#include "addnorm/lab/update_size.hpp"

#include <cmath>
#include <numeric>

#include "addnorm/nn/adam.hpp"
#include "addnorm/nn/parameter.hpp"
#include "addnorm/nn/sequence_model.hpp"
#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/json_params.hpp"
#include "lab/model_params_json.hpp"
#include "lab/transformer_probe.hpp"

namespace addnorm::lab {
namespace {

double rms(const std::vector<float>& values) {
  double sum = 0.0;
  for (float v : values) sum += double{v} * v;
  return std::sqrt(sum / static_cast<double>(values.size()));
}

double rms_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double{a[i]} - double{b[i]};
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(a.size()));
}

// The stack's output and every block's output for input x.
struct StackOutputs {
  std::vector<float> output;
  std::vector<std::vector<float>> blocks;
};

StackOutputs run_stack(nn::Stack& stack, const Tensor& x) {
  StackOutputs outputs;
  outputs.output = stack.forward(x).values();
  for (int64_t l = 0; l < stack.depth(); ++l)
    outputs.blocks.push_back(stack.block(l).output().values());
  return outputs;
}

double forward_work(const UpdateSizeParams& p) {
  const double seq = 2.0 * p.length + 1.0;
  const double blocks = std::accumulate(p.depths.begin(), p.depths.end(), 0.0);
  return blocks * static_cast<double>(p.placements.size()) * p.seeds * p.batch * seq *
         p.shape.d_model * (4.0 * p.shape.d_model + 2.0 * p.shape.d_ff + 2.0 * seq);
}

}  // namespace

UpdateSizeParams update_size_quick() {
  UpdateSizeParams params;
  params.depths = {6, 12};
  params.shape = {32, 4, 64};
  params.seeds = 1;
  return params;
}

void validate(const UpdateSizeParams& params) {
  check_count("placements", params.placements.size(), 1, 6);
  check_distinct(params.placements);
  check_count("depths", params.depths.size(), 1, 8);
  check_each_integer<int>("depths", params.depths, 1, 96);
  validate(params.shape);
  check_integer("length", params.length, 1, 64);
  check_integer("symbols", params.symbols, 2, 100);
  check_integer("batch", params.batch, 1, 256);
  if (!(params.lr > 0.0) || params.lr > 1.0 || !std::isfinite(params.lr)) {
    throw Error("lr is " + number_text(params.lr) + ", expected a number in (0, 1]");
  }
  check_integer("seeds", params.seeds, 1, 16);
  const double work = forward_work(params);
  if (work > kUpdateSizeMaxWork) {
    throw Error("the run needs about " + number_text(work) + " multiply-adds per forward, " +
                "expected at most " + number_text(kUpdateSizeMaxWork) +
                " (fewer depths, seeds or placements, or a smaller model or batch)");
  }
}

UpdateSizeResult run_update_size(const UpdateSizeParams& params, const Progress& progress) {
  validate(params);
  UpdateSizeResult result;
  result.params = params;
  const double total_blocks = std::accumulate(params.depths.begin(), params.depths.end(), 0.0) *
                              static_cast<double>(params.placements.size()) * params.seeds;
  double done_blocks = 0.0;
  for (nn::Placement placement : params.placements) {
    for (int depth : params.depths) {
      UpdateSizeStack stack;
      stack.placement = placement;
      stack.depth = depth;
      stack.layer_change.assign(static_cast<size_t>(depth), 0.0);
      for (int i = 0; i < params.seeds; ++i) {
        const uint64_t seed = params.seed + static_cast<uint64_t>(i);
        nn::SequenceModel model(
            model_config(params.shape, placement, depth, params.symbols + 2, seed));
        model.set_training(false);  // dropout is 0 anyway; BatchNorm would use running stats
        numpy_random::Generator generator(seed);
        const TaskBatch batch =
            make_task_batch(params.task, params.symbols, params.length, params.batch, generator);
        Tensor x;
        model.embedding().forward(batch.tokens, batch.batch, batch.seq, x);
        const StackOutputs before = run_stack(model.stack(), x);

        const nn::ParameterList parameters = model.parameters();
        nn::zero_grad(parameters);
        const double loss_before =
            model.forward_backward(batch.tokens, batch.targets, batch.batch, batch.seq);
        nn::AdamOptions options;
        options.schedule.kind = nn::LrScheduleKind::constant;
        options.schedule.lr = params.lr;
        nn::Adam adam(parameters, options);
        adam.step();
        const double loss_after = model.loss(batch.tokens, batch.targets, batch.batch, batch.seq);

        const StackOutputs after = run_stack(model.stack(), x);
        stack.absolute_output_change += rms_difference(after.output, before.output);
        stack.output_change += rms_difference(after.output, before.output) / rms(before.output);
        for (int l = 0; l < depth; ++l) {
          stack.layer_change[l] +=
              rms_difference(after.blocks[l], before.blocks[l]) / rms(before.blocks[l]);
        }
        stack.loss_before += loss_before;
        stack.loss_after += loss_after;
        done_blocks += depth;
        if (progress) {
          progress(done_blocks / total_blocks,
                   std::string(nn::placement_name(placement)) + ", depth " + std::to_string(depth));
        }
      }
      const double count = params.seeds;
      stack.output_change /= count;
      stack.absolute_output_change /= count;
      stack.loss_before /= count;
      stack.loss_after /= count;
      for (double& v : stack.layer_change) v /= count;
      result.stacks.push_back(std::move(stack));
    }
  }
  return result;
}

nlohmann::json to_json(const UpdateSizeParams& params) {
  return {{"placements", placements_json(params.placements)},
          {"depths", params.depths},
          {"d_model", params.shape.d_model},
          {"n_heads", params.shape.n_heads},
          {"d_ff", params.shape.d_ff},
          {"task", sequence_task_name(params.task)},
          {"length", params.length},
          {"symbols", params.symbols},
          {"batch", params.batch},
          {"lr", params.lr},
          {"seeds", params.seeds},
          {"seed", params.seed}};
}

nlohmann::json to_json(const UpdateSizeResult& result) {
  nlohmann::json stacks = nlohmann::json::array();
  for (const UpdateSizeStack& s : result.stacks) {
    stacks.push_back({{"placement", std::string(nn::placement_name(s.placement))},
                      {"depth", s.depth},
                      {"output_change", s.output_change},
                      {"absolute_output_change", s.absolute_output_change},
                      {"loss_before", s.loss_before},
                      {"loss_after", s.loss_after},
                      {"layer_change", s.layer_change}});
  }
  return {{"experiment", "update-size"}, {"params", to_json(result.params)}, {"stacks", stacks}};
}

std::string to_csv(const UpdateSizeResult& result) {
  CsvWriter csv({"placement", "depth", "layer", "change"});
  for (const UpdateSizeStack& s : result.stacks) {
    for (int l = 0; l < s.depth; ++l) {
      csv.cell(std::string(nn::placement_name(s.placement)))
          .cell(s.depth)
          .cell(l)
          .cell(s.layer_change[l])
          .end_row();
    }
    csv.cell(std::string(nn::placement_name(s.placement)))
        .cell(s.depth)
        .cell("output")
        .cell(s.output_change)
        .end_row();
  }
  return csv.text();
}

UpdateSizeParams update_size_params_from_json(const nlohmann::json& object) {
  JsonParams reader(object, "update-size");
  bool quick = false;
  reader.read("quick", quick);
  UpdateSizeParams params = quick ? update_size_quick() : UpdateSizeParams{};
  read_placements(reader, object, params.placements);
  reader.read("depths", params.depths);
  read_shape(reader, params.shape);
  read_task(reader, params.task);
  reader.read("length", params.length);
  reader.read("symbols", params.symbols);
  reader.read("batch", params.batch);
  reader.read("lr", params.lr);
  reader.read("seeds", params.seeds);
  reader.read("seed", params.seed);
  reader.finish();
  return params;
}

}  // namespace addnorm::lab
