// BatchNorm against float64: training and inference modes, both running-statistics conventions,
// and the training-mode gradient checked against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "addnorm/ops.hpp"
#include "ops/reference/batch_norm.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;
using testing::widen;
using testing::within_ulps;

struct Moments {
  std::vector<double> mean, var;  // biased variance
};
// Per-channel statistics of x viewed as [batch, channels, length], written independently.
Moments channel_moments_float64(const std::vector<float>& x, int64_t batch, int64_t channels,
                                int64_t length) {
  Moments m{std::vector<double>(channels, 0.0), std::vector<double>(channels, 0.0)};
  const double count = double(batch * length);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t l = 0; l < length; ++l) m.mean[c] += x[(n * channels + c) * length + l] / count;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t l = 0; l < length; ++l)
        m.var[c] += std::pow(x[(n * channels + c) * length + l] - m.mean[c], 2) / count;
  return m;
}

std::vector<double> normalise_float64(const std::vector<float>& x, const Moments& m,
                                      const std::vector<float>& gamma,
                                      const std::vector<float>& beta, int64_t channels,
                                      int64_t length, double eps) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t c = (static_cast<int64_t>(i) / length) % channels;
    y[i] = (x[i] - m.mean[c]) / std::sqrt(m.var[c] + eps) * gamma[c] + beta[c];
  }
  return y;
}

class BatchNormTest : public ::testing::TestWithParam<Shape> {};

TEST_P(BatchNormTest, TrainingNormalisesWithBatchStatisticsAndUpdatesRunningStats) {
  const Shape shape = GetParam();
  const int64_t batch = shape[0], channels = shape[1];
  const int64_t length = shape.rank() == 3 ? shape[2] : 1;
  const auto x = random_floats(static_cast<size_t>(shape.numel()), 71, -2.0f, 6.0f);
  const auto gamma = random_floats(channels, 72, 0.5f, 2.0f);
  const auto beta = random_floats(channels, 73);
  const Moments m = channel_moments_float64(x, batch, channels, length);
  const double count = double(batch * length);
  for (const auto convention : {MomentumConvention::pytorch, MomentumConvention::onnx}) {
    const float momentum = convention == MomentumConvention::pytorch ? 0.1f : 0.9f;
    std::vector<float> y(x.size()), running_mean(channels, 0.5f), running_var(channels, 2.0f);
    BatchNormOptions options{
        {.gamma = ConstView{gamma.data(), {channels}}, .beta = ConstView{beta.data(), {channels}}}};
    options.momentum = momentum;
    options.convention = convention;
    batch_norm({x.data(), shape}, {y.data(), shape}, options,
               RunningStats{{running_mean.data(), {channels}}, {running_var.data(), {channels}}});
    EXPECT_TRUE(
        within_ulps(y, normalise_float64(x, m, gamma, beta, channels, length, 1e-5), 2, 4.0));
    std::vector<double> want_mean(channels), want_var(channels);
    for (int64_t c = 0; c < channels; ++c) {
      if (convention == MomentumConvention::pytorch) {
        want_mean[c] = 0.9 * 0.5 + 0.1 * m.mean[c];
        want_var[c] = 0.9 * 2.0 + 0.1 * m.var[c] * count / (count - 1);  // unbiased
      } else {
        want_mean[c] = 0.9 * 0.5 + 0.1 * m.mean[c];  // momentum weights the old value
        want_var[c] = 0.9 * 2.0 + 0.1 * m.var[c];    // biased
      }
    }
    // momentum is a float (0.1f / 0.9f), so allow its representation error.
    EXPECT_TRUE(within_ulps(running_mean, want_mean, 8));
    EXPECT_TRUE(within_ulps(running_var, want_var, 8));
  }
}

TEST_P(BatchNormTest, InferenceUsesRunningStatistics) {
  const Shape shape = GetParam();
  const int64_t channels = shape[1];
  const int64_t length = shape.rank() == 3 ? shape[2] : 1;
  const auto x = random_floats(static_cast<size_t>(shape.numel()), 81, -2.0f, 6.0f);
  const auto gamma = random_floats(channels, 82, 0.5f, 2.0f);
  const auto beta = random_floats(channels, 83);
  auto running_mean = random_floats(channels, 84);
  auto running_var = random_floats(channels, 85, 0.5f, 3.0f);
  const auto running_mean_before = running_mean, running_var_before = running_var;
  std::vector<float> y(x.size());
  BatchNormOptions options{
      {.gamma = ConstView{gamma.data(), {channels}}, .beta = ConstView{beta.data(), {channels}}}};
  options.training = false;
  batch_norm({x.data(), shape}, {y.data(), shape}, options,
             RunningStats{{running_mean.data(), {channels}}, {running_var.data(), {channels}}});
  const Moments running{widen(running_mean), widen(running_var)};
  EXPECT_TRUE(
      within_ulps(y, normalise_float64(x, running, gamma, beta, channels, length, 1e-5), 2, 4.0));
  EXPECT_EQ(running_mean, running_mean_before);  // inference never updates them
  EXPECT_EQ(running_var, running_var_before);
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormTest,
                         ::testing::Values(Shape{2, 1}, Shape{3, 3}, Shape{16, 5}, Shape{4, 3, 7},
                                           Shape{2, 8, 33}),
                         [](const ::testing::TestParamInfo<Shape>& shape_info) {
                           std::string name;
                           for (int64_t dim : shape_info.param.dims()) {
                             if (!name.empty()) name += 'x';
                             name += std::to_string(dim);
                           }
                           return name;
                         });

