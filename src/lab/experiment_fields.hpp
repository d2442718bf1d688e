// The parameter tables of the `addnorm lab-run` experiments (param_fields.hpp): the one
// place that names each parameter, says what it means and what values it accepts. The JSON the
// server reads and the results echo, the command-line options and the range checks all come from
// these tables. The transformer experiments (init-gradients, update-size, depth-training) share
// the model and task fields.
#pragma once

#include "addnorm/lab/activation_growth.hpp"
#include "addnorm/lab/batch_vs_layer.hpp"
#include "addnorm/lab/depth_training.hpp"
#include "addnorm/lab/gradient_flow.hpp"
#include "addnorm/lab/init_gradients.hpp"
#include "addnorm/lab/norm_steps.hpp"
#include "addnorm/lab/rank_collapse.hpp"
#include "addnorm/lab/sequence_task.hpp"
#include "addnorm/lab/trainability_map.hpp"
#include "addnorm/lab/update_size.hpp"
#include "addnorm/nn/block.hpp"
#include "lab/param_fields.hpp"

namespace addnorm::lab {

// Each enum's text: its own name and parse functions (parse throws Error naming the choices).
inline std::string placement_text(nn::Placement p) {
  return nn::placement_name(p);
}
template <>
struct EnumText<nn::Placement> : EnumTextOf<nn::Placement, placement_text, nn::parse_placement> {};
template <>
struct EnumText<SequenceTask> : EnumTextOf<SequenceTask, sequence_task_name, parse_sequence_task> {
};
template <>
struct EnumText<Sublayers> : EnumTextOf<Sublayers, sublayers_name, parse_sublayers> {};
template <>
struct EnumText<UpdateMode> : EnumTextOf<UpdateMode, update_mode_name, parse_update_mode> {};
template <>
struct EnumText<GrowthMode> : EnumTextOf<GrowthMode, growth_mode_name, parse_growth_mode> {};
template <>
struct EnumText<MapSchedule> : EnumTextOf<MapSchedule, map_schedule_name, parse_map_schedule> {};
// A row norm by the faces' names (norm_kind.hpp): the library's own spelling and error.
inline std::string norm_kind_name(NormKind kind) {
  return norm_traits(kind).name;
}
inline NormKind parse_norm_kind(const std::string& name) {
  return norm_kind_from(name);
}
template <>
struct EnumText<NormKind> : EnumTextOf<NormKind, norm_kind_name, parse_norm_kind> {};

// Runs table a's fields, then table b's.
template <class A, class B>
auto concat(A a, B b) {
  return [a, b](auto&& visit) {
    a(visit);
    b(visit);
  };
}

// ---- The transformer experiments ----

inline constexpr auto kModelShapeFields = [](auto&& visit) {
  visit(Field{"n_heads", "Attention heads", ADDNORM_LAB_MEMBER(n_heads), integer_in(1, 16)});
  visit(Field{"d_model", "Model width, a multiple of n_heads", ADDNORM_LAB_MEMBER(d_model),
              integer_in(4, 512)});
  visit(Field{"d_ff", "FFN hidden width", ADDNORM_LAB_MEMBER(d_ff), integer_in(1, 2048)});
  visit(Field{"sublayers", "attn_ffn (attention then FFN), ffn or attn (one sub-layer only)",
              ADDNORM_LAB_MEMBER(sublayers)});
};

// The model, task and seeds of init-gradients, update-size and depth-training; they differ only
// in how deep a stack and how long a sequence may be.
inline auto transformer_fields(int max_depth, int max_length) {
  return [=](auto&& visit) {
    visit(Field{"placements",
                "Any of post_norm,pre_norm,no_norm,no_residual,deep_norm,rezero,admin,bare",
                ADDNORM_LAB_MEMBER(placements), distinct_list_of(1, 8)});
    visit(Field{"depths", "Stack depths", ADDNORM_LAB_MEMBER(depths),
                list_of(1, 8, integer_in(1, max_depth))});
    nested(ADDNORM_LAB_MEMBER(shape), kModelShapeFields)(visit);
    visit(Field{"task", "copy, reverse or sort", ADDNORM_LAB_MEMBER(task)});
    visit(Field{"length", "Symbols per sequence (the sequence is 2 length + 1 tokens)",
                ADDNORM_LAB_MEMBER(length), integer_in(1, max_length)});
    visit(Field{"symbols", "Alphabet size", ADDNORM_LAB_MEMBER(symbols), integer_in(2, 100)});
    visit(Field{"batch", "Sequences per batch", ADDNORM_LAB_MEMBER(batch), integer_in(1, 256)});
    visit(Field{"seeds", "Seeds (models) per configuration", ADDNORM_LAB_MEMBER(seeds),
                integer_in(1, 64)});
    visit(Field{"seed", "First seed: run i uses seed + i for its weights and data",
                ADDNORM_LAB_MEMBER(seed)});
  };
}

inline auto init_gradients_fields() {
  return transformer_fields(96, 64);
}

inline auto update_size_fields() {
  return concat(transformer_fields(96, 64), [](auto&& visit) {
    visit(Field{"lrs", "Step sizes", ADDNORM_LAB_MEMBER(lrs), list_of(1, 8, positive_up_to(1.0))});
    visit(Field{"mode", "adam (one Adam step) or perturbation (weights + lr x N(0,1))",
                ADDNORM_LAB_MEMBER(mode)});
  });
}

inline auto depth_training_fields() {
  return concat(transformer_fields(48, 32), [](auto&& visit) {
    visit(Field{"steps", "Adam steps per run", ADDNORM_LAB_MEMBER(steps), integer_in(1, 20000)});
    visit(Field{"lr", "Peak learning rate", ADDNORM_LAB_MEMBER(lr), positive_up_to(1.0)});
    visit(Field{"warmups", "Schedules: constant, warmup or both", ADDNORM_LAB_MEMBER(warmups),
                distinct_list_of(1, 2), BoolWords{"constant", "warmup"}});
    visit(Field{"warmup_steps", "Warmup length, 1..steps", ADDNORM_LAB_MEMBER(warmup_steps)});
    visit(Field{"clip_norm", "Gradient clipping, 0 = off", ADDNORM_LAB_MEMBER(clip_norm),
                real_in(0.0, 1e6)});
    visit(Field{"dropout", "Dropout p on sub-layer outputs", ADDNORM_LAB_MEMBER(dropout),
                real_below(0.0, 1.0)});
    visit(Field{"target_loss", "Loss for steps-to-target", ADDNORM_LAB_MEMBER(target_loss),
                real_in(0.0, 100.0)});
    visit(Field{"grad_history_points", "Times per run the per-block gradient norms are kept",
                ADDNORM_LAB_MEMBER(grad_history_points), integer_in(1, 1000)});
  });
}

inline constexpr auto kRankCollapseFields = [](auto&& visit) {
  visit(Field{"placements", "Any of bare,no_residual,no_norm,post_norm,pre_norm,...",
              ADDNORM_LAB_MEMBER(placements), distinct_list_of(1, 8)});
  visit(Field{"depth", "Blocks in the stack", ADDNORM_LAB_MEMBER(depth), integer_in(1, 96)});
  nested(ADDNORM_LAB_MEMBER(shape), kModelShapeFields)(visit);
  visit(Field{"tokens", "Tokens per sequence", ADDNORM_LAB_MEMBER(tokens), integer_in(2, 64)});
  visit(Field{"batch", "Sequences per batch", ADDNORM_LAB_MEMBER(batch), integer_in(1, 64)});
  visit(Field{"seeds", "Seeds (models and inputs) per placement", ADDNORM_LAB_MEMBER(seeds),
              integer_in(1, 64)});
  visit(Field{"seed", "First seed: run i uses seed + i for its weights and input",
              ADDNORM_LAB_MEMBER(seed)});
};

inline constexpr auto kTrainabilityMapFields = [](auto&& visit) {
  visit(Field{"placements", "Any of post_norm,pre_norm,deep_norm,admin,...",
              ADDNORM_LAB_MEMBER(placements), distinct_list_of(1, 8)});
  visit(Field{"depths", "Stack depths", ADDNORM_LAB_MEMBER(depths),
              distinct_list_of(1, 6, integer_in(1, 48))});
  visit(Field{"lrs", "Peak learning rates", ADDNORM_LAB_MEMBER(lrs),
              distinct_list_of(1, 6, positive_up_to(1.0))});
  visit(Field{"schedules", "Any of constant,linear,noam", ADDNORM_LAB_MEMBER(schedules),
              distinct_list_of(1, 3)});
  visit(Field{"warmup_steps", "Warmup lengths, each 1..steps (a cell each for linear and noam)",
              ADDNORM_LAB_MEMBER(warmup_steps), distinct_list_of(1, 4, integer_in(1, 20000))});
  nested(ADDNORM_LAB_MEMBER(shape), kModelShapeFields)(visit);
  visit(Field{"task", "copy, reverse or sort", ADDNORM_LAB_MEMBER(task)});
  visit(Field{"length", "Symbols per sequence (the sequence is 2 length + 1 tokens)",
              ADDNORM_LAB_MEMBER(length), integer_in(1, 32)});
  visit(Field{"symbols", "Alphabet size", ADDNORM_LAB_MEMBER(symbols), integer_in(2, 100)});
  visit(Field{"batch", "Sequences per batch", ADDNORM_LAB_MEMBER(batch), integer_in(1, 256)});
  visit(Field{"steps", "Adam steps per run", ADDNORM_LAB_MEMBER(steps), integer_in(1, 20000)});
  visit(Field{"target_loss", "A run trained: held-out loss below this",
              ADDNORM_LAB_MEMBER(target_loss), real_in(0.0, 100.0)});
  visit(Field{"seeds", "Seeds (models) per cell", ADDNORM_LAB_MEMBER(seeds), integer_in(1, 64)});
  visit(Field{"seed", "First seed: run i of a cell uses seed + i", ADDNORM_LAB_MEMBER(seed)});
  visit(Field{"cell", "-1: the whole map; k: cell k only (for a cluster)", ADDNORM_LAB_MEMBER(cell),
              integer_in(-1, 1000000)});
};

// ---- The pages' experiments ----

inline constexpr auto kGradientFlowFields = [](auto&& visit) {
  visit(
      Field{"width", "d, the width of every layer", ADDNORM_LAB_MEMBER(width), integer_in(1, 256)});
  visit(Field{"depths", "Stack depths", ADDNORM_LAB_MEMBER(depths),
              list_of(1, 8, integer_in(1, 1000))});
  visit(Field{"weight_std", "W ~ N(0, weight_std)", ADDNORM_LAB_MEMBER(weight_std),
              real_in(0.0, 10.0)});
  visit(Field{"residual_scale", "lambda in y = lambda x + W x (1: identity shortcut)",
              ADDNORM_LAB_MEMBER(residual_scale), real_in(-10.0, 10.0)});
  visit(Field{"seed", "Seed of NumPy's default_rng", ADDNORM_LAB_MEMBER(seed)});
  visit(Field{"spread_seeds", "Other seeds drawn for the spread beside the single draw",
              ADDNORM_LAB_MEMBER(spread_seeds), integer_in(0, 4096)});
};

inline constexpr auto kActivationGrowthFields = [](auto&& visit) {
  visit(Field{"tokens", "Rows (tokens)", ADDNORM_LAB_MEMBER(tokens), integer_in(1, 256)});
  visit(Field{"width", "d", ADDNORM_LAB_MEMBER(width), integer_in(2, 512)});
  visit(Field{"layers", "Depth", ADDNORM_LAB_MEMBER(layers), integer_in(1, 200)});
  visit(Field{"spread_seeds", "Other seeds run for the spread beside the single draw",
              ADDNORM_LAB_MEMBER(spread_seeds), integer_in(0, 64)});
  visit(Field{"gain", "Init scale: W ~ N(0, gain / sqrt(d))", ADDNORM_LAB_MEMBER(gain),
              real_in(0.0, 10.0)});
  visit(Field{"eps", "The norms' eps", ADDNORM_LAB_MEMBER(eps), real_in(0.0, 1.0)});
  visit(Field{"modes", "Any of none,layer_norm,rms_norm,pre_norm,post_norm",
              ADDNORM_LAB_MEMBER(modes), distinct_list_of(1, 5)});
  visit(Field{"seed", "Seed of NumPy's default_rng", ADDNORM_LAB_MEMBER(seed)});
};

inline constexpr auto kNormStepsFields = [](auto&& visit) {
  visit(Field{"x", "The vector (e.g. 2,-3,1,4)", ADDNORM_LAB_MEMBER(x),
              list_of(1, 4096, float32_in(-1e30, 1e30))});
  visit(Field{"gamma", "One value for every feature, or one per value", ADDNORM_LAB_MEMBER(gamma),
              float32_in(-1e30, 1e30)});
  visit(Field{"beta", "The same (LayerNorm only)", ADDNORM_LAB_MEMBER(beta),
              float32_in(-1e30, 1e30)});
  visit(Field{"norm", "layer_norm or rms_norm", ADDNORM_LAB_MEMBER(norm)});
  visit(Field{"eps", "The norm's eps", ADDNORM_LAB_MEMBER(eps), float32_in(0.0, 1.0)});
};

// Counts and per-value limits that depend on other fields (rows of the table, batch sizes up to
// the number of sentences) are checked in validate().
inline constexpr auto kBatchVsLayerFields = [](auto&& visit) {
  visit(Field{"table_columns", "Columns of the table", ADDNORM_LAB_MEMBER(table_columns),
              integer_in(2, 64)});
  visit(
      Field{"table", "Table values in row order", ADDNORM_LAB_MEMBER(table), real_in(-1e30, 1e30)});
  visit(Field{"lengths", "Sentence lengths", ADDNORM_LAB_MEMBER(lengths),
              list_of(2, 32, integer_in(1, 64))});
  visit(Field{"width", "Features per token", ADDNORM_LAB_MEMBER(width), integer_in(2, 32)});
  visit(Field{"batch_sizes", "Batches of the first k sentences, k up to the number of sentences",
              ADDNORM_LAB_MEMBER(batch_sizes), list_of(1, 32)});
  visit(Field{"running_batches", "Training batches that set the running statistics",
              ADDNORM_LAB_MEMBER(running_batches), integer_in(1, 2000)});
  visit(Field{"momentum", "Running statistics momentum", ADDNORM_LAB_MEMBER(momentum),
              real_in(0.0, 1.0)});
  visit(Field{"eps", "The norms' eps", ADDNORM_LAB_MEMBER(eps), real_in(0.0, 1.0)});
  visit(Field{"seed", "Seed of NumPy's default_rng", ADDNORM_LAB_MEMBER(seed)});
};

}  // namespace addnorm::lab
