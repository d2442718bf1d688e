// Bad arguments to the fused pre-norm and post-norm Add & Norm, forward and backward: each is
// rejected with a message naming it, before anything is written.
#include <gtest/gtest.h>

#include "addnorm/ops.hpp"
#include "errors_test_support.hpp"

namespace addnorm {
namespace {

using testing::add_dropout_rejections;
using testing::add_eps_rejections;
using testing::add_leading_tensor_rejections;
using testing::add_normalized_shape_rejections;
using testing::add_per_row_rejections;
using testing::add_tensor_rejections;
using testing::Arena;
using testing::expect_all_rejected;
using testing::inside;
using testing::overlap_message;
using testing::partial_alias_message;
using testing::Rejection;

// Every call normalises tensors of shape [3, 8] over their last dim: 3 rows of 8.
const Shape kX{3, 8};
const Shape kDim{8};
const Shape kRows{3};

// The rejections of gamma, beta, the norm-specific options and eps, shared by all four calls.
template <class Call>
void add_option_rejections(std::vector<Rejection<Call>>& rejections) {
  add_tensor_rejections<Call>(rejections, "gamma",
                              [](Call& c) -> AnyConstView& { return *c.options.gamma; }, kDim, {7});
  add_tensor_rejections<Call>(
      rejections, "beta", [](Call& c) -> AnyConstView& { return *c.options.beta; }, kDim, {2, 4});
  add_eps_rejections<Call>(rejections, [](Call& c) -> float& { return c.options.eps.emplace(); });
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
  add_tensor_rejections<Call>(rejections, "dgamma",
                              [](Call& c) -> MutableView& { return *c.grads.dgamma; }, kDim, {9});
  add_tensor_rejections<Call>(rejections, "dbeta",
                              [](Call& c) -> MutableView& { return *c.grads.dbeta; }, kDim, {1});
  rejections.push_back(
      {"dgamma without gamma",
       [](Call& c, Arena&) { c.options.gamma.reset(); },
       {"dgamma was requested but gamma is absent, expected no dgamma without gamma"}});
  rejections.push_back(
      {"dbeta without beta",
       [](Call& c, Arena&) { c.options.beta.reset(); },
       {"dbeta was requested but beta is absent, expected no dbeta without beta"}});
}

NormOptions layer_norm_options(Arena& arena) {
  NormOptions options;
  options.gamma = arena.input(kDim);
  options.beta = arena.input(kDim);
  return options;
}

// ---------------------------------------------------------------------------------------------
struct AddNormPreCall {
  ConstView x;
  ConstView r;
  Shape normalized_shape;
  MutableView h;
  MutableView y;
  NormOptions options;
  std::optional<NormStats> stats;
  void operator()() const { add_norm_pre(x, r, normalized_shape, h, y, options, stats); }
};

AddNormPreCall valid_add_norm_pre(Arena& arena) {
  return {arena.input(kX),
          arena.input(kX),
          kDim,
          arena.output(kX),
          arena.output(kX),
          layer_norm_options(arena),
          NormStats{arena.output(kRows), arena.output(kRows)}};
}

TEST(AddNormPreErrors, RejectsEveryBadArgumentWithoutWriting) {
  using Call = AddNormPreCall;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> ConstView& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "r", [](Call& c) -> ConstView& { return c.r; }, kX,
                              {3, 7});
  add_tensor_rejections<Call>(rejections, "h", [](Call& c) -> MutableView& { return c.h; }, kX,
                              {3, 9});
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> MutableView& { return c.y; }, kX,
                              {24});
  add_option_rejections(rejections);
  add_per_row_rejections<Call>(rejections, "mean",
                               [](Call& c) -> MutableView& { return c.stats->mean; });
  add_per_row_rejections<Call>(rejections, "rstd",
                               [](Call& c) -> MutableView& { return c.stats->rstd; });
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
  expect_all_rejected(&valid_add_norm_pre, rejections);
}

// RMSNorm keeps no mean, so the header lets NormStats::mean be empty there.
TEST(AddNormPreErrors, RmsNormAcceptsStatsWithoutMean) {
  Arena arena;
  AddNormPreCall call = valid_add_norm_pre(arena);
  call.options.norm = NormKind::rms_norm;
  call.options.beta.reset();
  call.stats->mean = {};
  EXPECT_NO_THROW(call());
}

// ---------------------------------------------------------------------------------------------
struct AddNormPreBackwardCall {
  ConstView dy;
  OptionalConst dh_next;
  ConstView h;
  Shape normalized_shape;
  AddNormPreGrads grads;
  NormOptions options;
  std::optional<SavedStats> saved;
  void operator()() const {
    add_norm_pre_backward(dy, dh_next, h, normalized_shape, grads, options, saved);
  }
};

AddNormPreBackwardCall valid_add_norm_pre_backward(Arena& arena) {
  return {arena.input(kX),
          arena.input(kX),
          arena.input(kX),
          kDim,
          AddNormPreGrads{arena.output(kX), arena.output(kDim), arena.output(kDim)},
          layer_norm_options(arena),
          SavedStats{arena.input(kRows), arena.input(kRows)}};
}

