// Bad arguments to BatchNorm, forward and backward, for both element types in one typed test
// (the float32 and float64 ops share their checks, src/ops/op_checks.hpp): each is rejected with
// a message naming it, before anything (y, the running statistics, the batch statistics, the
// gradients) is written.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "addnorm/overloads.hpp"
#include "errors_test_support.hpp"

namespace addnorm {
namespace {

using testing::add_eps_rejections;
using testing::add_leading_tensor_rejections;
using testing::add_tensor_rejections;
using testing::expect_all_rejected;
using testing::In;
using testing::inside;
using testing::Out;
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
                                      void (*reshape_x)(Call&, testing::ArenaOf<Call>&,
                                                        const Shape&)) {
  using T = testing::ElementOf<Call>;
  using Arena = testing::ArenaOf<Call>;
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
  add_tensor_rejections<Call>(rejections, "gamma",
                              [](Call& c) -> NormConst<T>& { return *c.options.gamma; }, kChannels,
                              {2});
  add_tensor_rejections<Call>(rejections, "beta",
                              [](Call& c) -> NormConst<T>& { return *c.options.beta; }, kChannels,
                              {3, 1});
  add_eps_rejections<Call>(rejections, [](Call& c) -> T& { return c.options.eps.emplace(); });
  for (T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                -std::numeric_limits<T>::infinity()}) {
    rejections.push_back({"momentum = " + std::to_string(bad),
                          [bad](Call& c, Arena&) { c.options.momentum = bad; },
                          {"momentum is", "expected a finite value"}});
  }
  rejections.push_back(
      {"running_mean shaped [2]",
       [](Call& c, Arena& arena) {
         c.running = BasicRunningStats<T>{arena.output({2}), arena.output(kChannels)};
       },
       {"running_mean has shape [2], expected [3]"}});
  rejections.push_back(
      {"running_var shaped [1, 3]",
       [](Call& c, Arena& arena) {
         c.running = BasicRunningStats<T>{arena.output(kChannels), arena.output({1, 3})};
       },
       {"running_var has shape [1, 3], expected [3]"}});
  rejections.push_back(
      {"running_var without data",
       [](Call& c, Arena& arena) {
         c.running = BasicRunningStats<T>{arena.output(kChannels), {nullptr, kChannels}};
       },
       {"^running_var ", "null"}});
}

// ---------------------------------------------------------------------------------------------
template <class T>
struct BatchNormCall {
  using Element = T;
  In<T> x;
  Out<T> y;
  BasicBatchNormOptions<T> options;
  std::optional<BasicRunningStats<T>> running;
  std::optional<BasicNormStats<T>> batch_stats;
  void operator()() const { overloads::batch_norm(x, y, options, running, batch_stats); }
};

template <class T>
BatchNormCall<T> valid_batch_norm(testing::BasicArena<T>& arena) {
  BasicBatchNormOptions<T> options;
  options.gamma = arena.input(kChannels);
  options.beta = arena.input(kChannels);
  return {arena.input(kX), arena.output(kX), options,
          BasicRunningStats<T>{arena.output(kChannels), arena.output(kChannels)},
          BasicNormStats<T>{arena.output(kChannels), arena.output(kChannels)}};
}

template <class T>
void reshape_forward_x(BatchNormCall<T>& call, testing::BasicArena<T>& arena, const Shape& shape) {
  call.x = arena.input(shape);
  call.y = arena.output(shape);
}

template <class T>
class BatchNormErrors : public ::testing::Test {};
TYPED_TEST_SUITE(BatchNormErrors, testing::ElementTypes, testing::ElementName);

TYPED_TEST(BatchNormErrors, ForwardRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = BatchNormCall<T>;
  using Arena = testing::BasicArena<T>;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_layout_and_option_rejections<Call>(rejections, &reshape_forward_x<T>);
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> Out<T>& { return c.y; }, kX,
                              {4, 3, 4});
  add_tensor_rejections<Call>(rejections, "running_var",
                              [](Call& c) -> Out<T>& { return c.running->var; }, kChannels, {4});
  add_tensor_rejections<Call>(rejections, "batch mean",
                              [](Call& c) -> Out<T>& { return c.batch_stats->mean; }, kChannels,
                              {2});
  add_tensor_rejections<Call>(rejections, "batch rstd",
                              [](Call& c) -> Out<T>& { return c.batch_stats->rstd; }, kChannels,
                              {4});
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
          {"running_var inside x",
           [](Call& c, Arena&) { c.running->var = inside(c.x, 3, kChannels); },
           overlap_message("running_var", "x")},
          {"gamma inside y", [](Call& c, Arena&) { c.options.gamma = inside(c.y, 2, kChannels); },
           overlap_message("y", "gamma")},
      });
  expect_all_rejected(&valid_batch_norm<T>, rejections);
}

// ---------------------------------------------------------------------------------------------
template <class T>
struct BatchNormBackwardCall {
  using Element = T;
  In<T> dy;
  In<T> x;
  BasicBatchNormGrads<T> grads;
  BasicBatchNormOptions<T> options;
  std::optional<BasicRunningStats<T>> running;
  void operator()() const { overloads::batch_norm_backward(dy, x, grads, options, running); }
};

template <class T>
BatchNormBackwardCall<T> valid_batch_norm_backward(testing::BasicArena<T>& arena) {
  BasicBatchNormOptions<T> options;
  options.gamma = arena.input(kChannels);
  options.beta = arena.input(kChannels);
  return {
      arena.input(kX), arena.input(kX),
      BasicBatchNormGrads<T>{arena.output(kX), arena.output(kChannels), arena.output(kChannels)},
      options, std::nullopt};
}

template <class T>
void reshape_backward_x(BatchNormBackwardCall<T>& call, testing::BasicArena<T>& arena,
                        const Shape& shape) {
  call.x = arena.input(shape);
  call.dy = arena.input(shape);
  call.grads.dx = arena.output(shape);
}

// In the backward the running statistics are inputs; this gives them to a call.
template <class T>
void with_running(BatchNormBackwardCall<T>& call, testing::BasicArena<T>& arena) {
  call.running = BasicRunningStats<T>{arena.output(kChannels), arena.output(kChannels)};
}

TYPED_TEST(BatchNormErrors, BackwardRejectsEveryBadArgumentWithoutWriting) {
  using T = TypeParam;
  using Call = BatchNormBackwardCall<T>;
  using Arena = testing::BasicArena<T>;
  std::vector<Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> In<T>& { return c.x; });
  add_layout_and_option_rejections<Call>(rejections, &reshape_backward_x<T>);
  add_tensor_rejections<Call>(rejections, "dy", [](Call& c) -> In<T>& { return c.dy; }, kX,
                              {4, 15});
  add_tensor_rejections<Call>(rejections, "dx",
                              [](Call& c) -> NormMutable<T>& { return c.grads.dx; }, kX, {4, 3});
  add_tensor_rejections<Call>(rejections, "dgamma",
                              [](Call& c) -> Out<T>& { return *c.grads.dgamma; }, kChannels, {4});
  add_tensor_rejections<Call>(rejections, "dbeta",
                              [](Call& c) -> Out<T>& { return *c.grads.dbeta; }, kChannels, {1});
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
  expect_all_rejected(&valid_batch_norm_backward<T>, rejections);
}

}  // namespace
}  // namespace addnorm