TEST(BatchNormBackward, ReferenceMatchesFiniteDifferences) {
  const reference::BatchLayout layout{3, 2, 4};
  const int64_t size = layout.batch * layout.channels * layout.length;
  const auto x = widen(random_floats(size, 91, -2.0f, 2.0f));
  const auto gamma = widen(random_floats(layout.channels, 92, 0.5f, 1.5f));
  const auto beta = widen(random_floats(layout.channels, 93));
  const auto dy = widen(random_floats(size, 94));
  const double eps = 1e-3;
  auto loss = [&](const std::vector<double>& xs, const std::vector<double>& g,
                  const std::vector<double>& b) {
    std::vector<double> y(xs.size());
    for (int64_t c = 0; c < layout.channels; ++c) {
      const auto m = reference::channel_moments(xs.data(), layout, c);
      reference::normalise_channel<double>(xs.data(), g.data(), b.data(), y.data(), layout, c,
                                           m.mean, 1 / std::sqrt(m.variance + eps));
    }
    return testing::dot(y, dy);
  };
  std::vector<double> dx(size), dgamma(layout.channels), dbeta(layout.channels);
  for (int64_t c = 0; c < layout.channels; ++c) {
    reference::batch_norm_backward_channel<double>(dy.data(), x.data(), gamma.data(), dx.data(),
                                                   dgamma.data(), dbeta.data(), layout, c, eps);
  }
  EXPECT_TRUE(testing::matches_finite_differences(
      [&](const std::vector<double>& p) { return loss(p, gamma, beta); }, x, dx));
  EXPECT_TRUE(testing::matches_finite_differences(
      [&](const std::vector<double>& p) { return loss(x, p, beta); }, gamma, dgamma));
  EXPECT_TRUE(testing::matches_finite_differences(
      [&](const std::vector<double>& p) { return loss(x, gamma, p); }, beta, dbeta));
}

// The float32 backward against float64 in both modes. In inference mode the statistics are
// constants, so the gradient is the finite-difference-free dy * gamma * rstd.
TEST(BatchNormBackward, MatchesFloat64InBothModes) {
  const Shape shape{6, 4, 5};
  const int64_t channels = 4, length = 5;
  const auto x = random_floats(120, 101, -2.0f, 3.0f);
  const auto dy = random_floats(120, 102);
  const auto gamma = random_floats(channels, 103, 0.5f, 1.5f);
  const auto beta = random_floats(channels, 104);
  auto running_mean = random_floats(channels, 105);
  auto running_var = random_floats(channels, 106, 0.5f, 2.0f);
  const reference::BatchLayout layout{6, channels, length};
  for (const bool training : {true, false}) {
    const auto x64 = widen(x), dy64 = widen(dy), gamma64 = widen(gamma);
    std::vector<double> want_dx(120), want_dgamma(channels), want_dbeta(channels);
    for (int64_t c = 0; c < channels; ++c) {
      if (training) {
        reference::batch_norm_backward_channel<double>(dy64.data(), x64.data(), gamma64.data(),
                                                       want_dx.data(), want_dgamma.data(),
                                                       want_dbeta.data(), layout, c, 1e-5);
      } else {
        reference::batch_norm_eval_backward_channel<double>(
            dy64.data(), x64.data(), gamma64.data(), want_dx.data(), want_dgamma.data(),
            want_dbeta.data(), layout, c, running_mean[c],
            1 / std::sqrt(double(running_var[c]) + 1e-5));
      }
    }
    BatchNormOptions options{
        {.gamma = ConstView{gamma.data(), {channels}}, .beta = ConstView{beta.data(), {channels}}}};
    options.training = training;
    std::vector<float> dx(120), dgamma(channels), dbeta(channels);
    batch_norm_backward(
        {dy.data(), shape}, {x.data(), shape},
        {{dx.data(), shape},
         MutableView{dgamma.data(), {channels}},
         MutableView{dbeta.data(), {channels}}},
        options, RunningStats{{running_mean.data(), {channels}}, {running_var.data(), {channels}}});
    SCOPED_TRACE(training);
    EXPECT_TRUE(within_ulps(dx, want_dx, 2, 8.0));
    EXPECT_TRUE(within_ulps(dgamma, want_dgamma, 2, 8.0));
    EXPECT_TRUE(within_ulps(dbeta, want_dbeta, 2, 8.0));
  }
}

