// rank-collapse: the relative residual on hand-computed sequences, and Dong et al.'s effect at
// the --quick setting: pure attention (and attention with a norm but no skip) collapses within a
// few blocks, while every variant with a skip keeps a residual orders of magnitude larger.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "addnorm/error.hpp"
#include "addnorm/lab/rank_collapse.hpp"

namespace addnorm::lab {
namespace {

TEST(LabRankCollapse, RelativeResidualByHand) {
  // Tokens (1, 1) and (1, -1): mean (1, 0), residual rows (0, 1), (0, -1): sqrt(2) / sqrt(4).
  const Tensor two(Shape{1, 2, 2}, {1.0f, 1.0f, 1.0f, -1.0f});
  EXPECT_NEAR(relative_residual(two), std::sqrt(0.5), 1e-15);
  // Identical tokens: 0. A zero sequence counts as 0 and the batch mean takes both.
  const Tensor same(Shape{2, 3, 2}, {2, -1, 2, -1, 2, -1, 0, 0, 0, 0, 0, 0});
  EXPECT_EQ(relative_residual(same), 0.0);
  // Opposite tokens: the mean is 0, the residual all of X.
  const Tensor opposite(Shape{1, 2, 3}, {1, 2, 3, -1, -2, -3});
  EXPECT_NEAR(relative_residual(opposite), 1.0, 1e-15);
  EXPECT_THROW(relative_residual(Tensor(Shape{2, 2})), Error);
  // An overflowed stream is not a collapsed one.
  const Tensor blown(Shape{1, 2, 2}, {1.0f, 2.0f, std::numeric_limits<float>::infinity(), 0.0f});
  EXPECT_TRUE(std::isnan(relative_residual(blown)));
}

const RankCollapseCurve& curve_of(const RankCollapseResult& result, nn::Placement placement) {
  for (const RankCollapseCurve& curve : result.curves) {
    if (curve.placement == placement) return curve;
  }
  throw Error("no curve");
}

TEST(LabRankCollapse, SkipsPreventTheCollapseNormsDoNot) {
  const RankCollapseParams params = rank_collapse_quick();
  const RankCollapseResult result = run_rank_collapse(params);
  ASSERT_EQ(result.curves.size(), params.placements.size());
  const size_t last = static_cast<size_t>(params.depth);
  for (const RankCollapseCurve& curve : result.curves) {
    ASSERT_EQ(curve.residual.size(), last + 1);
    // The input is the same for every placement: random tokens, far from collapsed.
    EXPECT_GT(curve.residual[0].median, 0.9);
    EXPECT_LT(std::fabs(curve.cosine[0].median), 0.05);
  }
  const double bare = curve_of(result, nn::Placement::bare).residual[last].median;
  const double norm_only = curve_of(result, nn::Placement::no_residual).residual[last].median;
  // Without a skip: collapsed to float32 rounding within a few blocks.
  EXPECT_LT(bare, 1e-5);
  EXPECT_LT(norm_only, 1e-5);
  EXPECT_GE(curve_of(result, nn::Placement::bare).collapsed_at, 1);
  EXPECT_LE(curve_of(result, nn::Placement::bare).collapsed_at, 4);
  EXPECT_LE(curve_of(result, nn::Placement::no_residual).collapsed_at, 5);
  // With a skip, whatever the norm: never below 1e-3 in 12 blocks, and pre-norm keeps most of
  // the input's spread.
  for (nn::Placement skip :
       {nn::Placement::no_norm, nn::Placement::post_norm, nn::Placement::pre_norm}) {
    const RankCollapseCurve& curve = curve_of(result, skip);
    EXPECT_EQ(curve.collapsed_at, 0) << nn::placement_name(skip);
    EXPECT_GT(curve.residual[last].median, 1000.0 * bare) << nn::placement_name(skip);
    EXPECT_LT(curve.cosine[last].median, 1.0);
  }
  EXPECT_GT(curve_of(result, nn::Placement::pre_norm).residual[last].median, 0.3);
}

TEST(LabRankCollapse, BadParametersAreRefused) {
  RankCollapseParams params;
  params.depth = 0;
  EXPECT_THROW(run_rank_collapse(params), Error);
  params = RankCollapseParams{};
  params.tokens = 1;
  EXPECT_THROW(run_rank_collapse(params), Error);
  params = RankCollapseParams{};
  params.placements = {};
  EXPECT_THROW(run_rank_collapse(params), Error);
  params = RankCollapseParams{};
  params.shape.d_model = 512;
  params.depth = 96;
  params.seeds = 64;
  try {
    validate(params);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("multiply-adds"), std::string::npos);
  }
}

}  // namespace
}  // namespace addnorm::lab
