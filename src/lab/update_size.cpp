// Experiment 7: the output change after one Adam step, per placement and depth.
#include "addnorm/lab/update_size.hpp"

#include <cmath>
#include <numeric>

#include "addnorm/nn/adam.hpp"
#include "addnorm/nn/parameter.hpp"
#include "addnorm/nn/sequence_model.hpp"
#include "lab/checks.hpp"
#include "lab/csv.hpp"
#include "lab/experiment_fields.hpp"
#include "lab/parallel_runs.hpp"
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

// The noise of perturbation mode: generator seed + this, so it differs from the batch's draws.
constexpr uint64_t kNoiseSeedOffset = 2'000'003;

// One seed's changes, one entry per lr.
struct SeedChanges {
  std::vector<double> output, absolute, loss_before, loss_after;
  std::vector<std::vector<double>> layers;
};

SeedChanges measure_one(const UpdateSizeParams& params, nn::Placement placement, int depth,
                        uint64_t seed, const Checkpoint& checkpoint) {
  nn::SequenceModel model(model_config(params.shape, placement, depth, params.symbols + 2, seed));
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
  std::vector<std::vector<float>> original;
  for (const nn::Parameter* p : parameters) original.push_back(p->value.values());

  SeedChanges changes;
  for (size_t k = 0; k < params.lrs.size(); ++k) {
    const double lr = params.lrs[k];
    checkpoint(static_cast<double>(k) / static_cast<double>(params.lrs.size()));  // a step each
    if (params.mode == UpdateMode::adam) {
      nn::AdamOptions options;
      options.schedule.kind = nn::LrScheduleKind::constant;
      options.schedule.lr = lr;
      nn::Adam adam(parameters, options);
      adam.step();
    } else {
      // The same draws for every lr: only the size of the move changes along the sweep.
      numpy_random::Generator noise(seed + kNoiseSeedOffset);
      for (nn::Parameter* p : parameters) {
        if (p->layer < 0) continue;  // the stack's weights only: its input x is held fixed
        for (float& v : p->value.values()) {
          v = static_cast<float>(v + lr * noise.standard_normal());
        }
      }
    }
    const StackOutputs after = run_stack(model.stack(), x);
    const double absolute = rms_difference(after.output, before.output);
    changes.absolute.push_back(absolute);
    changes.output.push_back(absolute / rms(before.output));
    std::vector<double> layers;
    for (int l = 0; l < depth; ++l) {
      layers.push_back(rms_difference(after.blocks[l], before.blocks[l]) / rms(before.blocks[l]));
    }
    changes.layers.push_back(std::move(layers));
    changes.loss_before.push_back(loss_before);
    changes.loss_after.push_back(model.loss(batch.tokens, batch.targets, batch.batch, batch.seq));
    for (size_t i = 0; i < parameters.size(); ++i) parameters[i]->value.values() = original[i];
  }
  return changes;
}

double forward_work(const UpdateSizeParams& p) {
  const double seq = 2.0 * p.length + 1.0;
  const double blocks = std::accumulate(p.depths.begin(), p.depths.end(), 0.0);
  return blocks * static_cast<double>(p.placements.size()) * p.seeds * p.batch * seq *
         p.shape.d_model * (4.0 * p.shape.d_model + 2.0 * p.shape.d_ff + 2.0 * seq) *
         (1.0 + static_cast<double>(p.lrs.size()) / 3.0);  // a forward per lr, a third of a step
}

}  // namespace

std::string update_mode_name(UpdateMode mode) {
  return mode == UpdateMode::adam ? "adam" : "perturbation";
}

UpdateMode parse_update_mode(const std::string& name) {
  for (UpdateMode mode : {UpdateMode::adam, UpdateMode::perturbation}) {
    if (update_mode_name(mode) == name) return mode;
  }
  throw Error("mode is \"" + name + "\", expected adam or perturbation");
}

UpdateSizeParams update_size_quick() {
  UpdateSizeParams params;
  params.depths = {6, 12};
  params.shape = {32, 4, 64};
  params.seeds = 4;
  return params;
}

