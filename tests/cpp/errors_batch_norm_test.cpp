// Bad arguments to BatchNorm, forward and backward: each is rejected with a message naming it,
// before anything (y, the running statistics, the batch statistics, the gradients) is written.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "addnorm/ops.hpp"
#include "errors_test_support.hpp"

namespace addnorm {
namespace {

using testing::add_eps_rejections;
using testing::add_leading_tensor_rejections;
using testing::add_tensor_rejections;
using testing::Arena;
using testing::expect_all_rejected;
using testing::inside;
using testing::overlap_message;
using testing::partial_alias_message;
using testing::Rejection;

// x is (N, C, L) = (4, 3, 5): 20 values per channel.
const Shape kX{4, 3, 5};
const Shape kChannels{3};

// The rejections of x's rank and of the options, shared by the forward and the backward.
// `reshape_x` gives x (and every tensor that must match it) a new shape.
template <class Call>
void add_layout_and_option_rejections(std::vector<Rejection<Call>>& rejections,
                                      void (*reshape_x)(Call&, Arena&, const Shape&)) {
  const auto reshaped = [reshape_x](Shape shape) {
    return [reshape_x, shape](Call& call, Arena& arena) { reshape_x(call, arena, shape); };
  };
  for (const Shape& wrong : {Shape{60}, Shape{2, 3, 1, 1, 1, 10}, Shape{}}) {
    rejections.push_back({"x of rank " + std::to_string(wrong.rank()),
                          reshaped(wrong),
                          {"x has shape " + wrong.to_string() +
                           ", expected rank 2 to 5: (N, C, *) with channels on axis 1"}});
  }
  for (const Shape& single : {Shape{1, 3}, Shape{1, 3, 1}}) {
    rejections.push_back({"training on x " + single.to_string(),
                          reshaped(single),
                          {"x has shape [1, 3", "with 1 value per channel",
                           "expected more than 1 in training mode"}});
  }
  add_tensor_rejections<Call>(
      rejections, "gamma", [](Call& c) -> ConstView& { return *c.options.gamma; }, kChannels, {2});
  add_tensor_rejections<Call>(
      rejections, "beta", [](Call& c) -> ConstView& { return *c.options.beta; }, kChannels, {3, 1});
  add_eps_rejections<Call>(rejections, [](Call& c) -> float& { return c.options.eps; });
  for (float bad : {-0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    rejections.push_back({"momentum = " + std::to_string(bad),
                          [bad](Call& c, Arena&) { c.options.momentum = bad; },
                          {"momentum is", "expected a value in [0, 1]"}});
  }
  rejections.push_back({"running_mean shaped [2]",
                        [](Call& c, Arena& arena) {
                          c.running = RunningStats{arena.output({2}), arena.output(kChannels)};
                        },
                        {"running_mean has shape [2], expected [3]"}});
  rejections.push_back({"running_var shaped [1, 3]",
                        [](Call& c, Arena& arena) {
                          c.running = RunningStats{arena.output(kChannels), arena.output({1, 3})};
                        },
                        {"running_var has shape [1, 3], expected [3]"}});
  rejections.push_back({"running_var without data",
                        [](Call& c, Arena& arena) {
                          c.running = RunningStats{arena.output(kChannels), {nullptr, kChannels}};
                        },
                        {"^running_var ", "null"}});
}

// ---------------------------------------------------------------------------------------------
struct BatchNormCall {
  ConstView x;
  MutableView y;
  BatchNormOptions options;
  std::optional<RunningStats> running;
  std::optional<NormStats> batch_stats;
  void operator()() const { batch_norm(x, y, options, running, batch_stats); }
};

BatchNormCall valid_batch_norm(Arena& arena) {
  BatchNormOptions options;
  options.gamma = arena.input(kChannels);
  options.beta = arena.input(kChannels);
  return {arena.input(kX), arena.output(kX), options,
          RunningStats{arena.output(kChannels), arena.output(kChannels)},
          NormStats{arena.output(kChannels), arena.output(kChannels)}};
}

void reshape_forward_x(BatchNormCall& call, Arena& arena, const Shape& shape) {
  call.x = arena.input(shape);
  call.y = arena.output(shape);
}

TEST(BatchNormErrors, RejectsEveryBadArgumentWithoutWriting) {
  using Call = BatchNormCall;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> ConstView& { return c.x; });
  add_layout_and_option_rejections<Call>(rejections, &reshape_forward_x);
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> MutableView& { return c.y; }, kX,
                              {4, 3, 4});
  add_tensor_rejections<Call>(rejections, "batch mean",
                              [](Call& c) -> MutableView& { return c.batch_stats->mean; },
                              kChannels, {2});
  add_tensor_rejections<Call>(rejections, "batch rstd",
                              [](Call& c) -> MutableView& { return c.batch_stats->rstd; },
                              kChannels, {4});
  rejections.insert(
      rejections.end(),
      {
          {"inference without running statistics",
           [](Call& c, Arena&) {
             c.options.training = false;
             c.running.reset();
             c.batch_stats.reset();
           },
           {"running_mean and running_var are absent, expected both in inference mode"}},
          {"batch_stats in inference mode",
           [](Call& c, Arena&) { c.options.training = false; },
           {"batch_stats was requested in inference mode, expected it only in training"}},
          {"y partly over x", [](Call& c, Arena&) { c.y = inside(c.x, 1); },
           partial_alias_message("y", "x")},
          {"running_var partly over running_mean",
           [](Call& c, Arena&) { c.running->var = inside(c.running->mean, 2); },
           overlap_message("running_mean", "running_var")},
          {"running_var the same as running_mean",
           [](Call& c, Arena&) { c.running->var = c.running->mean; },
           overlap_message("running_mean", "running_var")},
          {"running_var the same as gamma",
           [](Call& c, Arena&) { c.running->var = inside(*c.options.gamma, 0); },
           overlap_message("running_var", "gamma")},
          {"running_mean inside y",
           [](Call& c, Arena&) { c.running->mean = inside(c.y, 7, kChannels); },
           overlap_message("y", "running_mean")},
          {"batch mean inside y",
           [](Call& c, Arena&) { c.batch_stats->mean = inside(c.y, 59, kChannels); },
           overlap_message("y", "batch mean")},
          {"batch rstd partly over running_mean",
           [](Call& c, Arena&) { c.batch_stats->rstd = inside(c.running->mean, 1); },
           overlap_message("running_mean", "batch rstd")},
          {"beta inside y", [](Call& c, Arena&) { c.options.beta = inside(c.y, 30, kChannels); },
           overlap_message("y", "beta")},
          {"batch rstd inside x",
           [](Call& c, Arena&) { c.batch_stats->rstd = inside(c.x, 10, kChannels); },
           overlap_message("batch rstd", "x")},
      });
  expect_all_rejected(&valid_batch_norm, rejections);
}

// ---------------------------------------------------------------------------------------------
struct BatchNormBackwardCall {
  ConstView dy;
  ConstView x;
  BatchNormGrads grads;
  BatchNormOptions options;
  std::optional<RunningStats> running;
  void operator()() const { batch_norm_backward(dy, x, grads, options, running); }
};

BatchNormBackwardCall valid_batch_norm_backward(Arena& arena) {
  BatchNormOptions options;
  options.gamma = arena.input(kChannels);
  options.beta = arena.input(kChannels);
  return {arena.input(kX), arena.input(kX),
          BatchNormGrads{arena.output(kX), arena.output(kChannels), arena.output(kChannels)},
          options, std::nullopt};
}

void reshape_backward_x(BatchNormBackwardCall& call, Arena& arena, const Shape& shape) {
  call.x = arena.input(shape);
  call.dy = arena.input(shape);
  call.grads.dx = arena.output(shape);
}

// In the backward the running statistics are inputs; this gives them to a call.
void with_running(BatchNormBackwardCall& call, Arena& arena) {
  call.running = RunningStats{arena.output(kChannels), arena.output(kChannels)};
}

TEST(BatchNormBackwardErrors, RejectsEveryBadArgumentWithoutWriting) {
  using Call = BatchNormBackwardCall;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> ConstView& { return c.x; });
  add_layout_and_option_rejections<Call>(rejections, &reshape_backward_x);
  add_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> ConstView& { return c.dy; }, kX,
                              {4, 15});
  add_tensor_rejections<Call>(rejections, "dx", [](Call& c) -> MutableView& { return c.grads.dx; },
                              kX, {4, 3});
  add_tensor_rejections<Call>(rejections, "dgamma",
                              [](Call& c) -> MutableView& { return *c.grads.dgamma; }, kChannels,
                              {4});
  add_tensor_rejections<Call>(
      rejections, "dbeta", [](Call& c) -> MutableView& { return *c.grads.dbeta; }, kChannels, {1});
  rejections.insert(
      rejections.end(),
      {
          {"inference without running statistics",
           [](Call& c, Arena&) { c.options.training = false; },
           {"running_mean and running_var are absent, expected both in inference mode"}},
          {"dgamma without gamma",
           [](Call& c, Arena&) { c.options.gamma.reset(); },
           {"dgamma was requested but gamma is absent, expected no dgamma without gamma"}},
          {"dbeta without beta",
           [](Call& c, Arena&) { c.options.beta.reset(); },
           {"dbeta was requested but beta is absent, expected no dbeta without beta"}},
          {"dx partly over dy", [](Call& c, Arena&) { c.grads.dx = inside(c.dy, 4); },
           partial_alias_message("dx", "dy")},
          {"dx partly over x", [](Call& c, Arena&) { c.grads.dx = inside(c.x, 1); },
           partial_alias_message("dx", "x")},
          {"dgamma inside dx",
           [](Call& c, Arena&) { c.grads.dgamma = inside(c.grads.dx, 0, kChannels); },
           overlap_message("dx", "dgamma")},
          {"dbeta the same as dgamma", [](Call& c, Arena&) { c.grads.dbeta = c.grads.dgamma; },
           overlap_message("dgamma", "dbeta")},
          {"dbeta partly over gamma",
           [](Call& c, Arena&) { c.grads.dbeta = inside(*c.options.gamma, 1); },
           overlap_message("dbeta", "gamma")},
          {"running_var the same as dgamma",
           [](Call& c, Arena& arena) {
             with_running(c, arena);
             c.running->var = *c.grads.dgamma;
           },
           overlap_message("dgamma", "running_var")},
          {"running_mean inside dx",
           [](Call& c, Arena& arena) {
             with_running(c, arena);
             c.options.training = false;
             c.running->mean = inside(c.grads.dx, 2, kChannels);
           },
           overlap_message("dx", "running_mean")},
      });
  expect_all_rejected(&valid_batch_norm_backward, rejections);
}

}  // namespace
}  // namespace addnorm
