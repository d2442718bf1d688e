// RMSNorm against float64: shape sweep, zero-centred gamma, extreme rows, and gradients checked
// against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "addnorm/ops.hpp"
#include "ops/reference/rms_norm.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;
using testing::widen;
using testing::within_ulps;

// The float64 definition, independent of the library: y = x / sqrt(mean(x^2) + eps) * scale.
std::vector<double> rms_norm_float64(const std::vector<float>& x, const std::vector<float>* gamma,
                                     bool zero_centred, int64_t dim, double eps) {
  std::vector<double> y(x.size());
  for (size_t row = 0; row < x.size() / dim; ++row) {
    double squares = 0;
    for (int64_t i = 0; i < dim; ++i) squares += double(x[row * dim + i]) * x[row * dim + i];
    const double rms = std::sqrt(squares / double(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double scale = gamma ? (zero_centred ? 1 + (*gamma)[i] : (*gamma)[i]) : 1;
      y[row * dim + i] = x[row * dim + i] / rms * scale;
    }
  }
  return y;
}

std::vector<float> run_rms_norm(const std::vector<float>& x, const Shape& shape,
                                const Shape& normalized, const std::vector<float>* gamma,
                                bool zero_centred, float eps = 1e-6f) {
  std::vector<float> y(x.size());
  NormOptions options;
  if (gamma) options.gamma = ConstView{gamma->data(), normalized};
  options.zero_centered_gamma = zero_centred;
  options.eps = eps;
  rms_norm({x.data(), shape}, normalized, {y.data(), shape}, options);
  return y;
}

TEST(RmsNorm, MatchesFloat64OnShapeSweep) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{1}, {1}},        {{5, 3}, {3}},       {{4, 64}, {64}},     {{2, 3, 129}, {129}},
      {{2, 768}, {768}}, {{2, 4097}, {4097}}, {{1, 8192}, {8192}}, {{2, 3, 4, 5}, {4, 5}},
  };
  uint32_t seed = 100;
  for (const auto& [shape, normalized] : cases) {
    const int64_t dim = normalized.numel();
    const auto x = random_floats(static_cast<size_t>(shape.numel()), seed++, -3.0f, 5.0f);
    const auto gamma = random_floats(static_cast<size_t>(dim), seed++, -0.5f, 2.0f);
    for (int variant = 0; variant < 3; ++variant) {
      const auto* g = variant > 0 ? &gamma : nullptr;
      const bool zero_centred = variant == 2;
      SCOPED_TRACE(shape.to_string() + " variant " + std::to_string(variant));
      EXPECT_TRUE(within_ulps(run_rms_norm(x, shape, normalized, g, zero_centred),
                              rms_norm_float64(x, g, zero_centred, dim, 1e-6), 2));
    }
  }
}

TEST(RmsNorm, ExtremeMagnitudesAndZeroRows) {
  for (const float magnitude : {1e-40f, 1e-20f, 1e20f, 3e38f}) {
    auto x = random_floats(300, 7);
    for (float& v : x) v *= magnitude;
    x[0] = magnitude;
    SCOPED_TRACE(magnitude);
    EXPECT_TRUE(within_ulps(run_rms_norm(x, {300}, {300}, nullptr, false, 0.0f),
                            rms_norm_float64(x, nullptr, false, 300, 0.0), 2));
  }
  // An all-zero row stays zero, even with eps = 0 (no 0 * inf).
  const std::vector<float> zeros(8, 0.0f);
  for (float y : run_rms_norm(zeros, {8}, {8}, nullptr, false, 0.0f)) EXPECT_EQ(y, 0.0f);
}

TEST(RmsNorm, NonFiniteValuePoisonsOnlyItsRow) {
  auto x = random_floats(3 * 10, 8);
  x[15] = std::numeric_limits<float>::infinity();
  const auto y = run_rms_norm(x, {3, 10}, {10}, nullptr, false);
  const auto want = rms_norm_float64(x, nullptr, false, 10, 1e-6);
  for (int i = 0; i < 30; ++i) {
    if (i >= 10 && i < 20) {
      EXPECT_TRUE(std::isnan(y[i]));
    } else {
      EXPECT_NEAR(y[i], want[i], 1e-6);
    }
  }
}

TEST(RmsNormBackward, ReferenceMatchesFiniteDifferences) {
  for (const bool zero_centred : {false, true}) {
    const int64_t rows = 3, dim = 7;
    const auto x = widen(random_floats(rows * dim, 51, -2.0f, 2.0f));
    const auto gamma = widen(random_floats(dim, 52, -0.5f, 1.5f));
    const auto dy = widen(random_floats(rows * dim, 53));
    const double eps = 1e-3;
    auto loss = [&](const std::vector<double>& xs, const std::vector<double>& g) {
      std::vector<double> y(xs.size());
      reference::rms_norm_forward<double>(xs.data(), g.data(), zero_centred, y.data(), nullptr,
                                          rows, dim, eps);
      return testing::dot(y, dy);
    };
    std::vector<double> dx(x.size()), dgamma(dim);
    reference::rms_norm_backward<double>(dy.data(), x.data(), gamma.data(), zero_centred, nullptr,
                                         nullptr, dx.data(), dgamma.data(), rows, dim, eps);
    EXPECT_TRUE(testing::matches_finite_differences(
        [&](const std::vector<double>& p) { return loss(p, gamma); }, x, dx));
    EXPECT_TRUE(testing::matches_finite_differences(
        [&](const std::vector<double>& p) { return loss(x, p); }, gamma, dgamma));
  }
}

TEST(RmsNormBackward, MatchesFloat64WithAndWithoutSavedRstd) {
  for (const int64_t dim : {1, 5, 128, 4097}) {
    const int64_t rows = 4;
    const Shape shape{rows, dim}, normalized{dim};
    const auto x = random_floats(rows * dim, 61, -2.0f, 3.0f);
    const auto dy = random_floats(rows * dim, 62);
    const auto gamma = random_floats(dim, 63, 0.5f, 1.5f);
    const auto x64 = widen(x), dy64 = widen(dy), gamma64 = widen(gamma);
    std::vector<double> want_dx(x.size()), want_dgamma(dim);
    reference::rms_norm_backward<double>(dy64.data(), x64.data(), gamma64.data(), false, nullptr,
                                         nullptr, want_dx.data(), want_dgamma.data(), rows, dim,
                                         1e-6);
    NormOptions options;
    options.gamma = ConstView{gamma.data(), normalized};
    std::vector<float> y(x.size()), rstd(rows);
    rms_norm({x.data(), shape}, normalized, {y.data(), shape}, options,
             MutableView{rstd.data(), Shape{rows}});
    for (const bool use_saved : {false, true}) {
      std::vector<float> dx(x.size()), dgamma(dim);
      rms_norm_backward(
          {dy.data(), shape}, {x.data(), shape}, normalized,
          {{dx.data(), shape}, MutableView{dgamma.data(), normalized}}, options,
          use_saved ? OptionalConst(ConstView{rstd.data(), Shape{rows}}) : std::nullopt);
      SCOPED_TRACE(dim);
      EXPECT_TRUE(within_ulps(dx, want_dx, use_saved ? 4 : 2, 4.0));
      EXPECT_TRUE(within_ulps(dgamma, want_dgamma, 2, 4.0));
    }
  }
}

}  // namespace
}  // namespace addnorm
