// Bad arguments to LayerNorm and RMSNorm, forward and backward: each is rejected with a message
// naming it, before anything is written.
#include <gtest/gtest.h>

#include "addnorm/ops.hpp"
#include "errors_test_support.hpp"

namespace addnorm {
namespace {

using testing::add_eps_rejections;
using testing::add_leading_tensor_rejections;
using testing::add_normalized_shape_rejections;
using testing::add_per_row_rejections;
using testing::add_tensor_rejections;
using testing::Arena;
using testing::expect_all_rejected;
using testing::expect_rejected;
using testing::inside;
using testing::overlap_message;
using testing::partial_alias_message;

// Every call below normalises x of shape [3, 8] over its last dim: 3 rows of 8.
const Shape kX{3, 8};
const Shape kDim{8};
const Shape kRows{3};

// ---------------------------------------------------------------------------------------------
struct LayerNormCall {
  ConstView x;
  Shape normalized_shape;
  MutableView y;
  NormOptions options;
  std::optional<NormStats> stats;
  void operator()() const { layer_norm(x, normalized_shape, y, options, stats); }
};

LayerNormCall valid_layer_norm(Arena& arena) {
  return {arena.input(kX), kDim, arena.output(kX),
          NormOptions{.gamma = arena.input(kDim), .beta = arena.input(kDim), .eps = 1e-5f},
          NormStats{arena.output(kRows), arena.output(kRows)}};
}

TEST(LayerNormErrors, RejectsEveryBadArgumentWithoutWriting) {
  using Call = LayerNormCall;
  std::vector<testing::Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> ConstView& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> MutableView& { return c.y; }, kX,
                              {3, 7});
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> MutableView& { return c.y; }, kX,
                              {24});
  add_tensor_rejections<Call>(rejections, "gamma",
                              [](Call& c) -> AnyConstView& { return *c.options.gamma; }, kDim, {7});
  add_tensor_rejections<Call>(
      rejections, "beta", [](Call& c) -> AnyConstView& { return *c.options.beta; }, kDim, {1, 8});
  add_eps_rejections<Call>(rejections, [](Call& c) -> float& { return c.options.eps.emplace(); });
  add_per_row_rejections<Call>(rejections, "mean",
                               [](Call& c) -> MutableView& { return c.stats->mean; });
  add_per_row_rejections<Call>(rejections, "rstd",
                               [](Call& c) -> MutableView& { return c.stats->rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"y partly over x", [](Call& c, Arena&) { c.y = inside(c.x, 1); },
           partial_alias_message("y", "x")},
          {"gamma inside y", [](Call& c, Arena&) { c.options.gamma = inside(c.y, 4, kDim); },
           overlap_message("y", "gamma")},
          {"beta inside y", [](Call& c, Arena&) { c.options.beta = inside(c.y, 16, kDim); },
           overlap_message("y", "beta")},
          {"mean inside y", [](Call& c, Arena&) { c.stats->mean = inside(c.y, 2, kRows); },
           overlap_message("y", "mean")},
          {"rstd partly over mean",
           [](Call& c, Arena&) { c.stats->rstd = inside(c.stats->mean, 1); },
           overlap_message("mean", "rstd")},
          {"rstd the same as mean", [](Call& c, Arena&) { c.stats->rstd = c.stats->mean; },
           overlap_message("mean", "rstd")},
          {"mean inside x", [](Call& c, Arena&) { c.stats->mean = inside(c.x, 5, kRows); },
           overlap_message("mean", "x")},
          {"rstd inside gamma",
           [](Call& c, Arena&) { c.stats->rstd = inside(*c.options.gamma, 2, kRows); },
           overlap_message("rstd", "gamma")},
      });
  expect_all_rejected(&valid_layer_norm, rejections);
}

// The design's own example of a message: the parameter, its shape, and the one expected.
TEST(LayerNormErrors, GammaOneShortNamesBothShapes) {
  Arena arena;
  const Shape x_shape{2, 512};
  LayerNormCall call{arena.input(x_shape),
                     {512},
                     arena.output(x_shape),
                     NormOptions{.gamma = arena.input({511}), .eps = 1e-5f},
                     {}};
  expect_rejected(call, arena, {"gamma has shape [511], expected [512]"});
}

// ---------------------------------------------------------------------------------------------
struct LayerNormBackwardCall {
  ConstView dy;
  ConstView x;
  Shape normalized_shape;
  LayerNormGrads grads;
  NormOptions options;
  std::optional<SavedStats> saved;
  void operator()() const { layer_norm_backward(dy, x, normalized_shape, grads, options, saved); }
};

