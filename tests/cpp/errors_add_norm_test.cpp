// Bad arguments to the fused pre-norm and post-norm Add & Norm, forward and backward, for both
// element types in one typed test (the float32 ops of addnorm/ops.hpp and the float64 ops of
// addnorm/float64.hpp share their checks, src/ops/op_checks.hpp): each is rejected with a
// message naming it, before anything is written.
#include <gtest/gtest.h>

#include <string>
#include <type_traits>

#include "addnorm/overloads.hpp"
#include "errors_test_support.hpp"

namespace addnorm {
namespace {

using testing::add_dropout_rejections;
using testing::add_eps_rejections;
using testing::add_leading_tensor_rejections;
using testing::add_normalized_shape_rejections;
using testing::add_per_row_rejections;
using testing::add_tensor_rejections;
using testing::expect_all_rejected;
using testing::In;
using testing::inside;
using testing::Out;
using testing::overlap_message;
using testing::partial_alias_message;
using testing::Rejection;

using testing::kDim;
using testing::kRows;
using testing::kX;

// The rejections of gamma, beta, the norm-specific options and eps, shared by all four calls.
template <class Call>
void add_option_rejections(std::vector<Rejection<Call>>& rejections) {
  using T = testing::ElementOf<Call>;
  using Arena = testing::ArenaOf<Call>;
  add_tensor_rejections<Call>(rejections, "gamma",
                              [](Call& c) -> NormConst<T>& { return *c.options.gamma; }, kDim, {7});
  add_tensor_rejections<Call>(
      rejections, "beta", [](Call& c) -> NormConst<T>& { return *c.options.beta; }, kDim, {2, 4});
  add_eps_rejections<Call>(rejections, [](Call& c) -> T& { return c.options.eps.emplace(); });
  rejections.push_back({"beta with rms_norm",
                        [](Call& c, Arena&) { c.options.norm = NormKind::rms_norm; },
                        {"beta was given for rms_norm, expected none (it has no shift)"}});
  rejections.push_back(
      {"zero_centered_gamma with layer_norm",
       [](Call& c, Arena&) { c.options.zero_centered_gamma = true; },
       {"zero_centered_gamma was set for layer_norm, expected it only with rms_norm"}});
}

// The rejections of a requested parameter gradient: without its parameter, or misshapen.
template <class Call>
void add_parameter_grad_rejections(std::vector<Rejection<Call>>& rejections) {
  using T = testing::ElementOf<Call>;
  using Arena = testing::ArenaOf<Call>;
  add_tensor_rejections<Call>(rejections, "dgamma",
                              [](Call& c) -> Out<T>& { return *c.grads.dgamma; }, kDim, {9});
  add_tensor_rejections<Call>(rejections, "dbeta",
                              [](Call& c) -> Out<T>& { return *c.grads.dbeta; }, kDim, {1});
  rejections.push_back(
      {"dgamma without gamma",
       [](Call& c, Arena&) { c.options.gamma.reset(); },
       {"dgamma was requested but gamma is absent, expected no dgamma without gamma"}});
  rejections.push_back(
      {"dbeta without beta",
       [](Call& c, Arena&) { c.options.beta.reset(); },
       {"dbeta was requested but beta is absent, expected no dbeta without beta"}});
}

template <class T>
BasicNormOptions<T> layer_norm_options(testing::BasicArena<T>& arena) {
  return {.norm = NormKind::layer_norm, .gamma = arena.input(kDim), .beta = arena.input(kDim)};
}

// ---------------------------------------------------------------------------------------------
template <class T>
struct AddNormPreCall {
  using Element = T;
  In<T> x;
  In<T> r;
  Shape normalized_shape;
  Out<T> h;
  Out<T> y;
  BasicNormOptions<T> options;
  std::optional<BasicNormStats<T>> stats;
  void operator()() const { overloads::add_norm_pre(x, r, normalized_shape, h, y, options, stats); }
};

template <class T>
AddNormPreCall<T> valid_add_norm_pre(testing::BasicArena<T>& arena) {
  return {arena.input(kX),
          arena.input(kX),
          kDim,
          arena.output(kX),
          arena.output(kX),
          layer_norm_options(arena),
          BasicNormStats<T>{arena.output(kRows), arena.output(kRows)}};
}

// ---------------------------------------------------------------------------------------------
template <class T>
class FusedErrors : public ::testing::Test {};

TYPED_TEST_SUITE(FusedErrors, testing::ElementTypes, testing::ElementName);

TYPED_TEST(FusedErrors, PreNormRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = AddNormPreCall<T>;
  using Arena = testing::BasicArena<T>;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "r", [](Call& c) -> In<T>& { return c.r; }, kX, {3, 7});
  add_tensor_rejections<Call>(rejections, "h", [](Call& c) -> Out<T>& { return c.h; }, kX, {3, 9});
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> Out<T>& { return c.y; }, kX, {24});
  add_option_rejections(rejections);
  add_per_row_rejections<Call>(rejections, "mean",
                               [](Call& c) -> Out<T>& { return c.stats->mean; });
  add_per_row_rejections<Call>(rejections, "rstd",
                               [](Call& c) -> Out<T>& { return c.stats->rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"h partly over x", [](Call& c, Arena&) { c.h = inside(c.x, 1); },
           partial_alias_message("h", "x")},
          {"h partly over r", [](Call& c, Arena&) { c.h = inside(c.r, 7); },
           partial_alias_message("h", "r")},
          // Only h replaces an input; y is read from h, so it must not be x.
          {"y the same as x", [](Call& c, Arena&) { c.y = inside(c.x, 0); },
           overlap_message("y", "x")},
          {"y the same as h", [](Call& c, Arena&) { c.y = c.h; }, overlap_message("h", "y")},
          {"mean inside h", [](Call& c, Arena&) { c.stats->mean = inside(c.h, 4, kRows); },
           overlap_message("h", "mean")},
          {"rstd inside gamma",
           [](Call& c, Arena&) { c.stats->rstd = inside(*c.options.gamma, 5, kRows); },
           overlap_message("rstd", "gamma")},
          {"beta inside y", [](Call& c, Arena&) { c.options.beta = inside(c.y, 3, kDim); },
           overlap_message("y", "beta")},
          {"rstd partly over mean",
           [](Call& c, Arena&) { c.stats->rstd = inside(c.stats->mean, 2); },
           overlap_message("mean", "rstd")},
      });
  expect_all_rejected(&valid_add_norm_pre<T>, rejections);
}

