// LayerNorm against float64: shape sweeps, adversarial rows, NaN isolation, and gradients checked
// against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "addnorm/ops.hpp"
#include "ops/reference/layer_norm.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::float_ulp;
using testing::random_floats;
using testing::widen;
using testing::within_ulps;

// The float64 definition, written independently of the library: two passes per row.
struct Expected {
  std::vector<double> y, mean, rstd;
};
Expected layer_norm_float64(const std::vector<float>& x, const std::vector<float>* gamma,
                            const std::vector<float>* beta, int64_t dim, double eps) {
  const int64_t rows = static_cast<int64_t>(x.size()) / dim;
  Expected out{std::vector<double>(x.size()), {}, {}};
  for (int64_t row = 0; row < rows; ++row) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += x[row * dim + i];
    mean /= double(dim);
    for (int64_t i = 0; i < dim; ++i) var += std::pow(x[row * dim + i] - mean, 2);
    var /= double(dim);
    const double rstd = 1 / std::sqrt(var + eps);
    for (int64_t i = 0; i < dim; ++i) {
      double y = (x[row * dim + i] - mean) * rstd;
      if (gamma) y *= (*gamma)[i];
      if (beta) y += (*beta)[i];
      out.y[row * dim + i] = y;
    }
    out.mean.push_back(mean);
    out.rstd.push_back(rstd);
  }
  return out;
}

struct Result {
  std::vector<float> y, mean, rstd;
};
Result run_layer_norm(const std::vector<float>& x, const Shape& shape, const Shape& normalized,
                      const std::vector<float>* gamma, const std::vector<float>* beta,
                      float eps = 1e-5f) {
  const int64_t rows = shape.numel() / normalized.numel();
  Result out{std::vector<float>(x.size()), std::vector<float>(rows), std::vector<float>(rows)};
  NormOptions options;
  if (gamma) options.gamma = ConstView{gamma->data(), normalized};
  if (beta) options.beta = ConstView{beta->data(), normalized};
  options.eps = eps;
  layer_norm({x.data(), shape}, normalized, {out.y.data(), shape}, options,
             NormStats{{out.mean.data(), Shape{rows}}, {out.rstd.data(), Shape{rows}}});
  return out;
}

// Shapes of rank 1 to 4, normalising over one or two trailing dims, D from 1 to 8192.
TEST(LayerNorm, MatchesFloat64OnShapeSweep) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{1}, {1}},
      {{7}, {7}},
      {{3, 1}, {1}},
      {{5, 2}, {2}},
      {{4, 64}, {64}},
      {{3, 65}, {65}},
      {{2, 3, 128}, {128}},
      {{2, 511}, {511}},
      {{2, 2, 768}, {768}},
      {{3, 1024}, {1024}},
      {{2, 4097}, {4097}},
      {{1, 8192}, {8192}},
      {{2, 3, 4, 5}, {4, 5}},
      {{2, 2, 3, 7}, {2, 3, 7}},
      {{6, 8}, {6, 8}},
  };
  uint32_t seed = 1;
  for (const auto& [shape, normalized] : cases) {
    const int64_t dim = normalized.numel();
    const auto x = random_floats(static_cast<size_t>(shape.numel()), seed++, -3.0f, 5.0f);
    const auto gamma = random_floats(static_cast<size_t>(dim), seed++, 0.5f, 2.0f);
    const auto beta = random_floats(static_cast<size_t>(dim), seed++, -1.0f, 1.0f);
    for (int variant = 0; variant < 4; ++variant) {
      const auto* g = (variant & 1) ? &gamma : nullptr;
      const auto* b = (variant & 2) ? &beta : nullptr;
      const Result got = run_layer_norm(x, shape, normalized, g, b);
      const Expected want = layer_norm_float64(x, g, b, dim, 1e-5);
      SCOPED_TRACE("shape " + shape.to_string() + " normalized " + normalized.to_string() +
                   " variant " + std::to_string(variant));
      // Near-zero outputs come from cancelling terms of size |x_hat * gamma| + |beta| ~ 10.
      EXPECT_TRUE(within_ulps(got.y, want.y, 2, 10.0));
      EXPECT_TRUE(within_ulps(got.mean, want.mean, 1, 5.0));
      EXPECT_TRUE(within_ulps(got.rstd, want.rstd, 1));
    }
  }
}

// Rows whose mean is 1e4 to 1e6 times their spread: the textbook E[x^2] - E[x]^2 returns 0 or a
// negative variance here; the two-pass definition stays exact.
TEST(LayerNorm, LargeMeanSmallSpreadRowsStayExact) {
  for (const double mean : {1e4, 1e5, 1e6}) {
    const int64_t dim = 1000;
    std::vector<float> x(dim);
    const auto noise = random_floats(dim, 7, -1.0f, 1.0f);
    for (int64_t i = 0; i < dim; ++i) x[i] = static_cast<float>(mean + noise[i] * (mean * 1e-6));
    const Result got = run_layer_norm(x, {dim}, {dim}, nullptr, nullptr, 0.0f);
    const Expected want = layer_norm_float64(x, nullptr, nullptr, dim, 0.0);
    SCOPED_TRACE(mean);
    EXPECT_TRUE(within_ulps(got.y, want.y, 2, 2.0));
    // The textbook formula really does fail on this row (so the row is a real test).
    float sum = 0, squares = 0;
    for (float v : x) {
      sum += v;
      squares += v * v;
    }
    const float textbook_var = squares / dim - (sum / dim) * (sum / dim);
    const double true_var = std::pow(1 / want.rstd[0], 2);
    EXPECT_GT(std::fabs(textbook_var - true_var), 10 * true_var);
  }
}

