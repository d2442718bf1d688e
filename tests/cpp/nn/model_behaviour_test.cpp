// Stack, Adam and the guarantees around them: ReZero starts as the identity, DeepNorm's
// constants, the 2017 schedule, clipping, Adam against a hand-computed step, per-layer
// statistics, determinism for any thread count, and clear errors for bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/nn/nn.hpp"
#include "nn/gradient_check.hpp"

namespace addnorm::nn {
namespace {

using testing::random_tensor;
using testing::small_stack;

TEST(NnStack, RezeroStartsAsTheIdentity) {
  Stack stack(small_stack(Placement::rezero));
  const Tensor x = random_tensor({2, 5, 16}, 1);
  const Tensor& y = stack.forward(x);
  EXPECT_EQ(y.values(), x.values());
  // The alphas still get a gradient, so training can move them.
  zero_grad(stack.parameters());
  stack.backward(random_tensor({2, 5, 16}, 2));
  double alpha_grad = 0;
  for (Parameter* p : stack.parameters()) {
    if (p->name.find("alpha") != std::string::npos) alpha_grad += std::fabs(p->grad[0]);
  }
  EXPECT_GT(alpha_grad, 0.0);
}

TEST(NnStack, DeepNormConstants) {
  EXPECT_NEAR(deep_norm_alpha(6), std::pow(12.0, 0.25), 1e-15);
  EXPECT_NEAR(deep_norm_beta(6), std::pow(48.0, -0.25), 1e-15);
  EXPECT_NEAR(deep_norm_alpha(6), 1.8612097182041991, 1e-12);
  // beta scales the value projection's Xavier bound: |W_v| <= beta sqrt(6 / 2d).
  StackConfig config = small_stack(Placement::deep_norm, 6);
  Stack stack(config);
  const Tensor& in_proj = stack.block(0).attention().in_proj.weight.value;
  const double bound = std::sqrt(6.0 / 32.0);
  double largest_query = 0, largest_value = 0;
  for (int64_t i = 0; i < 16 * 16; ++i) {
    largest_query = std::max(largest_query, std::fabs(static_cast<double>(in_proj[i])));
    largest_value =
        std::max(largest_value, std::fabs(static_cast<double>(in_proj[2 * 16 * 16 + i])));
  }
  EXPECT_GT(largest_query, deep_norm_beta(6) * bound);
  EXPECT_LE(largest_value, deep_norm_beta(6) * bound);
}

TEST(NnStack, Gpt2InitScalesResidualProjections) {
  StackConfig config = small_stack(Placement::pre_norm, 8);
  config.init = InitScheme::gpt2_scaled;
  config.block.d_model = 64;
  config.block.d_ff = 256;
  Stack stack(config);
  auto std_of = [](const Tensor& t) {
    return l2_norm(t.view()) / std::sqrt(static_cast<double>(t.numel()));
  };
  EXPECT_NEAR(std_of(stack.block(0).feed_forward().linear1.weight.value), 0.02, 0.001);
  EXPECT_NEAR(std_of(stack.block(0).feed_forward().linear2.weight.value), 0.02 / 4.0, 0.0003);
}

TEST(NnStack, RecordsPerLayerStatistics) {
  Stack stack(small_stack(Placement::post_norm, 4));
  const Tensor x = random_tensor({2, 5, 16}, 4, 3.0f);
  stack.forward(x);
  ASSERT_EQ(stack.layer_stats().size(), 4u);
  EXPECT_NEAR(stack.input_stats().rms, std::sqrt(3.0), 0.2);  // U(-3, 3): rms sqrt(3)
  for (const LayerStats& layer : stack.layer_stats()) {
    // Post-norm output is LayerNorm's: mean 0, std 1 per token (gamma 1, beta 0).
    EXPECT_NEAR(layer.output.mean, 0.0, 1e-6);
    EXPECT_NEAR(layer.output.std, 1.0, 1e-4);
    EXPECT_NEAR(layer.output.mean_token_norm, 4.0, 1e-3);  // sqrt(16)
  }
  stack.backward(random_tensor({2, 5, 16}, 5));
  ASSERT_EQ(stack.residual_grad_norms().size(), 5u);
  for (double norm : stack.residual_grad_norms()) EXPECT_GT(norm, 0.0);
}

TEST(NnAdam, NoamScheduleIsThePapersFormula) {
  LrSchedule schedule{LrScheduleKind::noam, 0, 4000, 512, 1.0};
  EXPECT_NEAR(schedule.rate(4000), std::pow(512.0, -0.5) * std::pow(4000.0, -0.5), 1e-15);
  EXPECT_NEAR(schedule.rate(1), std::pow(512.0, -0.5) * std::pow(4000.0, -1.5), 1e-18);
  EXPECT_NEAR(schedule.rate(16000), std::pow(512.0, -0.5) / 126.49110640673517, 1e-15);
  EXPECT_LT(schedule.rate(3999), schedule.rate(4000));
  EXPECT_GT(schedule.rate(4000), schedule.rate(4001));
  EXPECT_THROW(schedule.rate(0), Error);
}

TEST(NnAdam, OneStepMatchesTheUpdateRule) {
  Parameter p("p", Shape{2});
  p.value = Tensor(Shape{2}, {1.0f, -2.0f});
  p.grad = Tensor(Shape{2}, {0.5f, -0.25f});
  AdamOptions options;
  options.schedule.lr = 0.1;
  Adam adam({&p}, options);
  const AdamStep step = adam.step();
  EXPECT_EQ(step.step, 1);
  // After bias correction the first step is lr * g / (|g| + eps'): each moves by ~lr.
  EXPECT_NEAR(p.value[0], 0.9, 1e-6);
  EXPECT_NEAR(p.value[1], -1.9, 1e-6);
  EXPECT_NEAR(step.grad_norm, std::sqrt(0.25 + 0.0625), 1e-12);
}

TEST(NnAdam, ClipsTheGlobalNorm) {
  Parameter a("a", Shape{1}), b("b", Shape{1});
  a.grad[0] = 3.0f;
  b.grad[0] = 4.0f;
  EXPECT_NEAR(clip_grad_norm({&a, &b}, 1.0), 5.0, 1e-12);
  EXPECT_NEAR(global_grad_norm({&a, &b}), 1.0, 1e-5);
  EXPECT_NEAR(a.grad[0] / b.grad[0], 0.75, 1e-6);
}

// The whole training step, twice from scratch: on 1 thread and on 2. Gradients, weights and
// losses must be bitwise equal.
std::vector<float> train_and_collect(int threads) {
  set_num_threads(threads);
  SequenceModelConfig config;
  config.stack = small_stack(Placement::post_norm, 2);
  config.stack.block.d_model = 64;
  config.stack.block.d_ff = 256;
  config.stack.block.dropout = 0.1f;
  config.stack.block.norm = NormType::rms_norm;
  config.vocab_size = 13;
  SequenceModel model(config);
  AdamOptions options;
  options.schedule = {LrScheduleKind::noam, 0, 10, 64, 1.0};
  options.clip_norm = 1.0;
  Adam adam(model.parameters(), options);
  std::vector<int32_t> tokens(4 * 96), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>(i * 5 % 13);
    targets[i] = static_cast<int32_t>(i * 3 % 13);
  }
  std::vector<float> collected;
  for (int step = 0; step < 2; ++step) {
    zero_grad(adam.parameters());
    collected.push_back(static_cast<float>(model.forward_backward(tokens, targets, 4, 96)));
    adam.step();
  }
  for (Parameter* p : adam.parameters()) {
    collected.insert(collected.end(), p->grad.values().begin(), p->grad.values().end());
    collected.insert(collected.end(), p->value.values().begin(), p->value.values().end());
  }
  return collected;
}

TEST(NnDeterminism, BitwiseIdenticalForAnyThreadCount) {
  const std::vector<float> one = train_and_collect(1);
  const std::vector<float> two = train_and_collect(2);
  const std::vector<float> three = train_and_collect(3);
  set_num_threads(2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i], two[i]) << "element " << i;
    ASSERT_EQ(one[i], three[i]) << "element " << i;
  }
}