// RMSNorm keeps no mean, so the header lets NormStats::mean be empty there.
TYPED_TEST(FusedErrors, PreNormRmsNormAcceptsStatsWithoutMean) {
  using T = TypeParam;
  testing::BasicArena<T> arena;
  AddNormPreCall<T> call = valid_add_norm_pre(arena);
  call.options.norm = NormKind::rms_norm;
  call.options.beta.reset();
  call.stats->mean = {};
  EXPECT_NO_THROW(call());
}

// ---------------------------------------------------------------------------------------------
template <class T>
struct AddNormPreBackwardCall {
  using Element = T;
  In<T> dy;
  std::optional<In<T>> dh_next;
  In<T> h;
  Shape normalized_shape;
  BasicAddNormPreGrads<T> grads;
  BasicNormOptions<T> options;
  std::optional<BasicSavedStats<T>> saved;
  void operator()() const {
    overloads::add_norm_pre_backward(dy, dh_next, h, normalized_shape, grads, options, saved);
  }
};

template <class T>
AddNormPreBackwardCall<T> valid_add_norm_pre_backward(testing::BasicArena<T>& arena) {
  return {arena.input(kX),
          arena.input(kX),
          arena.input(kX),
          kDim,
          BasicAddNormPreGrads<T>{arena.output(kX), arena.output(kDim), arena.output(kDim)},
          layer_norm_options(arena),
          BasicSavedStats<T>{arena.input(kRows), arena.input(kRows)}};
}

