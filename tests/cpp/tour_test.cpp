// The tour's numbers against the seed pages' printed values (and float64 references where the
// pages print nothing), and its text against the pages' NumPy output, line for line.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "addnorm/error.hpp"
#include "tour/activation_growth.hpp"
#include "tour/cat_layer_norm.hpp"
#include "tour/gradient_flow.hpp"
#include "tour/house_table.hpp"
#include "tour/normalization_steps.hpp"
#include "tour/numpy_format.hpp"
#include "tour/residual.hpp"
#include "tour/residual_blocks.hpp"
#include "tour/rms_vs_layer_norm.hpp"
#include "tour/tour.hpp"

namespace addnorm::tour {
namespace {

// Each value rounded the way the page rounds before printing equals the page's printed value.
void expect_rounded(const std::vector<double>& actual, const std::vector<double>& page,
                    int decimals) {
  ASSERT_EQ(actual.size(), page.size());
  for (size_t i = 0; i < page.size(); ++i) {
    EXPECT_EQ(numpy_round(actual[i], decimals), numpy_round(page[i], decimals))
        << "element " << i << " = " << actual[i];
  }
}

void expect_near_all(const std::vector<double>& actual, const std::vector<double>& expected,
                     double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
  }
}

// A float64 LayerNorm of one row, the reference for the float32 ops.
std::vector<double> layer_norm_reference(const std::vector<double>& x, double eps) {
  double mean = 0.0, variance = 0.0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) variance += (v - mean) * (v - mean);
  variance /= static_cast<double>(x.size());
  std::vector<double> y;
  for (double v : x) y.push_back((v - mean) / std::sqrt(variance + eps));
  return y;
}

TEST(TourResidual, AddsTheLayerOutputToTheInput) {
  const ResidualExample example = residual_example();
  ASSERT_EQ(example.with_residual.size(), 2u);
  EXPECT_FLOAT_EQ(static_cast<float>(example.with_residual[0]), 1.1f);
  EXPECT_FLOAT_EQ(static_cast<float>(example.with_residual[1]), 2.3f);
  EXPECT_NE(residual_text(example).find("x + f(x) = [1.0, 2.0] + [0.1, 0.3] = [1.1, 2.3]"),
            std::string::npos)
      << residual_text(example);
}

TEST(TourCat, StatisticsMatchThePage) {
  const CatLayerNorm cat = cat_layer_norm();
  EXPECT_EQ(cat.mean, 5.0);
  EXPECT_EQ(cat.variance, 5.0);
  EXPECT_EQ(python_round(cat.std_with_eps, 5), 2.23607);
  EXPECT_NEAR(cat.std_with_eps, std::sqrt(5.00001), 1e-6);
  EXPECT_NEAR(cat.rstd, 1.0 / std::sqrt(5.00001), 1e-7);
}

TEST(TourCat, NormalisedTokenMatchesThePage) {
  const CatLayerNorm cat = cat_layer_norm();
  const std::vector<double> page = {-1.3416, -0.4472, 0.4472, 1.3416};
  expect_rounded(cat.x_hat, page, 4);
  expect_rounded(cat.y, page, 4);
  expect_near_all(cat.y, layer_norm_reference(cat.token, 1e-5), 1e-6);
}

TEST(TourCat, VarianceOfYIsNotOneBecauseOfEps) {
  const CatLayerNorm cat = cat_layer_norm();
  EXPECT_EQ(python_round(cat.variance_of_y, 6), 0.999998);
  EXPECT_NEAR(cat.variance_of_y_expected, 5.0 / 5.00001, 1e-15);
  EXPECT_NEAR(cat.variance_of_y, cat.variance_of_y_expected, 1e-6);
  EXPECT_EQ(python_round(cat.mean_of_y, 6) + 0.0, 0.0);
}

TEST(TourCat, GammaAndBetaGiveBackTheToken) {
  const CatLayerNorm cat = cat_layer_norm();
  expect_rounded(cat.round_trip, {2.0, 4.0, 6.0, 8.0}, 4);
  expect_near_all(cat.round_trip, cat.token, 1e-5);
}

TEST(TourCat, PrintsThePagesLines) {
  EXPECT_EQ(cat_page_lines(cat_layer_norm()),
            "mean: 5.0  variance: 5.0  sqrt(var + eps): 2.23607\n"
            "x_hat: [-1.3416 -0.4472  0.4472  1.3416]\n"
            "y:     [-1.3416 -0.4472  0.4472  1.3416]\n"
            "mean of y: 0.0  variance of y: 0.999998\n"
            "gamma = sqrt(var + eps), beta = mean gives back: [2. 4. 6. 8.]\n");
}

