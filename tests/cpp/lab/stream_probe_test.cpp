// The stream measurements against values derived by hand: the cosine of a token with itself, of
// opposite and orthogonal tokens; LayerNorm's output norm sqrt(D var / (var + eps)); the norm's
// input size recovered from its saved statistics equals the input's measured size.
#include "lab/stream_probe.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "addnorm/nn/block.hpp"
#include "addnorm/numpy_random.hpp"

namespace addnorm::lab {
namespace {

Tensor random_tensor(const Shape& shape, double scale, double shift, uint64_t seed) {
  numpy_random::Generator generator(seed);
  Tensor x(shape);
  for (float& v : x.values()) v = static_cast<float>(shift + scale * generator.standard_normal());
  return x;
}

TEST(LabStreamProbe, TokenCosineOfDerivedCases) {
  // One sequence of three tokens: t, t, -t: pairs (0,1) = 1, (0,2) = (1,2) = -1, so the mean
  // over the 6 ordered pairs is (2 * 1 + 4 * -1) / 6 = -1/3.
  Tensor x(Shape{1, 3, 2}, {1, 2, 1, 2, -1, -2});
  EXPECT_NEAR(mean_token_cosine(x), -1.0 / 3.0, 1e-12);
  // Two orthogonal tokens: 0. Identical tokens: 1.
  EXPECT_NEAR(mean_token_cosine(Tensor(Shape{1, 2, 2}, {1, 0, 0, 3})), 0.0, 1e-12);
  EXPECT_NEAR(mean_token_cosine(Tensor(Shape{2, 2, 2}, {1, 1, 1, 1, 2, 5, 2, 5})), 1.0, 1e-12);
  // One token per sequence: no pair.
  EXPECT_TRUE(std::isnan(mean_token_cosine(Tensor(Shape{2, 1, 2}, {1, 0, 0, 1}))));
}

TEST(LabStreamProbe, TokensThatDifferByShiftAndScaleAreIdenticalAfterLayerNorm) {
  // t, 3 t + 5, 0.5 t - 2: LayerNorm removes the shift and the scale, so every pair has cosine 1
  // after it, while before it they do not.
  const Tensor t = random_tensor(Shape{1, 1, 16}, 1.0, 0.0, 3);
  Tensor x(Shape{1, 3, 16});
  for (int k = 0; k < 16; ++k) {
    x[k] = t[k];
    x[16 + k] = 3.0f * t[k] + 5.0f;
    x[32 + k] = 0.5f * t[k] - 2.0f;
  }
  EXPECT_LT(mean_token_cosine(x), 0.9);
  nn::Norm norm("ln", nn::NormType::layer_norm, 16, 1e-5f);
  Tensor y;
  norm.forward(x, y, false);
  EXPECT_NEAR(mean_token_cosine(y), 1.0, 1e-5);
}

TEST(LabStreamProbe, NormSizesFromTheSavedStatistics) {
  const int64_t dim = 64;
  // Rows of mean 3 and std 2: |x|^2 = D (var + mean^2) on average.
  const Tensor x = random_tensor(Shape{4, 8, dim}, 2.0, 3.0, 11);
  for (nn::NormType type : {nn::NormType::layer_norm, nn::NormType::rms_norm}) {
    nn::Norm norm("n", type, dim, 1e-5f);
    Tensor y;
    norm.forward(x, y, false);
    // The norm's input size, recovered from mean and rstd, is the input's measured size.
    EXPECT_NEAR(norm_input_token_norm(norm) / mean_token_norm(x), 1.0, 1e-5)
        << nn::norm_type_name(type);
    // gamma = 1, beta = 0: every output row has norm sqrt(D var / (var + eps)) ~ sqrt(D) for
    // LayerNorm, and sqrt(D ms / (ms + eps)) ~ sqrt(D) for RMSNorm.
    EXPECT_NEAR(mean_token_norm(y), std::sqrt(static_cast<double>(dim)), 1e-3)
        << nn::norm_type_name(type);
  }
}

TEST(LabStreamProbe, MeanTokenNormOfGaussianRowsAndTheirReLU) {
  // For X ~ N(0, s^2) in D dims, E|X|^2 = s^2 D and E|ReLU(X)|^2 = s^2 D / 2 (half the
  // coordinates are zeroed, the other half keep their second moment). With 512 rows of 256 the
  // mean squared norm is within 1% of its expectation (relative sd sqrt(2 / D) / sqrt(rows)).
  const int64_t rows = 512, dim = 256;
  const double s = 1.5;
  Tensor x = random_tensor(Shape{rows, dim}, s, 0.0, 5);
  double square = 0.0, relu_square = 0.0;
  Tensor relu(x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    square += double{x[i]} * x[i];
    relu[i] = std::max(0.0f, x[i]);
    relu_square += double{relu[i]} * relu[i];
  }
  EXPECT_NEAR(square / rows / (s * s * dim), 1.0, 0.01);
  EXPECT_NEAR(relu_square / rows / (s * s * dim / 2), 1.0, 0.02);
  // mean_token_norm is the mean of the row norms; with D = 256 the rows' norms hardly vary, so it
  // is within 0.5% of sqrt(E|X|^2).
  EXPECT_NEAR(mean_token_norm(x) / (s * std::sqrt(static_cast<double>(dim))), 1.0, 0.005);
  EXPECT_NEAR(mean_token_norm(relu) / (s * std::sqrt(dim / 2.0)), 1.0, 0.01);
}

TEST(LabStreamProbe, FfnOnlyBlockDoesNotMixTokens) {
  // Without attention a block is position-wise: swapping two tokens of the input swaps them in
  // the output and changes nothing else.
  nn::BlockConfig config;
  config.d_model = 16;
  config.n_heads = 2;
  config.d_ff = 32;
  config.placement = nn::Placement::post_norm;
  config.attention = false;
  nn::BlockInit init;
  init.seed = 4;
  nn::TransformerBlock block(config, init);
  const Tensor x = random_tensor(Shape{1, 3, 16}, 1.0, 0.0, 8);
  Tensor swapped = x;
  for (int k = 0; k < 16; ++k) std::swap(swapped[k], swapped[32 + k]);
  const Tensor y = block.forward(x);
  const Tensor y_swapped = block.forward(swapped);
  for (int k = 0; k < 16; ++k) {
    EXPECT_EQ(y_swapped[k], y[32 + k]);
    EXPECT_EQ(y_swapped[16 + k], y[16 + k]);
    EXPECT_EQ(y_swapped[32 + k], y[k]);
  }
  // No attention parameters: only the FFN's and the one norm's.
  for (const nn::Parameter* p : block.parameters()) {
    EXPECT_EQ(p->name.find(".attn."), std::string::npos) << p->name;
  }
  EXPECT_EQ(block.attention_norm(), nullptr);
  ASSERT_NE(block.ffn_norm(), nullptr);
}

}  // namespace
}  // namespace addnorm::lab