LayerNormBackwardCall valid_layer_norm_backward(Arena& arena) {
  return {arena.input(kX),
          arena.input(kX),
          kDim,
          LayerNormGrads{arena.output(kX), arena.output(kDim), arena.output(kDim)},
          NormOptions{.gamma = arena.input(kDim), .beta = arena.input(kDim), .eps = 1e-5f},
          SavedStats{arena.input(kRows), arena.input(kRows)}};
}

TEST(LayerNormBackwardErrors, RejectsEveryBadArgumentWithoutWriting) {
  using Call = LayerNormBackwardCall;
  std::vector<testing::Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> ConstView& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> ConstView& { return c.dy; }, kX,
                              {3, 7});
  add_tensor_rejections<Call>(rejections, "dx",
                              [](Call& c) -> AnyMutableView& { return c.grads.dx; }, kX, {4, 8});
  add_tensor_rejections<Call>(rejections, "gamma",
                              [](Call& c) -> AnyConstView& { return *c.options.gamma; }, kDim, {7});
  add_tensor_rejections<Call>(rejections, "beta",
                              [](Call& c) -> AnyConstView& { return *c.options.beta; }, kDim, {9});
  add_tensor_rejections<Call>(rejections, "dgamma",
                              [](Call& c) -> MutableView& { return *c.grads.dgamma; }, kDim, {7});
  add_tensor_rejections<Call>(rejections, "dbeta",
                              [](Call& c) -> MutableView& { return *c.grads.dbeta; }, kDim, {3, 8});
  add_eps_rejections<Call>(rejections, [](Call& c) -> float& { return c.options.eps.emplace(); });
  add_per_row_rejections<Call>(rejections, "mean",
                               [](Call& c) -> ConstView& { return c.saved->mean; });
  add_per_row_rejections<Call>(rejections, "rstd",
                               [](Call& c) -> ConstView& { return c.saved->rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"dgamma without gamma",
           [](Call& c, Arena&) { c.options.gamma.reset(); },
           {"dgamma was requested but gamma is absent, expected no dgamma without gamma"}},
          // The header singles this out: gamma alone does not make a dbeta meaningful.
          {"dbeta without beta",
           [](Call& c, Arena&) { c.options.beta.reset(); },
           {"dbeta was requested but beta is absent, expected no dbeta without beta"}},
          {"dx partly over dy", [](Call& c, Arena&) { c.grads.dx = inside(c.dy, 1); },
           partial_alias_message("dx", "dy")},
          {"dx partly over x", [](Call& c, Arena&) { c.grads.dx = inside(c.x, 3); },
           partial_alias_message("dx", "x")},
          {"dgamma inside dx",
           [](Call& c, Arena&) { c.grads.dgamma = inside(c.grads.dx, 8, kDim); },
           overlap_message("dx", "dgamma")},
          {"dbeta the same as dgamma", [](Call& c, Arena&) { c.grads.dbeta = c.grads.dgamma; },
           overlap_message("dgamma", "dbeta")},
          {"dgamma partly over gamma",
           [](Call& c, Arena&) { c.grads.dgamma = inside(*c.options.gamma, 2); },
           overlap_message("dgamma", "gamma")},
          {"dbeta inside dy", [](Call& c, Arena&) { c.grads.dbeta = inside(c.dy, 8, kDim); },
           overlap_message("dbeta", "dy")},
          {"saved rstd inside dx",
           [](Call& c, Arena&) { c.saved->rstd = inside(c.grads.dx, 3, kRows); },
           overlap_message("dx", "rstd")},
      });
  expect_all_rejected(&valid_layer_norm_backward, rejections);
}

TEST(LayerNormBackwardErrors, SavedMeanOverlappingAnOutputIsRejected) {
  Arena arena;
  LayerNormBackwardCall call = valid_layer_norm_backward(arena);
  call.saved->mean = inside(call.grads.dx, 1, kRows);
  expect_rejected(call, arena, overlap_message("dx", "mean"));
}

// ---------------------------------------------------------------------------------------------
struct RmsNormCall {
  ConstView x;
  Shape normalized_shape;
  MutableView y;
  NormOptions options;
  OptionalMutable rstd;
  void operator()() const { rms_norm(x, normalized_shape, y, options, rstd); }
};

RmsNormCall valid_rms_norm(Arena& arena) {
  return {arena.input(kX), kDim, arena.output(kX),
          NormOptions{.gamma = arena.input(kDim), .zero_centered_gamma = true, .eps = 1e-6f},
          arena.output(kRows)};
}

