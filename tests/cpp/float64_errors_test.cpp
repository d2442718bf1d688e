// Bad arguments to the float64 ops (addnorm/float64.hpp): every op refuses what its float32 twin
// refuses (the checks are shared, src/ops/op_checks.hpp), with a message naming the argument, and
// writes nothing, running statistics included. LayerNorm and RMSNorm are in
// errors_row_norm_test.cpp and the fused Add & Norm in errors_add_norm_test.cpp, typed tests over
// both element types; the ops below are still tested here apart from their float32 twins
// (errors_batch_norm_test.cpp, errors_test.cpp). These calls once reached the
// reference kernels unchecked through the Python module (issue 14, item 10): eps = -1 gave NaN, p =
// 1 gave inf, momentum 5, N = 1 in training, running_mean aliasing running_var, outputs overlapping
// weights and offsets past 2^64 were all accepted.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "addnorm/float64.hpp"
#include "errors_test_support.hpp"

namespace addnorm {
namespace {

using testing::add_dropout_rejections;
using testing::add_eps_rejections;
using testing::add_leading_tensor_rejections;
using testing::add_tensor_rejections;
using testing::expect_all_rejected;
using testing::inside;
using testing::overlap_message;
using testing::partial_alias_message;

using Arena64 = testing::BasicArena<double>;
using float64::ConstView;
using float64::MutableView;

const Shape kX{3, 8};

// ---------------------------------------------------------------------------------------------
const Shape kBatch{4, 5, 3};  // (N, C, L)
const Shape kChannels{5};

struct BatchNormCall {
  using Element = double;
  ConstView x;
  MutableView y;
  float64::BatchNormOptions options;
  std::optional<float64::RunningStats> running;
  std::optional<float64::NormStats> batch_stats;
  void operator()() const { float64::batch_norm(x, y, options, running, batch_stats); }
};

BatchNormCall valid_batch_norm(Arena64& arena) {
  float64::BatchNormOptions options{arena.input(kChannels), arena.input(kChannels)};
  return {arena.input(kBatch), arena.output(kBatch), options,
          float64::RunningStats{arena.output(kChannels), arena.output(kChannels)},
          float64::NormStats{arena.output(kChannels), arena.output(kChannels)}};
}

TEST(Float64Errors, BatchNorm) {
  using Call = BatchNormCall;
  std::vector<testing::Rejection<Call>> rejections;
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> MutableView& { return c.y; }, kBatch,
                              {4, 5});
  add_tensor_rejections<Call>(rejections, "running_var",
                              [](Call& c) -> MutableView& { return c.running->var; }, kChannels,
                              {4});
  add_eps_rejections<Call>(rejections, [](Call& c) -> double& { return c.options.eps; });
  for (double momentum : {5.0, -0.1, std::numeric_limits<double>::quiet_NaN()}) {
    rejections.push_back({"momentum " + std::to_string(momentum),
                          [momentum](Call& c, Arena64&) { c.options.momentum = momentum; },
                          {"momentum is", "expected a value in [0, 1]"}});
  }
  rejections.insert(
      rejections.end(),
      {
          {"x of rank 1",
           [](Call& c, Arena64&) { c.x.shape = {60}; },
           {"x has shape [60], expected rank 2 to 5: (N, C, *)"}},
          {"one value per channel in training",
           [](Call& c, Arena64& arena) {
             c.x = arena.input({1, 5});
             c.y = arena.output({1, 5});
           },
           {"with 1 value per channel, expected more than 1 in training mode"}},
          {"running_var the same as running_mean",
           [](Call& c, Arena64&) { c.running->var = c.running->mean; },
           overlap_message("running_mean", "running_var")},
          {"running_var inside x",
           [](Call& c, Arena64&) { c.running->var = inside(c.x, 3, kChannels); },
           overlap_message("running_var", "x")},
          {"y partly over gamma",
           [](Call& c, Arena64&) { c.options.gamma = inside(c.y, 2, kChannels); },
           overlap_message("y", "gamma")},
          {"no running statistics in inference",
           [](Call& c, Arena64&) {
             c.options.training = false;
             c.running.reset();
             c.batch_stats.reset();
           },
           {"running_mean and running_var are absent, expected both in inference mode"}},
          {"batch statistics in inference",
           [](Call& c, Arena64&) { c.options.training = false; },
           {"batch_stats was requested in inference mode"}},
      });
  expect_all_rejected(&valid_batch_norm, rejections);
}

struct BatchNormBackwardCall {
  using Element = double;
  ConstView dy;
  ConstView x;
  float64::BatchNormGrads grads;
  float64::BatchNormOptions options;
  std::optional<float64::RunningStats> running;
  void operator()() const { float64::batch_norm_backward(dy, x, grads, options, running); }
};

BatchNormBackwardCall valid_batch_norm_backward(Arena64& arena) {
  float64::BatchNormOptions options{arena.input(kChannels), arena.input(kChannels)};
  return {arena.input(kBatch), arena.input(kBatch),
          float64::BatchNormGrads{arena.output(kBatch), arena.output(kChannels),
                                  arena.output(kChannels)},
          options, std::nullopt};
}

TEST(Float64Errors, BatchNormBackward) {
  using Call = BatchNormBackwardCall;
  std::vector<testing::Rejection<Call>> rejections;
  add_tensor_rejections<Call>(rejections, "dx", [](Call& c) -> MutableView& { return c.grads.dx; },
                              kBatch, {4, 5, 2});
  add_eps_rejections<Call>(rejections, [](Call& c) -> double& { return c.options.eps; });
  rejections.insert(
      rejections.end(),
      {
          {"momentum 5",
           [](Call& c, Arena64&) { c.options.momentum = 5.0; },
           {"momentum is 5, expected a value in [0, 1]"}},
          {"dbeta without beta",
           [](Call& c, Arena64&) { c.options.beta.reset(); },
           {"dbeta was requested but beta is absent"}},
          {"dgamma inside dx",
           [](Call& c, Arena64&) { c.grads.dgamma = inside(c.grads.dx, 0, kChannels); },
           overlap_message("dx", "dgamma")},
          {"inference without running statistics",
           [](Call& c, Arena64&) { c.options.training = false; },
           {"running_mean and running_var are absent"}},
      });
  expect_all_rejected(&valid_batch_norm_backward, rejections);
}

// ---------------------------------------------------------------------------------------------
struct DropoutCall {
  using Element = double;
  ConstView x;
  MutableView y;
  float64::DropoutOptions options;
  void operator()() const { float64::dropout(x, y, options); }
};

DropoutCall valid_dropout(Arena64& arena) {
  return {arena.input(kX), arena.output(kX), {0.25, 7, 11}};
}

TEST(Float64Errors, Dropout) {
  using Call = DropoutCall;
  std::vector<testing::Rejection<Call>> rejections;
  add_leading_tensor_rejections<Call>(rejections, "x", [](Call& c) -> ConstView& { return c.x; });
  add_tensor_rejections<Call>(rejections, "y", [](Call& c) -> MutableView& { return c.y; }, kX,
                              {24});
  add_dropout_rejections<Call>(rejections,
                               [](Call& c) -> float64::DropoutOptions& { return c.options; });
  rejections.push_back({"offset 2^64 - 1",
                        [](Call& c, Arena64&) { c.options.offset = UINT64_MAX; },
                        {"offset is 18446744073709551615 for 24 elements"}});
  rejections.push_back({"y partly over x", [](Call& c, Arena64&) { c.y = inside(c.x, 3); },
                        partial_alias_message("y", "x")});
  expect_all_rejected(&valid_dropout, rejections);
}

struct AddCall {
  using Element = double;
  ConstView x;
  ConstView r;
  MutableView out;
  void operator()() const { float64::add(x, r, out); }
};

AddCall valid_add(Arena64& arena) {
  return {arena.input(kX), arena.input(kX), arena.output(kX)};
}

TEST(Float64Errors, Add) {
  using Call = AddCall;
  std::vector<testing::Rejection<Call>> rejections;
  add_tensor_rejections<Call>(rejections, "r", [](Call& c) -> ConstView& { return c.r; }, kX,
                              {3, 9});
  rejections.push_back({"out partly over r", [](Call& c, Arena64&) { c.out = inside(c.r, 1); },
                        partial_alias_message("out", "r")});
  expect_all_rejected(&valid_add, rejections);
}

// ---------------------------------------------------------------------------------------------
}  // namespace
}  // namespace addnorm