// A NaN in one channel makes that channel's output NaN and leaves the others untouched.
TEST(BatchNorm, NonFiniteValuePoisonsOnlyItsChannel) {
  auto x = random_floats(4 * 3, 111);
  x[4] = std::nanf("");  // batch 1, channel 1
  std::vector<float> y(12);
  batch_norm({x.data(), {4, 3}}, {y.data(), {4, 3}});
  for (int i = 0; i < 12; ++i) EXPECT_EQ(std::isnan(y[i]), i % 3 == 1) << i;
}

}  // namespace
}  // namespace addnorm

namespace addnorm {
namespace {

// (N, C, *) of rank 4 and 5, and channels last (N, *, C): each channel normalised over all its
// values, against the float64 statistics of the same values in (N, C, L) order; the backward's
// dgamma/dbeta against the same sums.
TEST(BatchNormAnyRank, RankFourFiveAndChannelsLastMatchFloat64) {
  struct Layout {
    Shape shape;
    bool channels_last;
  };
  for (const Layout& layout : {Layout{{3, 4, 5, 6}, false}, Layout{{2, 3, 4, 2, 5}, false},
                               Layout{{3, 5, 6, 4}, true}, Layout{{2, 4, 2, 5, 3}, true}}) {
    const Shape& shape = layout.shape;
    const int rank = shape.rank();
    const int64_t batch = shape[0];
    const int64_t channels = layout.channels_last ? shape[rank - 1] : shape[1];
    const int64_t length = shape.numel() / (batch * channels);
    const auto x = random_floats(static_cast<size_t>(shape.numel()), 71, -2.0f, 5.0f);
    const auto dy = random_floats(x.size(), 72, -1.0f, 1.0f);
    const auto gamma = random_floats(static_cast<size_t>(channels), 73, 0.5f, 2.0f);
    const auto beta = random_floats(static_cast<size_t>(channels), 74, -1.0f, 1.0f);
    // x and dy rearranged into (N, C, L), where the float64 helpers above read them.
    const auto to_ncl = [&](const std::vector<float>& v) {
      if (!layout.channels_last) return v;
      std::vector<float> out(v.size());
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t l = 0; l < length; ++l)
          for (int64_t c = 0; c < channels; ++c)
            out[(n * channels + c) * length + l] = v[(n * length + l) * channels + c];
      return out;
    };
    const auto x_ncl = to_ncl(x);
    const auto dy_ncl = to_ncl(dy);
    const Moments m = channel_moments_float64(x_ncl, batch, channels, length);
    const auto want_ncl = normalise_float64(x_ncl, m, gamma, beta, channels, length, 1e-5);

    BatchNormOptions options;
    options.gamma = ConstView{gamma.data(), {channels}};
    options.beta = ConstView{beta.data(), {channels}};
    options.channels_last = layout.channels_last;
    std::vector<float> y(x.size()), dx(x.size()), dgamma(channels), dbeta(channels);
    batch_norm({x.data(), shape}, {y.data(), shape}, options);
    batch_norm_backward({dy.data(), shape}, {x.data(), shape},
                        {{dx.data(), shape},
                         MutableView{dgamma.data(), {channels}},
                         MutableView{dbeta.data(), {channels}}},
                        options);
    SCOPED_TRACE(shape.to_string() + (layout.channels_last ? " channels last" : ""));
    EXPECT_TRUE(within_ulps(to_ncl(y), want_ncl, 3, 10.0));
    std::vector<double> want_dgamma(channels, 0.0), want_dbeta(channels, 0.0);
    for (size_t i = 0; i < x_ncl.size(); ++i) {
      const int64_t c = (static_cast<int64_t>(i) / length) % channels;
      want_dgamma[c] += dy_ncl[i] * (x_ncl[i] - m.mean[c]) / std::sqrt(m.var[c] + 1e-5);
      want_dbeta[c] += dy_ncl[i];
    }
    EXPECT_TRUE(within_ulps(dgamma, want_dgamma, 4, double(batch * length)));
    EXPECT_TRUE(within_ulps(dbeta, want_dbeta, 4, double(batch * length)));
  }
}

}  // namespace
}  // namespace addnorm