TEST(TourHouse, MatricesMatchThePage) {
  const HouseTable house = house_table();
  expect_rounded(house.batch_norm,
                 {-1.1112, -1.3363, -1.3587, -0.2020, 0.2673, 0.3397, 1.3132, 1.0690, 1.0190}, 4);
  expect_rounded(house.layer_norm,
                 {1.4135, -0.7455, -0.6680, 1.4131, -0.7551, -0.6580, 1.4134, -0.7481, -0.6653}, 4);
  expect_rounded(house.batch_norm_column_stds, {1.0, 1.0, 1.0}, 4);
  expect_rounded(house.layer_norm_row_stds, {1.0, 1.0, 1.0}, 4);
  expect_near_all(house.batch_norm_column_means, {0.0, 0.0, 0.0}, 1e-6);
  expect_near_all(house.layer_norm_row_means, {0.0, 0.0, 0.0}, 1e-6);
}

TEST(TourHouse, BatchStatisticsAreTheColumnsPopulationStatistics) {
  const HouseTable house = house_table();
  // Column 0 is 1200, 1500, 2000: mean 4700 / 3, population std sqrt(980000 / 9).
  EXPECT_NEAR(house.column_mean[0], 4700.0 / 3.0, 1e-3);
  EXPECT_NEAR(house.column_std[0], std::sqrt(980000.0 / 9.0), 1e-3);
  EXPECT_NEAR(house.column_mean[1], 8.5 / 3.0, 1e-6);
  EXPECT_NEAR(house.column_mean[2], 65.0, 1e-5);
}

TEST(TourHouse, PrintsThePagesLines) {
  EXPECT_EQ(house_page_lines(house_table()),
            "batch norm (per column):\n"
            " [[-1.1112 -1.3363 -1.3587]\n"
            " [-0.202   0.2673  0.3397]\n"
            " [ 1.3132  1.069   1.019 ]]\n"
            "column means: [0. 0. 0.]  column stds: [1. 1. 1.]\n"
            "layer norm (per row):\n"
            " [[ 1.4135 -0.7455 -0.668 ]\n"
            " [ 1.4131 -0.7551 -0.658 ]\n"
            " [ 1.4134 -0.7481 -0.6653]]\n"
            "row means: [0. 0. 0.]  row stds: [1. 1. 1.]\n");
}

TEST(TourGradient, SizesMatchThePage) {
  const GradientFlow flow = gradient_flow();
  ASSERT_EQ(flow.runs.size(), 2u);
  EXPECT_EQ(flow.runs[0].layers, 6);
  EXPECT_EQ(flow.runs[1].layers, 24);
  EXPECT_EQ(scientific(flow.runs[0].without_residual, 2), "8.62e-04");
  EXPECT_EQ(fixed(flow.runs[0].with_residual, 2), "3.31");
  EXPECT_EQ(scientific(flow.runs[1].without_residual, 2), "6.86e-14");
  EXPECT_EQ(fixed(flow.runs[1].with_residual, 2), "2.79");
  // NumPy's float64 run gives 0.0008618550018821013, 3.310074832928725, 6.861952342973359e-14
  // and 2.7909856251034793; only the summation order differs here.
  EXPECT_NEAR(flow.runs[0].without_residual, 0.0008618550018821013, 1e-15);
  EXPECT_NEAR(flow.runs[0].with_residual, 3.310074832928725, 1e-12);
  EXPECT_NEAR(flow.runs[1].without_residual, 6.861952342973359e-14, 1e-24);
  EXPECT_NEAR(flow.runs[1].with_residual, 2.7909856251034793, 1e-12);
  EXPECT_EQ(fixed(flow.top_norm, 2), "2.83");
}

TEST(TourGradient, PrintsThePagesLines) {
  EXPECT_EQ(gradient_page_lines(gradient_flow()),
            "6 layers: gradient size without residual 8.62e-04, with residual 3.31\n"
            "24 layers: gradient size without residual 6.86e-14, with residual 2.79\n");
}