template <class F>
void expect_error_mentioning(F&& make, const std::string& words) {
  try {
    make();
    ADD_FAILURE() << "no error; expected one mentioning \"" << words << "\"";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
  }
}

TEST(NnErrors, BadArgumentsAreNamed) {
  StackConfig config = small_stack(Placement::pre_norm);
  config.depth = 0;
  expect_error_mentioning([&] { Stack stack(config); }, "depth is 0");
  config = small_stack(Placement::pre_norm);
  config.block.n_heads = 5;
  expect_error_mentioning([&] { Stack stack(config); }, "n_heads is 5, expected a divisor");
  config = small_stack(Placement::pre_norm);
  config.block.dropout = 1.0f;
  expect_error_mentioning([&] { Stack stack(config); }, "dropout is 1");
  config = small_stack(Placement::pre_norm);
  config.block.d_model = -4;
  expect_error_mentioning([&] { Stack stack(config); }, "d_model is -4");
  expect_error_mentioning([] { parse_placement("sideways"); }, "placement is \"sideways\"");
  expect_error_mentioning([] { parse_norm_type("group"); }, "norm is \"group\"");
  expect_error_mentioning([] { set_num_threads(0); }, "threads is 0");

  Stack stack(small_stack(Placement::pre_norm));
  const Tensor x = random_tensor({2, 4, 16}, 1);
  expect_error_mentioning([&] { stack.forward(x, {false, {4, 0}}); }, "mask.lengths[1] is 0");
  expect_error_mentioning([&] { stack.forward(x, {false, {4}}); }, "mask.lengths has 1 entries");
  expect_error_mentioning(
      [&] {
        stack.forward(random_tensor({2, 4, 8}, 1));
      },
      "expected [batch, seq, 16]");

  SequenceModelConfig model_config;
  model_config.stack = small_stack(Placement::pre_norm);
  model_config.vocab_size = 5;
  SequenceModel model(model_config);
  const std::vector<int32_t> tokens{0, 1, 7}, targets{0, 1, 2};
  expect_error_mentioning([&] { model.loss(tokens, targets, 1, 3); }, "tokens[2] is 7");
}

}  // namespace
}  // namespace addnorm::nn
