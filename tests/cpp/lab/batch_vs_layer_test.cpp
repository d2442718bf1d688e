// The batch-vs-layer experiment: the page's house table, padding's effect on the batch mean
// (zeros scale it by real / padded tokens exactly), and layer norm's independence from the batch
// (exactly 0 in every comparison) against batch norm's dependence on it.
#include <gtest/gtest.h>

#include <cmath>

#include "addnorm/error.hpp"
#include "addnorm/lab/batch_vs_layer.hpp"

namespace addnorm::lab {
namespace {

TEST(LabBatchVsLayer, HouseTableAsThePagePrintsIt) {
  const BatchVsLayerResult result = run_batch_vs_layer({});
  const TableNorms& t = result.table;
  EXPECT_NEAR(t.batch_norm[0], -1.1112, 5e-5);
  EXPECT_NEAR(t.batch_norm[3], -0.2020, 5e-5);
  EXPECT_NEAR(t.batch_norm[6], 1.3132, 5e-5);
  EXPECT_NEAR(t.layer_norm[0], 1.4135, 5e-5);
  EXPECT_NEAR(t.layer_norm[1], -0.7455, 5e-5);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(t.batch_norm_column_stds[i], 1.0, 1e-6);
    EXPECT_NEAR(t.layer_norm_row_stds[i], 1.0, 1e-6);
  }
  EXPECT_NE(t.batch_norm_row0_alone_error.find("more than 1"), std::string::npos)
      << t.batch_norm_row0_alone_error;
}

TEST(LabBatchVsLayer, PaddingScalesTheBatchMeanByTheRealFraction) {
  const BatchVsLayerResult result = run_batch_vs_layer({});
  const PaddingLeak& p = result.padding;
  EXPECT_EQ(p.real_tokens, 5 + 3 + 8 + 2 + 6 + 4 + 7 + 1);
  EXPECT_EQ(p.padded_tokens, 8 * 8);
  const double fraction = static_cast<double>(p.real_tokens) / p.padded_tokens;
  for (size_t c = 0; c < p.mean_real_only.size(); ++c) {
    EXPECT_NEAR(p.mean_with_padding[c], p.mean_real_only[c] * fraction,
                1e-5 * (1.0 + std::fabs(p.mean_real_only[c])));
    // The padded variance is the real one diluted plus the spread between the real mean and 0:
    // E[x^2] over all positions = fraction * (var_real + mean_real^2).
    const double var = fraction * (p.std_real_only[c] * p.std_real_only[c] +
                                   p.mean_real_only[c] * p.mean_real_only[c]) -
                       p.mean_with_padding[c] * p.mean_with_padding[c];
    EXPECT_NEAR(p.std_with_padding[c] * p.std_with_padding[c], var, 1e-4 * (1.0 + var));
  }
  EXPECT_GT(p.sentence0_output_shift, 0.1);
}

TEST(LabBatchVsLayer, LayerNormNeverDependsOnTheBatchAndBatchNormDoes) {
  const BatchVsLayerResult result = run_batch_vs_layer({});
  ASSERT_EQ(result.batch_sizes.size(), 4u);
  EXPECT_EQ(result.batch_sizes[0].batch_norm_padded, 0.0);  // sentence 0 alone is the reference
  for (size_t i = 1; i < result.batch_sizes.size(); ++i) {
    EXPECT_GT(result.batch_sizes[i].batch_norm_padded, 0.1);
    EXPECT_GT(result.batch_sizes[i].batch_norm_real, 0.1);
  }
  ASSERT_EQ(result.mates.size(), 7u);
  for (const BatchEffect& e : result.mates) EXPECT_GT(e.batch_norm_real, 0.1) << e.mate;
  for (const auto* list : {&result.batch_sizes, &result.mates}) {
    for (const BatchEffect& e : *list) EXPECT_EQ(e.layer_norm, 0.0);
  }
  EXPECT_GT(result.modes.batch_norm_in_batch, 0.01);
  EXPECT_GT(result.modes.batch_norm_alone, 0.01);
  EXPECT_EQ(result.modes.layer_norm, 0.0);
}

TEST(LabBatchVsLayer, RefusesBadParameters) {
  BatchVsLayerParams p;
  p.lengths = {1, 3};
  EXPECT_THROW(run_batch_vs_layer(p), Error);
  p = {};
  p.batch_sizes = {9};
  EXPECT_THROW(run_batch_vs_layer(p), Error);
  p = {};
  p.table = {1, 2, 3, 4, 5};
  EXPECT_THROW(run_batch_vs_layer(p), Error);
  p = {};
  p.width = -2;
  EXPECT_THROW(run_batch_vs_layer(p), Error);
  p = {};
  p.momentum = 1.5;
  EXPECT_THROW(run_batch_vs_layer(p), Error);
  p = {};
  p.width = 32;
  p.lengths = std::vector<int>(32, 64);
  EXPECT_THROW(run_batch_vs_layer(p), Error);
}

}  // namespace
}  // namespace addnorm::lab
