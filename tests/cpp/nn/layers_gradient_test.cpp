// Finite-difference checks of every layer's backward: Linear, FeedForward (ReLU, GELU),
// self- and cross-attention with causal and padding masks, Norm, cross-entropy.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "addnorm/nn/nn.hpp"
#include "nn/gradient_check.hpp"

namespace addnorm::nn {
namespace {

using testing::expect_gradient;
using testing::random_tensor;
using testing::weighted_sum;

TEST(NnLinear, BackwardMatchesFiniteDifferences) {
  Linear linear("lin", 5, 4);
  linear.weight.value = random_tensor({4, 5}, 1);
  linear.bias.value = random_tensor({4}, 2);
  Tensor x = random_tensor({2, 3, 5}, 3);
  const Tensor w = random_tensor({2, 3, 4}, 4);
  Tensor y, dx;
  linear.forward(x, y);
  linear.backward(x, w, &dx);
  auto loss = [&] {
    Tensor out;
    linear.forward(x, out);
    return weighted_sum(out, w);
  };
  expect_gradient("dx", x.values(), dx.values(), loss);
  const std::vector<float> dweight = linear.weight.grad.values();
  const std::vector<float> dbias = linear.bias.grad.values();
  expect_gradient("dW", linear.weight.value.values(), dweight, loss);
  expect_gradient("db", linear.bias.value.values(), dbias, loss);
}

class NnFeedForward : public ::testing::TestWithParam<Activation> {};

TEST_P(NnFeedForward, BackwardMatchesFiniteDifferences) {
  FeedForward ffn("ffn", 6, 10, GetParam());
  for (Parameter* p : ffn.parameters()) p->value = random_tensor(p->value.shape(), 11, 0.6f);
  Tensor x = random_tensor({2, 3, 6}, 12);
  const Tensor w = random_tensor({2, 3, 6}, 13);
  Tensor y, dx;
  ffn.forward(x, y);
  ffn.backward(x, w, dx);
  auto loss = [&] {
    Tensor out;
    ffn.forward(x, out);
    return weighted_sum(out, w);
  };
  // A small step so that no pre-activation crosses ReLU's kink.
  expect_gradient("dx", x.values(), dx.values(), loss, 1e-3f);
  for (Parameter* p : ffn.parameters()) {
    const std::vector<float> grad = p->grad.values();
    expect_gradient(p->name, p->value.values(), grad, loss, 1e-3f);
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, NnFeedForward,
                         ::testing::Values(Activation::relu, Activation::gelu));

TEST(NnFeedForward, GeluIsTheErfForm) {
  FeedForward ffn("ffn", 1, 1, Activation::gelu);
  ffn.linear1.weight.value[0] = 1.0f;
  ffn.linear2.weight.value[0] = 1.0f;
  Tensor x(Shape{1, 1}, {1.0f}), y;
  ffn.forward(x, y);
  // GELU(1) = 0.5 (1 + erf(1 / sqrt 2)) = 0.8413447460685429.
  EXPECT_NEAR(y[0], 0.8413447460685429, 1e-7);
}

struct MaskCase {
  bool causal;
  std::vector<int64_t> lengths;
};

class NnAttention : public ::testing::TestWithParam<MaskCase> {};

TEST_P(NnAttention, SelfAttentionBackwardMatchesFiniteDifferences) {
  MultiHeadAttention attention("attn", 8, 2);
  for (Parameter* p : attention.parameters()) p->value = random_tensor(p->value.shape(), 21, 0.5f);
  const AttentionMask mask{GetParam().causal, GetParam().lengths};
  Tensor x = random_tensor({2, 4, 8}, 22);
  const Tensor w = random_tensor({2, 4, 8}, 23);
  Tensor y, dx;
  attention.forward(x, mask, y);
  attention.backward(x, w, dx);
  auto loss = [&] {
    Tensor out;
    attention.forward(x, mask, out);
    return weighted_sum(out, w);
  };
  expect_gradient("dx", x.values(), dx.values(), loss);
  for (Parameter* p : attention.parameters()) {
    const std::vector<float> grad = p->grad.values();
    expect_gradient(p->name, p->value.values(), grad, loss);
  }
}

INSTANTIATE_TEST_SUITE_P(Masks, NnAttention,
                         ::testing::Values(MaskCase{false, {}}, MaskCase{true, {}},
                                           MaskCase{false, {2, 4}}, MaskCase{true, {3, 1}}));

TEST(NnAttention, MaskedKeysGetZeroProbability) {
  MultiHeadAttention attention("attn", 4, 1);
  for (Parameter* p : attention.parameters()) p->value = random_tensor(p->value.shape(), 31);
  Tensor x = random_tensor({1, 3, 4}, 32), y;
  attention.forward(x, AttentionMask{true, {2}}, y);
  const Tensor& p = attention.probabilities();  // [1, 1, 3, 3]
  EXPECT_FLOAT_EQ(p[0], 1.0f);                  // query 0 sees key 0 only
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_EQ(p[2], 0.0f);
  EXPECT_EQ(p[3 + 2], 0.0f);  // key 2 is padding
  EXPECT_EQ(p[6 + 2], 0.0f);
  EXPECT_NEAR(p[6] + p[7], 1.0, 1e-6);
}

TEST(NnAttention, CrossAttentionBackwardMatchesFiniteDifferences) {
  MultiHeadAttention attention("cross", 8, 4);
  for (Parameter* p : attention.parameters()) p->value = random_tensor(p->value.shape(), 41, 0.5f);
  const AttentionMask mask{false, {5, 2}};
  Tensor x = random_tensor({2, 3, 8}, 42);
  Tensor memory = random_tensor({2, 5, 8}, 43);
  const Tensor w = random_tensor({2, 3, 8}, 44);
  Tensor y, dx, dmemory(memory.shape());
  attention.forward_cross(x, memory, mask, y);
  attention.backward_cross(x, memory, w, dx, dmemory);
  auto loss = [&] {
    Tensor out;
    attention.forward_cross(x, memory, mask, out);
    return weighted_sum(out, w);
  };
  expect_gradient("dx", x.values(), dx.values(), loss);
  expect_gradient("dmemory", memory.values(), dmemory.values(), loss);
  for (Parameter* p : attention.parameters()) {
    const std::vector<float> grad = p->grad.values();
    expect_gradient(p->name, p->value.values(), grad, loss);
  }
}

class NnNorm : public ::testing::TestWithParam<NormType> {};

TEST_P(NnNorm, BackwardMatchesFiniteDifferences) {
  Norm norm("norm", GetParam(), 6, 1e-5f);
  for (Parameter* p : norm.parameters()) p->value = random_tensor(p->value.shape(), 51);
  Tensor x = random_tensor({3, 2, 6}, 52);
  const Tensor w = random_tensor({3, 2, 6}, 53);
  Tensor y, dx;
  norm.forward(x, y, true);
  norm.backward(x, w, dx, true);
  auto loss = [&] {
    Tensor out;
    norm.forward(x, out, true);
    return weighted_sum(out, w);
  };
  expect_gradient("dx", x.values(), dx.values(), loss, 1e-3f);
  for (Parameter* p : norm.parameters()) {
    const std::vector<float> grad = p->grad.values();
    expect_gradient(p->name, p->value.values(), grad, loss, 1e-3f);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, NnNorm,
                         ::testing::Values(NormType::layer_norm, NormType::rms_norm,
                                           NormType::batch_norm));

TEST(NnCrossEntropy, UniformLogitsGiveLogClasses) {
  const Tensor logits(Shape{2, 5});
  const std::vector<int32_t> targets{1, 4};
  Tensor dlogits(Shape{2, 5});
  EXPECT_NEAR(softmax_cross_entropy(logits.view(), targets, dlogits.view()), std::log(5.0), 1e-12);
  EXPECT_NEAR(dlogits[1], (0.2 - 1.0) / 2, 1e-7);
  EXPECT_NEAR(dlogits[0], 0.2 / 2, 1e-7);
}

TEST(NnCrossEntropy, BackwardMatchesFiniteDifferencesAndIgnoresRows) {
  Tensor logits = random_tensor({3, 4}, 61, 3.0f);
  const std::vector<int32_t> targets{2, -1, 0};
  Tensor dlogits(Shape{3, 4});
  softmax_cross_entropy(logits.view(), targets, dlogits.view());
  for (int c = 0; c < 4; ++c) EXPECT_EQ(dlogits[4 + c], 0.0f);
  expect_gradient(
      "dlogits", logits.values(), dlogits.values(),
      [&] { return softmax_cross_entropy(logits.view(), targets); }, 1e-3f);
}

TEST(NnEmbedding, AddsSinusoidalPositions) {
  const Tensor pe = sinusoidal_positional_encoding(3, 4);
  EXPECT_EQ(pe[0], 0.0f);
  EXPECT_EQ(pe[1], 1.0f);
  EXPECT_NEAR(pe[2 * 4 + 0], std::sin(2.0), 1e-7);
  EXPECT_NEAR(pe[2 * 4 + 3], std::cos(2.0 / 100.0), 1e-7);  // 10000^(2/4) = 100
  Embedding embedding("emb", 5, 4, true);
  embedding.weight.value = random_tensor({5, 4}, 71);
  const std::vector<int32_t> tokens{3, 3, 0};
  Tensor y;
  embedding.forward(tokens, 1, 3, y);
  EXPECT_FLOAT_EQ(y[4 + 1], 2.0f * embedding.weight.value[3 * 4 + 1] + pe[4 + 1]);
  const Tensor dy = random_tensor({1, 3, 4}, 72);
  embedding.backward(dy);
  EXPECT_FLOAT_EQ(embedding.weight.grad[3 * 4], 2.0f * (dy[0] + dy[4]));
}

}  // namespace
}  // namespace addnorm::nn
