// Finite-difference checks of TransformerBlock for every placement and norm (with dropout on),
// of DecoderBlock, and of a whole SequenceModel's cross-entropy loss.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "addnorm/nn/nn.hpp"
#include "nn/gradient_check.hpp"

namespace addnorm::nn {
namespace {

using testing::expect_gradient;
using testing::random_tensor;
using testing::weighted_sum;

// Moves norm scales, shifts, biases and ReZero's alphas away from their 1 / 0 starting values so
// that every gradient term is exercised.
void perturb(const ParameterList& parameters, uint32_t seed) {
  for (Parameter* p : parameters) {
    if (p->name.find("weight") != std::string::npos) continue;
    const Tensor noise = random_tensor(p->value.shape(), seed++, 0.3f);
    for (int64_t i = 0; i < p->value.numel(); ++i) {
      p->value[i] += noise[i] + (p->name.find("alpha") != std::string::npos ? 0.5f : 0.0f);
    }
  }
}

void copy_values(const ParameterList& from, const ParameterList& to) {
  ASSERT_EQ(from.size(), to.size());
  for (size_t i = 0; i < from.size(); ++i) to[i]->value = from[i]->value;
}

using BlockCase = std::tuple<Placement, NormType>;

class NnBlock : public ::testing::TestWithParam<BlockCase> {};

TEST_P(NnBlock, BackwardMatchesFiniteDifferencesWithDropout) {
  BlockConfig config;
  config.d_model = 8;
  config.n_heads = 2;
  config.d_ff = 12;
  config.placement = std::get<0>(GetParam());
  config.norm = std::get<1>(GetParam());
  config.dropout = 0.25f;
  config.activation = Activation::gelu;
  const BlockInit init{InitScheme::xavier_uniform, 4, 1, 99};
  // A fresh block built from the same seed draws the same dropout masks on its first forward,
  // so every loss evaluation builds one and copies the (perturbed) master weights into it.
  TransformerBlock master(config, init);
  perturb(master.parameters(), 5);
  Tensor x = random_tensor({2, 3, 8}, 6);
  const Tensor w = random_tensor({2, 3, 8}, 7);
  const AttentionMask mask{true, {3, 2}};
  auto loss = [&] {
    TransformerBlock block(config, init);
    copy_values(master.parameters(), block.parameters());
    return weighted_sum(block.forward(x, mask), w);
  };
  TransformerBlock analytic(config, init);
  copy_values(master.parameters(), analytic.parameters());
  analytic.forward(x, mask);
  const Tensor dx = analytic.backward(w);
  expect_gradient("dx", x.values(), dx.values(), loss, 1e-3f, 2e-2);
  const ParameterList parameters = master.parameters();
  const ParameterList grads = analytic.parameters();
  for (size_t i = 0; i < parameters.size(); ++i) {
    expect_gradient(parameters[i]->name, parameters[i]->value.values(), grads[i]->grad.values(),
                    loss, 1e-3f, 2e-2);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Placements, NnBlock,
    ::testing::Combine(
        ::testing::Values(Placement::post_norm, Placement::pre_norm, Placement::no_residual,
                          Placement::deep_norm, Placement::admin),
        ::testing::Values(NormType::layer_norm, NormType::rms_norm, NormType::batch_norm)));
INSTANTIATE_TEST_SUITE_P(NoNorm, NnBlock,
                         ::testing::Values(BlockCase{Placement::no_norm, NormType::layer_norm},
                                           BlockCase{Placement::rezero, NormType::layer_norm},
                                           BlockCase{Placement::bare, NormType::layer_norm}));

class NnDecoderBlock : public ::testing::TestWithParam<Placement> {};

TEST_P(NnDecoderBlock, BackwardMatchesFiniteDifferences) {
  BlockConfig config;
  config.d_model = 8;
  config.n_heads = 2;
  config.d_ff = 12;
  config.placement = GetParam();
  config.dropout = 0.1f;
  const BlockInit init{InitScheme::gpt2_scaled, 2, 0, 5};
  DecoderBlock master(config, init);
  perturb(master.parameters(), 8);
  for (Parameter* p : master.parameters()) {
    if (p->name.find("weight") != std::string::npos) {
      for (float& v : p->value.values()) v *= 10.0f;  // gpt2's 0.02 makes gradients tiny
    }
  }
  Tensor x = random_tensor({2, 3, 8}, 9);
  Tensor memory = random_tensor({2, 4, 8}, 10);
  const Tensor w = random_tensor({2, 3, 8}, 11);
  const AttentionMask memory_mask{false, {4, 2}};
  auto loss = [&] {
    DecoderBlock block(config, init);
    copy_values(master.parameters(), block.parameters());
    return weighted_sum(block.forward(x, memory, {}, memory_mask), w);
  };
  DecoderBlock analytic(config, init);
  copy_values(master.parameters(), analytic.parameters());
  analytic.forward(x, memory, {}, memory_mask);
  Tensor dmemory;
  const Tensor dx = analytic.backward(w, dmemory);
  expect_gradient("dx", x.values(), dx.values(), loss, 1e-3f, 2e-2);
  expect_gradient("dmemory", memory.values(), dmemory.values(), loss, 1e-3f, 2e-2);
  const ParameterList parameters = master.parameters();
  const ParameterList grads = analytic.parameters();
  for (size_t i = 0; i < parameters.size(); ++i) {
    expect_gradient(parameters[i]->name, parameters[i]->value.values(), grads[i]->grad.values(),
                    loss, 1e-3f, 2e-2);
  }
}

INSTANTIATE_TEST_SUITE_P(Placements, NnDecoderBlock,
                         ::testing::Values(Placement::post_norm, Placement::pre_norm));

TEST(NnSequenceModel, LossGradientMatchesFiniteDifferences) {
  SequenceModelConfig config;
  config.stack.depth = 2;
  config.stack.block.d_model = 8;
  config.stack.block.n_heads = 2;
  config.stack.block.d_ff = 12;
  config.vocab_size = 7;
  SequenceModel model(config);
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5, 6}, targets{2, 3, -1, 5, 6, 0};
  const ParameterList parameters = model.parameters();
  zero_grad(parameters);
  model.forward_backward(tokens, targets, 2, 3);
  auto loss = [&] { return model.loss(tokens, targets, 2, 3); };
  for (Parameter* p : parameters) {
    const std::vector<float> grad = p->grad.values();
    expect_gradient(p->name, p->value.values(), grad, loss, 1e-3f, 2e-2);
  }
}

}  // namespace
}  // namespace addnorm::nn