TEST(LayerNorm, ConstantRowGivesExactlyBeta) {
  const int64_t dim = 37;
  const std::vector<float> x(2 * dim, 123.456f);
  const auto gamma = random_floats(dim, 3, 0.5f, 2.0f);
  const auto beta = random_floats(dim, 4);
  for (float eps : {1e-5f, 0.0f}) {
    const Result got = run_layer_norm(x, {2, dim}, {dim}, &gamma, &beta, eps);
    for (int64_t i = 0; i < 2 * dim; ++i) EXPECT_EQ(got.y[i], beta[i % dim]) << "eps " << eps;
  }
}

TEST(LayerNorm, DimensionOneGivesBeta) {
  const std::vector<float> x = {3.0f, -1e30f, 0.0f};
  const std::vector<float> beta = {0.25f};
  const Result got = run_layer_norm(x, {3, 1}, {1}, nullptr, &beta);
  for (float y : got.y) EXPECT_EQ(y, 0.25f);
}

// Tiny (denormal) and huge (near FLT_MAX) rows: the sum of squares must not overflow or flush.
TEST(LayerNorm, ExtremeMagnitudesStayAccurate) {
  for (const float magnitude : {1e-40f, 1e-30f, 1e30f, 3e38f}) {
    const int64_t dim = 513;
    auto x = random_floats(dim, 11, -1.0f, 1.0f);
    for (float& v : x) v *= magnitude;
    x[0] = magnitude;  // the largest element at full magnitude
    for (float eps : {0.0f, 1e-5f}) {
      const Result got = run_layer_norm(x, {dim}, {dim}, nullptr, nullptr, eps);
      const Expected want = layer_norm_float64(x, nullptr, nullptr, dim, eps);
      SCOPED_TRACE(std::to_string(magnitude) + " eps " + std::to_string(eps));
      EXPECT_TRUE(within_ulps(got.y, want.y, 2, 2.0));
      for (float y : got.y) EXPECT_TRUE(std::isfinite(y));
    }
  }
}

TEST(LayerNorm, NonFiniteValuePoisonsOnlyItsRow) {
  const int64_t dim = 16;
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    auto x = random_floats(3 * dim, 5);
    x[dim + 4] = bad;
    const Result got = run_layer_norm(x, {3, dim}, {dim}, nullptr, nullptr);
    for (int64_t i = 0; i < dim; ++i) EXPECT_TRUE(std::isnan(got.y[dim + i]));
    EXPECT_TRUE(std::isnan(got.mean[1]) && std::isnan(got.rstd[1]));
    auto healthy = x;
    healthy[dim + 4] = 0.0f;
    const Result reference = run_layer_norm(healthy, {3, dim}, {dim}, nullptr, nullptr);
    for (int64_t i = 0; i < dim; ++i) {
      EXPECT_EQ(got.y[i], reference.y[i]);
      EXPECT_EQ(got.y[2 * dim + i], reference.y[2 * dim + i]);
    }
  }
}

TEST(LayerNorm, InPlaceEqualsOutOfPlace) {
  auto x = random_floats(4 * 33, 9);
  const Result expected = run_layer_norm(x, {4, 33}, {33}, nullptr, nullptr);
  layer_norm({x.data(), {4, 33}}, {33}, {x.data(), {4, 33}});
  EXPECT_EQ(x, expected.y);
}

// --- backward -------------------------------------------------------------------------------

// The float64 reference backward against central finite differences of
// loss(x, gamma, beta) = sum(dy * layer_norm(x)).
TEST(LayerNormBackward, ReferenceMatchesFiniteDifferences) {
  for (const int64_t dim : {1, 2, 5, 16}) {
    const int64_t rows = 3;
    const auto x = widen(random_floats(rows * dim, 21, -2.0f, 2.0f));
    const auto gamma = widen(random_floats(dim, 22, 0.5f, 1.5f));
    const auto beta = widen(random_floats(dim, 23));
    const auto dy = widen(random_floats(rows * dim, 24));
    const double eps = 1e-3;
    auto forward = [&](const std::vector<double>& xs, const std::vector<double>& g,
                       const std::vector<double>& b) {
      std::vector<double> y(xs.size());
      reference::layer_norm_forward<double>(xs.data(), g.data(), b.data(), y.data(), nullptr,
                                            nullptr, rows, dim, eps);
      return testing::dot(y, dy);
    };
    std::vector<double> dx(x.size()), dgamma(dim), dbeta(dim);
    reference::layer_norm_backward<double>(dy.data(), x.data(), gamma.data(), nullptr, nullptr,
                                           dx.data(), dgamma.data(), dbeta.data(), rows, dim, eps);
    SCOPED_TRACE(dim);
    EXPECT_TRUE(testing::matches_finite_differences(
        [&](const std::vector<double>& p) { return forward(p, gamma, beta); }, x, dx));
    EXPECT_TRUE(testing::matches_finite_differences(
        [&](const std::vector<double>& p) { return forward(x, p, beta); }, gamma, dgamma));
    EXPECT_TRUE(testing::matches_finite_differences(
        [&](const std::vector<double>& p) { return forward(x, gamma, p); }, beta, dbeta));
  }
}