TEST(RmsNormErrors, RejectsEveryBadArgumentWithoutWriting) {
  using Call = RmsNormCall;
  std::vector<testing::Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> ConstView& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> MutableView& { return c.y; }, kX,
                              {3, 9});
  add_tensor_rejections<Call>(
      rejections, "gamma", [](Call& c) -> AnyConstView& { return *c.options.gamma; }, kDim, {3, 8});
  add_eps_rejections<Call>(rejections, [](Call& c) -> float& { return c.options.eps.emplace(); });
  add_per_row_rejections<Call>(rejections, "rstd", [](Call& c) -> MutableView& { return *c.rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"y partly over x", [](Call& c, Arena&) { c.y = inside(c.x, 2); },
           partial_alias_message("y", "x")},
          {"rstd inside y", [](Call& c, Arena&) { c.rstd = inside(c.y, 1, kRows); },
           overlap_message("y", "rstd")},
          {"rstd inside gamma",
           [](Call& c, Arena&) { c.rstd = inside(*c.options.gamma, 0, kRows); },
           overlap_message("rstd", "gamma")},
          {"gamma inside y", [](Call& c, Arena&) { c.options.gamma = inside(c.y, 8, kDim); },
           overlap_message("y", "gamma")},
          {"rstd inside x", [](Call& c, Arena&) { c.rstd = inside(c.x, 20, kRows); },
           overlap_message("rstd", "x")},
      });
  expect_all_rejected(&valid_rms_norm, rejections);
}

TEST(RmsNormErrors, GammaOneShortNamesBothShapes) {
  Arena arena;
  const Shape x_shape{2, 512};
  RmsNormCall call{
      arena.input(x_shape),
      {512},
      arena.output(x_shape),
      NormOptions{.gamma = arena.input({511}), .zero_centered_gamma = false, .eps = 1e-6f},
      {}};
  expect_rejected(call, arena, {"gamma has shape [511], expected [512]"});
}

// ---------------------------------------------------------------------------------------------
struct RmsNormBackwardCall {
  ConstView dy;
  ConstView x;
  Shape normalized_shape;
  RmsNormGrads grads;
  NormOptions options;
  OptionalConst saved_rstd;
  void operator()() const {
    rms_norm_backward(dy, x, normalized_shape, grads, options, saved_rstd);
  }
};

RmsNormBackwardCall valid_rms_norm_backward(Arena& arena) {
  return {arena.input(kX),
          arena.input(kX),
          kDim,
          RmsNormGrads{arena.output(kX), arena.output(kDim)},
          NormOptions{.gamma = arena.input(kDim), .zero_centered_gamma = false, .eps = 1e-6f},
          arena.input(kRows)};
}

TEST(RmsNormBackwardErrors, RejectsEveryBadArgumentWithoutWriting) {
  using Call = RmsNormBackwardCall;
  std::vector<testing::Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> ConstView& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> ConstView& { return c.dy; }, kX,
                              {8, 3});
  add_tensor_rejections<Call>(rejections, "dx",
                              [](Call& c) -> AnyMutableView& { return c.grads.dx; }, kX, {3, 8, 1});
  add_tensor_rejections<Call>(rejections, "gamma",
                              [](Call& c) -> AnyConstView& { return *c.options.gamma; }, kDim, {9});
  add_tensor_rejections<Call>(rejections, "dgamma",
                              [](Call& c) -> MutableView& { return *c.grads.dgamma; }, kDim, {4});
  add_eps_rejections<Call>(rejections, [](Call& c) -> float& { return c.options.eps.emplace(); });
  add_per_row_rejections<Call>(rejections, "rstd",
                               [](Call& c) -> ConstView& { return *c.saved_rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"dgamma without gamma",
           [](Call& c, Arena&) { c.options.gamma.reset(); },
           {"dgamma was requested but gamma is absent, expected no dgamma without gamma"}},
          {"dx partly over dy", [](Call& c, Arena&) { c.grads.dx = inside(c.dy, 5); },
           partial_alias_message("dx", "dy")},
          {"dx partly over x", [](Call& c, Arena&) { c.grads.dx = inside(c.x, 1); },
           partial_alias_message("dx", "x")},
          {"dgamma inside dx",
           [](Call& c, Arena&) { c.grads.dgamma = inside(c.grads.dx, 3, kDim); },
           overlap_message("dx", "dgamma")},
          {"dgamma the same as gamma",
           [](Call& c, Arena&) { c.grads.dgamma = inside(*c.options.gamma, 0); },
           overlap_message("dgamma", "gamma")},
          {"saved rstd inside dgamma",
           [](Call& c, Arena&) { c.saved_rstd = inside(*c.grads.dgamma, 4, kRows); },
           overlap_message("dgamma", "rstd")},
          {"dgamma inside x", [](Call& c, Arena&) { c.grads.dgamma = inside(c.x, 16, kDim); },
           overlap_message("dgamma", "x")},
      });
  expect_all_rejected(&valid_rms_norm_backward, rejections);
}

}  // namespace
}  // namespace addnorm