TEST(TourGrowth, GrowsWithoutNormAndStaysAtOneWithLayerNorm) {
  const ActivationGrowth growth = activation_growth();
  ASSERT_EQ(growth.std_without_norm.size(), static_cast<size_t>(growth.layers) + 1);
  ASSERT_EQ(growth.std_with_layer_norm.size(), static_cast<size_t>(growth.layers) + 1);
  // Exponential growth: on average at least x1.3 per layer, and past 100 by layer 15.
  EXPECT_GT(growth.std_without_norm.back() / growth.std_without_norm.front(),
            std::pow(1.3, growth.layers));
  for (int layer = 1; layer <= growth.layers; ++layer) {
    EXPECT_GT(growth.std_without_norm[layer], growth.std_without_norm[layer - 1]) << layer;
    EXPECT_LT(std::fabs(growth.std_with_layer_norm[layer] - 1.0), 1e-3) << layer;
  }
  EXPECT_GT(growth.first_layer_past_100, 10);
  EXPECT_LE(growth.first_layer_past_100, 15);
  EXPECT_GT(growth.std_without_norm[growth.first_layer_past_100], 100.0);
  EXPECT_LE(growth.std_without_norm[growth.first_layer_past_100 - 1], 100.0);
}

TEST(TourGrowth, MatchesTheSameStackInNumPy) {
  // The same stack in NumPy (default_rng(42): input (8, 64) ~ N(0, 1), then one (64, 64)
  // W ~ N(0, 1.4 / 8) per layer; float64 products stored as float32) gives these stds.
  const ActivationGrowth growth = activation_growth();
  EXPECT_NEAR(growth.std_without_norm[1], 1.374, 1e-3);
  EXPECT_NEAR(growth.std_without_norm[10], 29.648, 1e-3 * 29.648);
  EXPECT_NEAR(growth.std_without_norm[14], 111.126, 1e-3 * 111.126);
  EXPECT_NEAR(growth.std_without_norm[20], 705.003, 1e-3 * 705.003);
  EXPECT_NEAR(growth.std_with_layer_norm[20], 0.9999973, 2e-6);
}

TEST(TourSteps, ExactValues) {
  const NormalizationSteps steps = normalization_steps();
  EXPECT_EQ(steps.mean, 1.0);
  EXPECT_EQ(steps.variance, 6.5);
  EXPECT_NEAR(steps.std, std::sqrt(6.5), 1e-6);
  EXPECT_EQ(fixed(steps.std, 4), "2.5495");
  expect_rounded(steps.normalized, {0.3922, -1.5689, 0.0, 1.1767}, 4);
  expect_rounded(steps.output, {1.2845, -2.6379, 0.5, 2.8534}, 4);
  const std::vector<double> reference = layer_norm_reference(steps.token, 0.0);
  std::vector<double> reference_output, reference_output_eps;
  const std::vector<double> with_eps = layer_norm_reference(steps.token, 1e-5);
  for (size_t i = 0; i < reference.size(); ++i) {
    reference_output.push_back(2.0 * reference[i] + 0.5);
    reference_output_eps.push_back(2.0 * with_eps[i] + 0.5);
  }
  expect_near_all(steps.normalized, reference, 1e-6);
  expect_near_all(steps.output, reference_output, 1e-6);
  expect_near_all(steps.output_default_eps, reference_output_eps, 1e-6);
  // eps moves the last output by about 1.8e-6: visible at 6 decimals, not at 4.
  EXPECT_GT(steps.output[3] - steps.output_default_eps[3], 1e-6);
}

TEST(TourSteps, ThePagesRoundedArithmetic) {
  const NormalizationSteps steps = normalization_steps();
  EXPECT_EQ(steps.page_std, 2.55);
  EXPECT_EQ(steps.page_normalized, (std::vector<double>{0.39, -1.57, 0.0, 1.18}));
  EXPECT_EQ(steps.page_output, (std::vector<double>{1.28, -2.64, 0.5, 2.86}));
  EXPECT_EQ(prose_list(steps.page_normalized, 2), "[0.39, -1.57, 0, 1.18]");
  EXPECT_EQ(prose_list(steps.page_output, 2), "[1.28, -2.64, 0.5, 2.86]");
  // The exact last output rounds to 2.85, not the page's 2.86.
  EXPECT_EQ(prose_number(steps.output[3], 2), "2.85");
  EXPECT_NE(steps_text(steps).find("2 * 1.18 + 0.5 = 2.86 while the exact value is 2.853"),
            std::string::npos)
      << steps_text(steps);
}