TYPED_TEST(FusedErrors, PreNormBackwardRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = AddNormPreBackwardCall<T>;
  using Arena = testing::BasicArena<T>;
  std::vector<Rejection<Call>> rejections;
  // h's own rejections name it wrongly (as x); they are in NamesHAsH below.
  add_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> In<T>& { return c.dy; }, kX, {3, 7});
  add_tensor_rejections<Call>(rejections, "dh_next", [](Call& c) -> In<T>& { return *c.dh_next; },
                              kX, {3, 8, 1});
  add_tensor_rejections<Call>(rejections, "dh",
                              [](Call& c) -> NormMutable<T>& { return c.grads.dh; }, kX, {2, 8});
  add_option_rejections(rejections);
  add_parameter_grad_rejections(rejections);
  add_per_row_rejections<Call>(rejections, "rstd", [](Call& c) -> In<T>& { return c.saved->rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"dh partly over dy", [](Call& c, Arena&) { c.grads.dh = inside(c.dy, 1); },
           partial_alias_message("dh", "dy")},
          {"dh partly over dh_next", [](Call& c, Arena&) { c.grads.dh = inside(*c.dh_next, 2); },
           partial_alias_message("dh", "dh_next")},
          {"dh partly over h", [](Call& c, Arena&) { c.grads.dh = inside(c.h, 8); },
           partial_alias_message("dh", "h")},
          {"dgamma inside dh",
           [](Call& c, Arena&) { c.grads.dgamma = inside(c.grads.dh, 5, kDim); },
           overlap_message("dh", "dgamma")},
          {"dbeta the same as gamma",
           [](Call& c, Arena&) { c.grads.dbeta = inside(*c.options.gamma, 0); },
           overlap_message("dbeta", "gamma")},
          {"saved rstd inside dh",
           [](Call& c, Arena&) { c.saved->rstd = inside(c.grads.dh, 21, kRows); },
           overlap_message("dh", "rstd")},
          {"dgamma inside dy", [](Call& c, Arena&) { c.grads.dgamma = inside(c.dy, 9, kDim); },
           overlap_message("dgamma", "dy")},
          {"dbeta partly over dgamma",
           [](Call& c, Arena&) { c.grads.dbeta = inside(*c.grads.dgamma, 7); },
           overlap_message("dgamma", "dbeta")},
          {"dh over gamma", [](Call& c, Arena&) { c.grads.dh = inside(*c.options.gamma, 0, kX); },
           overlap_message("dh", "gamma")},
          {"dgamma partly over dh_next",
           [](Call& c, Arena&) { c.grads.dgamma = inside(*c.dh_next, 20, kDim); },
           overlap_message("dgamma", "dh_next")},
      });
  expect_all_rejected(&valid_add_norm_pre_backward<T>, rejections);
}

TYPED_TEST(FusedErrors, PreNormBackwardNamesHAsH) {
  using T = TypeParam;
  using Call = AddNormPreBackwardCall<T>;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "h", [](Call& c) -> In<T>& { return c.h; });
  add_normalized_shape_rejections(rejections, "h");
  expect_all_rejected(&valid_add_norm_pre_backward<T>, rejections);
}

// ---------------------------------------------------------------------------------------------
template <class T>
struct AddNormPostCall {
  using Element = T;
  In<T> x;
  In<T> s;
  Shape normalized_shape;
  Out<T> y;
  BasicNormOptions<T> options;
  BasicDropoutOptions<T> dropout;
  std::optional<BasicNormStats<T>> stats;
  void operator()() const {
    overloads::add_norm_post(x, s, normalized_shape, y, options, dropout, stats);
  }
};

template <class T>
AddNormPostCall<T> valid_add_norm_post(testing::BasicArena<T>& arena) {
  return {arena.input(kX),
          arena.input(kX),
          kDim,
          arena.output(kX),
          layer_norm_options(arena),
          BasicDropoutOptions<T>{T(0.1), 7, 0},
          BasicNormStats<T>{arena.output(kRows), arena.output(kRows)}};
}

TYPED_TEST(FusedErrors, PostNormRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = AddNormPostCall<T>;
  using Arena = testing::BasicArena<T>;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "s", [](Call& c) -> In<T>& { return c.s; }, kX, {3, 16});
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> Out<T>& { return c.y; }, kX,
                              {1, 3, 8});
  add_option_rejections(rejections);
  add_dropout_rejections<Call>(rejections,
                               [](Call& c) -> BasicDropoutOptions<T>& { return c.dropout; });
  add_per_row_rejections<Call>(rejections, "mean",
                               [](Call& c) -> Out<T>& { return c.stats->mean; });
  add_per_row_rejections<Call>(rejections, "rstd",
                               [](Call& c) -> Out<T>& { return c.stats->rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"y partly over x", [](Call& c, Arena&) { c.y = inside(c.x, 3); },
           partial_alias_message("y", "x")},
          {"y partly over s", [](Call& c, Arena&) { c.y = inside(c.s, 1); },
           partial_alias_message("y", "s")},
          {"mean inside y", [](Call& c, Arena&) { c.stats->mean = inside(c.y, 0, kRows); },
           overlap_message("y", "mean")},
          {"rstd inside gamma",
           [](Call& c, Arena&) { c.stats->rstd = inside(*c.options.gamma, 1, kRows); },
           overlap_message("rstd", "gamma")},
          {"mean inside s", [](Call& c, Arena&) { c.stats->mean = inside(c.s, 12, kRows); },
           overlap_message("mean", "s")},
          {"gamma inside y", [](Call& c, Arena&) { c.options.gamma = inside(c.y, 16, kDim); },
           overlap_message("y", "gamma")},
          {"rstd inside y", [](Call& c, Arena&) { c.stats->rstd = inside(c.y, 4, kRows); },
           overlap_message("y", "rstd")},
      });
  expect_all_rejected(&valid_add_norm_post<T>, rejections);
}

