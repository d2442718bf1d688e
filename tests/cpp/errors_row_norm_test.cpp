// Bad arguments to LayerNorm and RMSNorm, forward and backward, for both element types in one
// typed test: the float32 ops (addnorm/ops.hpp, views of any storage type) and the float64 ops
// (addnorm/float64.hpp) share their checks (src/ops/op_checks.hpp), so each must refuse every
// case below with a message naming the argument, and write nothing. The float64 ops once reached
// the reference kernels unchecked through the Python module (issue 14, item 10).
#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

#include "addnorm/overloads.hpp"
#include "errors_test_support.hpp"

namespace addnorm {
namespace {

using testing::add_eps_rejections;
using testing::add_leading_tensor_rejections;
using testing::add_normalized_shape_rejections;
using testing::add_per_row_rejections;
using testing::add_tensor_rejections;
using testing::expect_all_rejected;
using testing::expect_rejected;
using testing::In;
using testing::inside;
using testing::Out;
using testing::overlap_message;
using testing::partial_alias_message;

using testing::kDim;
using testing::kRows;
using testing::kX;

// ---------------------------------------------------------------------------------------------
template <class T>
struct LayerNormCall {
  using Element = T;
  In<T> x;
  Shape normalized_shape;
  Out<T> y;
  BasicNormOptions<T> options;
  std::optional<BasicNormStats<T>> stats;
  void operator()() const { overloads::layer_norm(x, normalized_shape, y, options, stats); }
};

template <class T>
LayerNormCall<T> valid_layer_norm(testing::BasicArena<T>& arena) {
  return {
      arena.input(kX), kDim, arena.output(kX),
      BasicNormOptions<T>{.gamma = arena.input(kDim), .beta = arena.input(kDim), .eps = T(1e-5)},
      BasicNormStats<T>{arena.output(kRows), arena.output(kRows)}};
}

template <class T>
struct LayerNormBackwardCall {
  using Element = T;
  In<T> dy;
  In<T> x;
  Shape normalized_shape;
  BasicLayerNormGrads<T> grads;
  BasicNormOptions<T> options;
  std::optional<BasicSavedStats<T>> saved;
  void operator()() const {
    overloads::layer_norm_backward(dy, x, normalized_shape, grads, options, saved);
  }
};

template <class T>
LayerNormBackwardCall<T> valid_layer_norm_backward(testing::BasicArena<T>& arena) {
  return {
      arena.input(kX),
      arena.input(kX),
      kDim,
      BasicLayerNormGrads<T>{arena.output(kX), arena.output(kDim), arena.output(kDim)},
      BasicNormOptions<T>{.gamma = arena.input(kDim), .beta = arena.input(kDim), .eps = T(1e-5)},
      BasicSavedStats<T>{arena.input(kRows), arena.input(kRows)}};
}

template <class T>
struct RmsNormCall {
  using Element = T;
  In<T> x;
  Shape normalized_shape;
  Out<T> y;
  BasicNormOptions<T> options;
  std::optional<Out<T>> rstd;
  void operator()() const { overloads::rms_norm(x, normalized_shape, y, options, rstd); }
};

template <class T>
RmsNormCall<T> valid_rms_norm(testing::BasicArena<T>& arena) {
  return {
      arena.input(kX), kDim, arena.output(kX),
      BasicNormOptions<T>{.gamma = arena.input(kDim), .zero_centered_gamma = true, .eps = T(1e-6)},
      arena.output(kRows)};
}

template <class T>
struct RmsNormBackwardCall {
  using Element = T;
  In<T> dy;
  In<T> x;
  Shape normalized_shape;
  BasicRmsNormGrads<T> grads;
  BasicNormOptions<T> options;
  std::optional<In<T>> saved_rstd;
  void operator()() const {
    overloads::rms_norm_backward(dy, x, normalized_shape, grads, options, saved_rstd);
  }
};

template <class T>
RmsNormBackwardCall<T> valid_rms_norm_backward(testing::BasicArena<T>& arena) {
  return {arena.input(kX),
          arena.input(kX),
          kDim,
          BasicRmsNormGrads<T>{arena.output(kX), arena.output(kDim)},
          BasicNormOptions<T>{.gamma = arena.input(kDim), .eps = T(1e-6)},
          arena.input(kRows)};
}

// ---------------------------------------------------------------------------------------------
template <class T>
class RowNormErrors : public ::testing::Test {};

TYPED_TEST_SUITE(RowNormErrors, testing::ElementTypes, testing::ElementName);

TYPED_TEST(RowNormErrors, LayerNormRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = LayerNormCall<T>;
  using Arena = testing::BasicArena<T>;
  std::vector<testing::Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> Out<T>& { return c.y; }, kX, {3, 7});
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> Out<T>& { return c.y; }, kX, {24});
  add_tensor_rejections<Call>(rejections, "gamma",
                              [](Call& c) -> NormConst<T>& { return *c.options.gamma; }, kDim, {7});
  add_tensor_rejections<Call>(
      rejections, "beta", [](Call& c) -> NormConst<T>& { return *c.options.beta; }, kDim, {1, 8});
  add_eps_rejections<Call>(rejections, [](Call& c) -> T& { return c.options.eps.emplace(); });
  add_per_row_rejections<Call>(rejections, "mean",
                               [](Call& c) -> Out<T>& { return c.stats->mean; });
  add_per_row_rejections<Call>(rejections, "rstd",
                               [](Call& c) -> Out<T>& { return c.stats->rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"another kind",
           [](Call& c, Arena&) { c.options.norm = NormKind::rms_norm; },
           {"^norm is rms_norm, expected layer_norm (the op's own) or none"}},
          {"zero_centered_gamma",
           [](Call& c, Arena&) { c.options.zero_centered_gamma = true; },
           {"^zero_centered_gamma was set for layer_norm"}},
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
  expect_all_rejected(&valid_layer_norm<T>, rejections);
}

// The design's own example of a message: the parameter, its shape, and the one expected.
TYPED_TEST(RowNormErrors, GammaOneShortNamesBothShapes) {
  using T = TypeParam;
  testing::BasicArena<T> arena;
  const Shape x_shape{2, 512};
  LayerNormCall<T> layer{arena.input(x_shape),
                         {512},
                         arena.output(x_shape),
                         BasicNormOptions<T>{.gamma = arena.input({511})},
                         {}};
  expect_rejected(layer, arena, {"gamma has shape [511], expected [512]"});
  RmsNormCall<T> rms{arena.input(x_shape),
                     {512},
                     arena.output(x_shape),
                     BasicNormOptions<T>{.gamma = arena.input({511})},
                     {}};
  expect_rejected(rms, arena, {"gamma has shape [511], expected [512]"});
}

TYPED_TEST(RowNormErrors, LayerNormBackwardRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = LayerNormBackwardCall<T>;
  using Arena = testing::BasicArena<T>;
  std::vector<testing::Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> In<T>& { return c.dy; }, kX, {3, 7});
  add_tensor_rejections<Call>(rejections, "dx",
                              [](Call& c) -> NormMutable<T>& { return c.grads.dx; }, kX, {4, 8});
  add_tensor_rejections<Call>(rejections, "gamma",
                              [](Call& c) -> NormConst<T>& { return *c.options.gamma; }, kDim, {7});
  add_tensor_rejections<Call>(rejections, "beta",
                              [](Call& c) -> NormConst<T>& { return *c.options.beta; }, kDim, {9});
  add_tensor_rejections<Call>(rejections, "dgamma",
                              [](Call& c) -> Out<T>& { return *c.grads.dgamma; }, kDim, {7});
  add_tensor_rejections<Call>(rejections, "dbeta",
                              [](Call& c) -> Out<T>& { return *c.grads.dbeta; }, kDim, {3, 8});
  add_eps_rejections<Call>(rejections, [](Call& c) -> T& { return c.options.eps.emplace(); });
  add_per_row_rejections<Call>(rejections, "mean", [](Call& c) -> In<T>& { return c.saved->mean; });
  add_per_row_rejections<Call>(rejections, "rstd", [](Call& c) -> In<T>& { return c.saved->rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"another kind",
           [](Call& c, Arena&) { c.options.norm = NormKind::rms_norm; },
           {"^norm is rms_norm, expected layer_norm (the op's own) or none"}},
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
          {"dbeta inside dx", [](Call& c, Arena&) { c.grads.dbeta = inside(c.grads.dx, 3, kDim); },
           overlap_message("dx", "dbeta")},
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
          {"saved mean inside dx",
           [](Call& c, Arena&) { c.saved->mean = inside(c.grads.dx, 1, kRows); },
           overlap_message("dx", "mean")},
      });
  expect_all_rejected(&valid_layer_norm_backward<T>, rejections);
}