TEST(TourRmsNorm, RescalesWithoutCentring) {
  const RmsVsLayerNorm comparison = rms_vs_layer_norm();
  EXPECT_EQ(comparison.eps, 1e-6);
  ASSERT_EQ(comparison.tokens.size(), 2u);
  const RmsVsLayerNormToken& cat = comparison.tokens[0];
  EXPECT_NEAR(cat.rms, std::sqrt(30.0 + 1e-6), 1e-5);
  std::vector<double> expected;
  for (double v : cat.token) expected.push_back(v / std::sqrt(30.0 + 1e-6));
  expect_near_all(cat.rms_norm, expected, 1e-6);
  EXPECT_NEAR(cat.rms_norm_mean, 5.0 / std::sqrt(30.0), 1e-6);  // 0.9129: the offset survives
  expect_near_all(cat.layer_norm, layer_norm_reference(cat.token, 1e-6), 1e-6);
  EXPECT_NEAR(cat.layer_norm_mean, 0.0, 1e-6);
  const RmsVsLayerNormToken& token = comparison.tokens[1];
  EXPECT_NEAR(token.rms, std::sqrt(7.5 + 1e-6), 1e-5);
  EXPECT_NEAR(token.rms_norm[1], -3.0 / std::sqrt(7.5 + 1e-6), 1e-6);
}

TEST(TourBlocks, PreNormAndPostNormMatchAFloat64Reference) {
  constexpr int tokens = ResidualBlocks::kTokens, dim = ResidualBlocks::kDim;
  const ResidualBlocks blocks = residual_blocks();
  ASSERT_EQ(blocks.dropout_p, 0.0);
  std::vector<double> pre_out, post_out;
  for (int row = 0; row < tokens; ++row) {
    const std::vector<double> x(blocks.x.begin() + row * dim, blocks.x.begin() + (row + 1) * dim);
    const std::vector<double> normed = layer_norm_reference(x, blocks.eps);
    std::vector<double> post_sum(x);
    for (int out = 0; out < dim; ++out) {
      double f_normed = 0.0, f_x = 0.0;
      for (int in = 0; in < dim; ++in) {
        f_normed += normed[in] * blocks.weight[in * dim + out];
        f_x += x[in] * blocks.weight[in * dim + out];
      }
      pre_out.push_back(x[out] + f_normed);  // x + F(LN(x))
      post_sum[out] += f_x;                  // x + F(x)
    }
    for (double v : layer_norm_reference(post_sum, blocks.eps)) post_out.push_back(v);
  }
  expect_near_all(blocks.pre_out, pre_out, 1e-5);
  expect_near_all(blocks.post_out, post_out, 1e-5);
  // The fused op's second output is LN of the first.
  for (int row = 0; row < tokens; ++row) {
    const std::vector<double> h(pre_out.begin() + row * dim, pre_out.begin() + (row + 1) * dim);
    const std::vector<double> next(blocks.pre_next_input.begin() + row * dim,
                                   blocks.pre_next_input.begin() + (row + 1) * dim);
    expect_near_all(next, layer_norm_reference(h, blocks.eps), 1e-5);
  }
  // Post-norm rows have std 1; pre-norm rows keep x's larger scale.
  for (int row = 0; row < tokens; ++row) {
    EXPECT_NEAR(blocks.post_out_row_stds[row], 1.0, 1e-4);
    EXPECT_GT(blocks.pre_out_row_stds[row], 1.2);
  }
}

TEST(TourSections, NamesInPageOrder) {
  EXPECT_EQ(tour_section_names(), "residual, cat, house, gradient, growth, steps, block, rmsnorm");
  EXPECT_STREQ(find_tour_section("house").name, "house");
}

TEST(TourSections, UnknownNameListsTheValidOnes) {
  try {
    find_tour_section("kitten");
    FAIL() << "expected addnorm::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("\"kitten\""), std::string::npos) << message;
    EXPECT_NE(message.find(tour_section_names()), std::string::npos) << message;
  }
}

TEST(TourSections, TextAndJsonCoverEverySection) {
  const std::string text = tour_text();
  const nlohmann::json json = tour_json();
  size_t previous = 0;
  for (const TourSection& section : tour_sections()) {
    const size_t header = text.find(std::string(" ") + section.name + ": " + section.title);
    ASSERT_NE(header, std::string::npos) << section.name;
    EXPECT_GT(header, previous) << section.name << " is out of order";
    previous = header;
    ASSERT_TRUE(json.contains(section.name)) << section.name;
    EXPECT_EQ(json[section.name]["summary"], section.summary);
  }
  EXPECT_EQ(json.size(), tour_sections().size());
  // The JSON carries the same numbers as the text.
  EXPECT_EQ(json["cat"]["variance"].get<double>(), 5.0);
  EXPECT_EQ(json["gradient"]["runs"][1]["layers"].get<int>(), 24);
  EXPECT_EQ(scientific(json["gradient"]["runs"][1]["without_residual"].get<double>(), 2),
            "6.86e-14");
  EXPECT_EQ(json["steps"]["page_output"][3].get<double>(), 2.86);
}

}  // namespace
}  // namespace addnorm::tour