// ---------------------------------------------------------------------------------------------
template <class T>
struct AddNormPostBackwardCall {
  using Element = T;
  In<T> dy;
  In<T> x;
  In<T> s;
  Shape normalized_shape;
  BasicAddNormPostGrads<T> grads;
  BasicNormOptions<T> options;
  BasicDropoutOptions<T> dropout;
  std::optional<BasicSavedStats<T>> saved;
  void operator()() const {
    overloads::add_norm_post_backward(dy, x, s, normalized_shape, grads, options, dropout, saved);
  }
};

template <class T>
AddNormPostBackwardCall<T> valid_add_norm_post_backward(testing::BasicArena<T>& arena) {
  return {arena.input(kX),
          arena.input(kX),
          arena.input(kX),
          kDim,
          BasicAddNormPostGrads<T>{arena.output(kX), arena.output(kX), arena.output(kDim),
                                   arena.output(kDim)},
          layer_norm_options(arena),
          BasicDropoutOptions<T>{T(0.3), 9, 0},
          BasicSavedStats<T>{arena.input(kRows), arena.input(kRows)}};
}

TYPED_TEST(FusedErrors, PostNormBackwardRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = AddNormPostBackwardCall<T>;
  using Arena = testing::BasicArena<T>;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> In<T>& { return c.dy; }, kX, {3, 7});
  add_tensor_rejections<Call>(rejections, "s", [](Call& c) -> In<T>& { return c.s; }, kX, {8, 3});
  add_tensor_rejections<Call>(rejections, "dx",
                              [](Call& c) -> NormMutable<T>& { return c.grads.dx; }, kX, {3, 1});
  add_tensor_rejections<Call>(rejections, "ds",
                              [](Call& c) -> NormMutable<T>& { return c.grads.ds; }, kX, {4, 8});
  add_option_rejections(rejections);
  add_parameter_grad_rejections(rejections);
  add_dropout_rejections<Call>(rejections,
                               [](Call& c) -> BasicDropoutOptions<T>& { return c.dropout; });
  add_per_row_rejections<Call>(rejections, "rstd", [](Call& c) -> In<T>& { return c.saved->rstd; });
  rejections.insert(
      rejections.end(),
      {
          {"ds partly over dx", [](Call& c, Arena&) { c.grads.ds = inside(c.grads.dx, 1); },
           overlap_message("dx", "ds")},
          {"ds the same as dx", [](Call& c, Arena&) { c.grads.ds = c.grads.dx; },
           overlap_message("dx", "ds")},
          {"ds partly over s", [](Call& c, Arena&) { c.grads.ds = inside(c.s, 2); },
           partial_alias_message("ds", "s")},
          {"dx partly over x", [](Call& c, Arena&) { c.grads.dx = inside(c.x, 6); },
           partial_alias_message("dx", "x")},
          {"dgamma inside dx",
           [](Call& c, Arena&) { c.grads.dgamma = inside(c.grads.dx, 2, kDim); },
           overlap_message("dx", "dgamma")},
          {"saved rstd inside ds",
           [](Call& c, Arena&) { c.saved->rstd = inside(c.grads.ds, 0, kRows); },
           overlap_message("ds", "rstd")},
          {"dgamma the same as gamma",
           [](Call& c, Arena&) { c.grads.dgamma = inside(*c.options.gamma, 0); },
           overlap_message("dgamma", "gamma")},
          {"dbeta inside dy", [](Call& c, Arena&) { c.grads.dbeta = inside(c.dy, 16, kDim); },
           overlap_message("dbeta", "dy")},
      });
  expect_all_rejected(&valid_add_norm_post_backward<T>, rejections);
}

// layer_norm_backward rejects a saved mean with the wrong count; the fused backwards do not.
TYPED_TEST(FusedErrors, BackwardSavedMeanWithWrongCountIsRejected) {
  using T = TypeParam;
  {
    using Call = AddNormPreBackwardCall<T>;
    std::vector<Rejection<Call>> rejections;
    add_per_row_rejections<Call>(rejections, "mean",
                                 [](Call& c) -> In<T>& { return c.saved->mean; });
    expect_all_rejected(&valid_add_norm_pre_backward<T>, rejections);
  }
  {
    using Call = AddNormPostBackwardCall<T>;
    std::vector<Rejection<Call>> rejections;
    add_per_row_rejections<Call>(rejections, "mean",
                                 [](Call& c) -> In<T>& { return c.saved->mean; });
    expect_all_rejected(&valid_add_norm_post_backward<T>, rejections);
  }
}

}  // namespace
}  // namespace addnorm