// The float32 backward against the float64 one on the same inputs, with and without saved stats.
TEST(LayerNormBackward, MatchesFloat64) {
  for (const int64_t dim : {1, 3, 64, 768, 4097}) {
    const int64_t rows = 5;
    const auto x = random_floats(rows * dim, 31, -2.0f, 3.0f);
    const auto dy = random_floats(rows * dim, 32);
    const auto gamma = random_floats(dim, 33, 0.5f, 1.5f);
    const auto beta = random_floats(dim, 34);
    const Shape shape{rows, dim};
    const Shape normalized{dim};
    std::vector<double> want_dx(x.size()), want_dgamma(dim), want_dbeta(dim);
    const auto x64 = widen(x), dy64 = widen(dy), gamma64 = widen(gamma);
    reference::layer_norm_backward<double>(dy64.data(), x64.data(), gamma64.data(), nullptr,
                                           nullptr, want_dx.data(), want_dgamma.data(),
                                           want_dbeta.data(), rows, dim, 1e-5);
    const Result stats = run_layer_norm(x, shape, normalized, &gamma, &beta);
    for (const bool use_saved : {false, true}) {
      std::vector<float> dx(x.size()), dgamma(dim), dbeta(dim);
      NormOptions options{.gamma = ConstView{gamma.data(), normalized},
                          .beta = ConstView{beta.data(), normalized}};
      std::optional<SavedStats> saved;
      if (use_saved) {
        saved = SavedStats{{stats.mean.data(), Shape{rows}}, {stats.rstd.data(), Shape{rows}}};
      }
      layer_norm_backward({dy.data(), shape}, {x.data(), shape}, normalized,
                          {{dx.data(), shape},
                           MutableView{dgamma.data(), normalized},
                           MutableView{dbeta.data(), normalized}},
                          options, saved);
      SCOPED_TRACE("dim " + std::to_string(dim) + (use_saved ? " saved" : " recomputed"));
      // dx cancels terms of size rstd * |g| * (1 + |x_hat|); dgamma sums `rows` terms.
      EXPECT_TRUE(within_ulps(dx, want_dx, use_saved ? 4 : 2, 8.0));
      EXPECT_TRUE(within_ulps(dgamma, want_dgamma, 2, 4.0));
      EXPECT_TRUE(within_ulps(dbeta, want_dbeta, 2, 4.0));
    }
  }
}

// A row with mean 1e6 and spread 1: the backward recentres exactly even from saved float stats.
TEST(LayerNormBackward, LargeMeanRowsStayExact) {
  const int64_t dim = 256;
  auto x = random_floats(dim, 41, -1.0f, 1.0f);
  for (float& v : x) v += 1e6f;
  const auto dy = random_floats(dim, 42);
  std::vector<double> want(dim);
  const auto x64 = widen(x), dy64 = widen(dy);
  reference::layer_norm_backward<double>(dy64.data(), x64.data(), nullptr, nullptr, nullptr,
                                         want.data(), nullptr, nullptr, 1, dim, 1e-5);
  const Result stats = run_layer_norm(x, {dim}, {dim}, nullptr, nullptr);
  std::vector<float> dx(dim);
  layer_norm_backward({dy.data(), {dim}}, {x.data(), {dim}}, {dim},
                      {{dx.data(), {dim}}, std::nullopt, std::nullopt}, {},
                      SavedStats{{stats.mean.data(), {1}}, {stats.rstd.data(), {1}}});
  EXPECT_TRUE(within_ulps(dx, want, 4, 8.0));
}

TEST(LayerNorm, AxisFormMatchesNormalizedShape) {
  EXPECT_EQ(normalized_shape_from_axis({2, 3, 4}, -1), (Shape{4}));
  EXPECT_EQ(normalized_shape_from_axis({2, 3, 4}, 1), (Shape{3, 4}));
  EXPECT_EQ(normalized_shape_from_axis({2, 3, 4}, -3), (Shape{2, 3, 4}));
  EXPECT_THROW(normalized_shape_from_axis({2, 3, 4}, 3), Error);
  EXPECT_THROW(normalized_shape_from_axis({2, 3, 4}, -4), Error);
}

}  // namespace
}  // namespace addnorm