TEST(AddNormPreBackwardErrors, RejectsEveryBadArgumentWithoutWriting) {
  using Call = AddNormPreBackwardCall;
  std::vector<Rejection<Call>> rejections;
  // h's own rejections name it wrongly (as x); they are in NamesHAsH below.
  add_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> ConstView& { return c.dy; }, kX,
                              {3, 7});
  add_tensor_rejections<Call>(rejections, "dh_next",
                              [](Call& c) -> ConstView& { return *c.dh_next; }, kX, {3, 8, 1});
  add_tensor_rejections<Call>(rejections, "dh",
                              [](Call& c) -> AnyMutableView& { return c.grads.dh; }, kX, {2, 8});
  add_option_rejections(rejections);
  add_parameter_grad_rejections(rejections);
  add_per_row_rejections<Call>(rejections, "rstd",
                               [](Call& c) -> ConstView& { return c.saved->rstd; });
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
      });
  expect_all_rejected(&valid_add_norm_pre_backward, rejections);
}

TEST(AddNormPreBackwardErrors, NamesHAsH) {
  using Call = AddNormPreBackwardCall;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "h", [](Call& c) -> ConstView& { return c.h; });
  add_normalized_shape_rejections(rejections, "h");
  expect_all_rejected(&valid_add_norm_pre_backward, rejections);
}

// ---------------------------------------------------------------------------------------------
struct AddNormPostCall {
  ConstView x;
  ConstView s;
  Shape normalized_shape;
  MutableView y;
  NormOptions options;
  DropoutOptions dropout;
  std::optional<NormStats> stats;
  void operator()() const { add_norm_post(x, s, normalized_shape, y, options, dropout, stats); }
};

AddNormPostCall valid_add_norm_post(Arena& arena) {
  return {arena.input(kX),
          arena.input(kX),
          kDim,
          arena.output(kX),
          layer_norm_options(arena),
          DropoutOptions{0.1f, 7, 0},
          NormStats{arena.output(kRows), arena.output(kRows)}};
}

TEST(AddNormPostErrors, RejectsEveryBadArgumentWithoutWriting) {
  using Call = AddNormPostCall;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> ConstView& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "s", [](Call& c) -> ConstView& { return c.s; }, kX,
                              {3, 16});
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> MutableView& { return c.y; }, kX,
                              {1, 3, 8});
  add_option_rejections(rejections);
  add_dropout_rejections<Call>(rejections, [](Call& c) -> DropoutOptions& { return c.dropout; });
  add_per_row_rejections<Call>(rejections, "mean",
                               [](Call& c) -> MutableView& { return c.stats->mean; });
  add_per_row_rejections<Call>(rejections, "rstd",
                               [](Call& c) -> MutableView& { return c.stats->rstd; });
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
      });
  expect_all_rejected(&valid_add_norm_post, rejections);
}

// ---------------------------------------------------------------------------------------------
struct AddNormPostBackwardCall {
  ConstView dy;
  ConstView x;
  ConstView s;
  Shape normalized_shape;
  AddNormPostGrads grads;
  NormOptions options;
  DropoutOptions dropout;
  std::optional<SavedStats> saved;
  void operator()() const {
    add_norm_post_backward(dy, x, s, normalized_shape, grads, options, dropout, saved);
  }
};

AddNormPostBackwardCall valid_add_norm_post_backward(Arena& arena) {
  return {
      arena.input(kX),
      arena.input(kX),
      arena.input(kX),
      kDim,
      AddNormPostGrads{arena.output(kX), arena.output(kX), arena.output(kDim), arena.output(kDim)},
      layer_norm_options(arena),
      DropoutOptions{0.1f, 7, 0},
      SavedStats{arena.input(kRows), arena.input(kRows)}};
}

TEST(AddNormPostBackwardErrors, RejectsEveryBadArgumentWithoutWriting) {
  using Call = AddNormPostBackwardCall;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> ConstView& { return c.x; });
  add_normalized_shape_rejections(rejections, "x");
  add_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> ConstView& { return c.dy; }, kX,
                              {3, 7});
  add_tensor_rejections<Call>(rejections, "s", [](Call& c) -> ConstView& { return c.s; }, kX,
                              {8, 3});
  add_tensor_rejections<Call>(rejections, "dx",
                              [](Call& c) -> AnyMutableView& { return c.grads.dx; }, kX, {3, 1});
  add_tensor_rejections<Call>(rejections, "ds",
                              [](Call& c) -> AnyMutableView& { return c.grads.ds; }, kX, {4, 8});
  add_option_rejections(rejections);
  add_parameter_grad_rejections(rejections);
  add_dropout_rejections<Call>(rejections, [](Call& c) -> DropoutOptions& { return c.dropout; });
  add_per_row_rejections<Call>(rejections, "rstd",
                               [](Call& c) -> ConstView& { return c.saved->rstd; });
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
  expect_all_rejected(&valid_add_norm_post_backward, rejections);
}

// layer_norm_backward rejects a saved mean with the wrong count; the fused backwards do not.
TEST(AddNormBackwardErrors, SavedMeanWithWrongCountIsRejected) {
  {
    std::vector<Rejection<AddNormPreBackwardCall>> rejections;
    add_per_row_rejections<AddNormPreBackwardCall>(
        rejections, "mean", [](AddNormPreBackwardCall& c) -> ConstView& { return c.saved->mean; });
    expect_all_rejected(&valid_add_norm_pre_backward, rejections);
  }
  {
    std::vector<Rejection<AddNormPostBackwardCall>> rejections;
    add_per_row_rejections<AddNormPostBackwardCall>(
        rejections, "mean", [](AddNormPostBackwardCall& c) -> ConstView& { return c.saved->mean; });
    expect_all_rejected(&valid_add_norm_post_backward, rejections);
  }
}

}  // namespace
}  // namespace addnorm