void validate(const UpdateSizeParams& params) {
  check_fields(params, update_size_fields());
  validate(params.shape);
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
  const std::vector<SeedChanges> measured = measure_every_run(
      params,
      [&](nn::Placement placement, int depth, uint64_t seed, const Checkpoint& checkpoint) {
        return measure_one(params, placement, depth, seed, checkpoint);
      },
      progress);

  const size_t seeds = static_cast<size_t>(params.seeds);
  size_t first = 0;
  for (nn::Placement placement : params.placements) {
    for (int depth : params.depths) {
      for (size_t k = 0; k < params.lrs.size(); ++k) {
        UpdateSizeStack stack;
        stack.placement = placement;
        stack.depth = depth;
        stack.lr = params.lrs[k];
        stack.layer_change.assign(static_cast<size_t>(depth), 0.0);
        std::vector<double> absolute;
        for (size_t i = first; i < first + seeds; ++i) {
          const SeedChanges& c = measured[i];
          stack.output_change_per_seed.push_back(c.output[k]);
          absolute.push_back(c.absolute[k]);
          stack.loss_before += c.loss_before[k] / params.seeds;
          stack.loss_after += c.loss_after[k] / params.seeds;
          for (int l = 0; l < depth; ++l) stack.layer_change[l] += c.layers[k][l] / params.seeds;
        }
        stack.output_change_spread = spread_of(stack.output_change_per_seed);
        stack.output_change = stack.output_change_spread.median;
        stack.absolute_output_change = spread_of(absolute).median;
        result.stacks.push_back(std::move(stack));
      }
      first += seeds;
    }
  }
  const auto find = [&](nn::Placement placement, int depth, double lr) -> const UpdateSizeStack* {
    for (const UpdateSizeStack& s : result.stacks) {
      if (s.placement == placement && s.depth == depth && s.lr == lr) return &s;
    }
    return nullptr;
  };
  for (double lr : params.lrs) {
    for (int depth : params.depths) {
      const UpdateSizeStack* post = find(nn::Placement::post_norm, depth, lr);
      const UpdateSizeStack* pre = find(nn::Placement::pre_norm, depth, lr);
      const UpdateSizeStack* deep = find(nn::Placement::deep_norm, depth, lr);
      if (post == nullptr || pre == nullptr || deep == nullptr) continue;
      UpdateOrdering ordering{lr, depth, 0, params.seeds};
      for (size_t i = 0; i < seeds; ++i) {
        const double a = post->output_change_per_seed[i], b = pre->output_change_per_seed[i],
                     c = deep->output_change_per_seed[i];
        ordering.holds += (a > b && b > c) ? 1 : 0;
      }
      result.orderings.push_back(ordering);
    }
  }
  return result;
}

nlohmann::json to_json(const UpdateSizeParams& params) {
  return fields_to_json(params, update_size_fields());
}

nlohmann::json to_json(const UpdateSizeResult& result) {
  nlohmann::json stacks = nlohmann::json::array();
  for (const UpdateSizeStack& s : result.stacks) {
    stacks.push_back({{"placement", std::string(nn::placement_name(s.placement))},
                      {"depth", s.depth},
                      {"lr", s.lr},
                      {"output_change", s.output_change},
                      {"output_change_spread", to_json(s.output_change_spread)},
                      {"output_change_per_seed", s.output_change_per_seed},
                      {"absolute_output_change", s.absolute_output_change},
                      {"loss_before", s.loss_before},
                      {"loss_after", s.loss_after},
                      {"layer_change", s.layer_change}});
  }
  nlohmann::json orderings = nlohmann::json::array();
  for (const UpdateOrdering& o : result.orderings) {
    orderings.push_back({{"lr", o.lr}, {"depth", o.depth}, {"holds", o.holds}, {"seeds", o.seeds}});
  }
  return {{"experiment", "update-size"},
          {"params", to_json(result.params)},
          {"stacks", stacks},
          {"orderings", orderings}};
}

std::string to_csv(const UpdateSizeResult& result) {
  CsvWriter csv({"placement", "depth", "lr", "layer", "change"});
  for (const UpdateSizeStack& s : result.stacks) {
    for (int l = 0; l < s.depth; ++l) {
      csv.cell(std::string(nn::placement_name(s.placement)))
          .cell(s.depth)
          .cell(s.lr)
          .cell(l)
          .cell(s.layer_change[l])
          .end_row();
    }
    csv.cell(std::string(nn::placement_name(s.placement)))
        .cell(s.depth)
        .cell(s.lr)
        .cell("output")
        .cell(s.output_change)
        .end_row();
  }
  return csv.text();
}

UpdateSizeParams update_size_params_from_json(const nlohmann::json& object) {
  return read_params(object, "update-size", update_size_fields(), update_size_quick);
}

}  // namespace addnorm::lab