TYPED_TEST(RowNormErrors, RmsNormRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = RmsNormCall<T>;
  using Arena = testing::BasicArena<T>;
  std::vector<testing::Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> Out<T>& { return c.y; }, kX, {3, 9});
  add_tensor_rejections<Call>(
      rejections, "gamma", [](Call& c) -> NormConst<T>& { return *c.options.gamma; }, kDim, {3, 8});
  add_eps_rejections<Call>(rejections, [](Call& c) -> T& { return c.options.eps.emplace(); });
  add_per_row_rejections<Call>(rejections, "rstd", [](Call& c) -> Out<T>& { return *c.rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"another kind",
           [](Call& c, Arena&) { c.options.norm = NormKind::layer_norm; },
           {"^norm is layer_norm, expected rms_norm (the op's own) or none"}},
          {"beta",
           [](Call& c, Arena&) { c.options.beta = c.options.gamma; },
           {"^beta was given for rms_norm, expected none (it has no shift)"}},
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
  expect_all_rejected(&valid_rms_norm<T>, rejections);
}

TYPED_TEST(RowNormErrors, RmsNormBackwardRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = RmsNormBackwardCall<T>;
  using Arena = testing::BasicArena<T>;
  std::vector<testing::Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> In<T>& { return c.dy; }, kX, {8, 3});
  add_tensor_rejections<Call>(rejections, "dx",
                              [](Call& c) -> NormMutable<T>& { return c.grads.dx; }, kX, {3, 8, 1});
  add_tensor_rejections<Call>(rejections, "gamma",
                              [](Call& c) -> NormConst<T>& { return *c.options.gamma; }, kDim, {9});
  add_tensor_rejections<Call>(rejections, "dgamma",
                              [](Call& c) -> Out<T>& { return *c.grads.dgamma; }, kDim, {4});
  add_eps_rejections<Call>(rejections, [](Call& c) -> T& { return c.options.eps.emplace(); });
  add_per_row_rejections<Call>(rejections, "rstd", [](Call& c) -> In<T>& { return *c.saved_rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"another kind",
           [](Call& c, Arena&) { c.options.norm = NormKind::layer_norm; },
           {"^norm is layer_norm, expected rms_norm (the op's own) or none"}},
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
  expect_all_rejected(&valid_rms_norm_backward<T>, rejections);
}

}  // namespace
}  // namespace addnorm
