// Admin's profiling pass against the variances it is defined by, Admin at omega = 1 against
// post-norm, the bare placement against the attention it wraps, and attention-only blocks:
// their parameters, their gradients against finite differences, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "addnorm/nn/nn.hpp"
#include "addnorm/nn/stats.hpp"
#include "nn/gradient_check.hpp"

namespace addnorm::nn {
namespace {

using testing::expect_gradient;
using testing::random_tensor;
using testing::small_stack;
using testing::weighted_sum;

std::vector<Parameter*> omegas(Stack& stack) {
  std::vector<Parameter*> found;
  for (Parameter* p : stack.parameters()) {
    if (p->name.find(".omega") != std::string::npos) found.push_back(p);
  }
  return found;
}

double variance(const Tensor& x) {
  const double std = activation_stats(x.view()).std;
  return std * std;
}

TEST(NnAdmin, ProfilingSetsOmegaFromTheVariances) {
  // FFN-only blocks: box i's omega is sqrt(Var[omega_{i-1} x] + Var[FFN(x)]) of box i - 1, and the
  // first box's is 1. Checked for the second box against the variances computed here.
  StackConfig config = small_stack(Placement::admin, 2);
  config.block.attention = false;
  Stack stack(config);
  const Tensor x = random_tensor({3, 5, 16}, 4, 1.7f);
  stack.initialize_admin(x);
  ASSERT_TRUE(stack.admin_initialized());
  const std::vector<Parameter*> omega = omegas(stack);
  ASSERT_EQ(omega.size(), 2u);
  for (float v : omega[0]->value.values()) EXPECT_EQ(v, 1.0f);
  Tensor ffn_out;
  stack.block(0).feed_forward().forward(x, ffn_out);
  const double expected = std::sqrt(variance(x) + variance(ffn_out));
  EXPECT_GT(expected, 1.1);  // away from 1: the check can fail
  for (float v : omega[1]->value.values()) EXPECT_NEAR(v, expected, 1e-5 * expected);
}

TEST(NnAdmin, FirstForwardProfilesOnceAndExplicitProfilingWins) {
  const Tensor x = random_tensor({2, 4, 16}, 5);
  Stack lazy(small_stack(Placement::admin, 3));
  Stack explicit_stack(small_stack(Placement::admin, 3));
  explicit_stack.initialize_admin(x);
  EXPECT_FALSE(lazy.admin_initialized());
  const Tensor first = lazy.forward(x);
  EXPECT_TRUE(lazy.admin_initialized());
  EXPECT_EQ(first.values(), explicit_stack.forward(x).values());
  // Omegas moved by hand (as an optimiser would) stay: later forwards do not profile again.
  for (Parameter* p : omegas(lazy)) {
    for (float& v : p->value.values()) v = 2.5f;
  }
  lazy.forward(random_tensor({2, 4, 16}, 6));
  for (Parameter* p : omegas(lazy)) EXPECT_EQ(p->value[0], 2.5f);
}

TEST(NnAdmin, OmegaOneIsPostNorm) {
  Stack admin(small_stack(Placement::admin, 3));
  Stack post(small_stack(Placement::post_norm, 3));
  const Tensor x = random_tensor({2, 4, 16}, 7);
  admin.initialize_admin(x);
  for (Parameter* p : omegas(admin)) {
    for (float& v : p->value.values()) v = 1.0f;
  }
  EXPECT_EQ(admin.forward(x).values(), post.forward(x).values());
}

TEST(NnBare, AttentionOnlyBareBlockIsTheAttention) {
  StackConfig config = small_stack(Placement::bare, 1);
  config.block.ffn = false;
  Stack stack(config);
  const Tensor x = random_tensor({2, 4, 16}, 8);
  Tensor expected;
  stack.block(0).attention().forward(x, {}, expected);
  EXPECT_EQ(stack.forward(x).values(), expected.values());
  EXPECT_FALSE(stack.has_final_norm());
}

TEST(NnAttentionOnly, ParametersAndFiniteDifferences) {
  for (Placement placement : {Placement::admin, Placement::pre_norm, Placement::bare}) {
    BlockConfig config;
    config.d_model = 8;
    config.n_heads = 2;
    config.d_ff = 12;
    config.placement = placement;
    config.ffn = false;
    const BlockInit init{InitScheme::xavier_uniform, 2, 0, 21};
    TransformerBlock block(config, init);
    for (Parameter* p : block.parameters()) {
      EXPECT_EQ(p->name.find(".ffn"), std::string::npos) << p->name;
      // Admin's omega away from 1, one value per feature, so that dx = omega * dh is tested.
      if (p->name.find(".omega") != std::string::npos) {
        for (int64_t k = 0; k < p->value.numel(); ++k)
          p->value[k] = 0.5f + 0.2f * static_cast<float>(k);
      }
    }
    EXPECT_EQ(block.ffn_norm(), nullptr);
    Tensor x = random_tensor({2, 3, 8}, 9);
    const Tensor w = random_tensor({2, 3, 8}, 10);
    auto loss = [&] { return weighted_sum(block.forward(x), w); };
    block.forward(x);
    const ParameterList parameters = block.parameters();
    zero_grad(parameters);
    const Tensor dx = block.backward(w);
    expect_gradient(std::string(placement_name(placement)) + " dx", x.values(), dx.values(), loss,
                    1e-3f, 2e-2);
    for (Parameter* p : parameters) {
      const std::vector<float> grad = p->grad.values();
      expect_gradient(p->name, p->value.values(), grad, loss, 1e-3f, 2e-2);
    }
  }
}

TEST(NnAttentionOnly, Refusals) {
  BlockConfig config;
  config.attention = false;
  config.ffn = false;
  try {
    validate_block_config(config);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("attention and ffn are both false"),
              std::string::npos);
  }
  BlockConfig admin;
  admin.placement = Placement::admin;
  EXPECT_THROW(DecoderBlock(admin, BlockInit{}), Error);
  EXPECT_EQ(parse_placement("admin"), Placement::admin);
  EXPECT_EQ(parse_placement("bare"), Placement::bare);
  EXPECT_STREQ(placement_name(Placement::bare), "bare");
}

}  // namespace
}  // namespace addnorm::nn
