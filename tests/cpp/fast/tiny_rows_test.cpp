// Rows of tiny values (float32 denormals, x ~ 1e-40) with eps = 1e-5, on every SIMD target:
// every output of the LayerNorm and RMSNorm forward and backward within a few float32 ulp of
// the float64 reference. eps then dominates the variance, so rstd is an ordinary number (~316)
// and x_hat ~ 1e-38 is a normal float; what the kernels must not do is round the centred values
// x - mean onto float32's denormal grid (spacing 2^-149) before scaling them by rstd: that was
// up to 285 ulp of dgamma (issue 14, item 12).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/reference/layer_norm.hpp"
#include "ops/reference/rms_norm.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;
using testing::widen;
using testing::within_ulps;

class TinyRows : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override { cpu::force_target(0); }
};

// The float64 reference's x_hat, for the scales of dgamma's sums.
std::vector<double> reference_x_hat(const std::vector<double>& x, int64_t rows, int64_t dim,
                                    bool layer, double eps) {
  std::vector<double> x_hat(x.size());
  if (layer) {
    reference::layer_norm_forward<double>(x.data(), nullptr, nullptr, x_hat.data(), nullptr,
                                          nullptr, rows, dim, eps);
  } else {
    reference::rms_norm_forward<double>(x.data(), nullptr, false, x_hat.data(), nullptr, rows, dim,
                                        eps);
  }
  return x_hat;
}

// Per element of dgamma (dbeta): sum over rows of |dy * x_hat| (|dy|), the size of the terms
// that cancel in it.
std::vector<double> column_sums_of_abs(const std::vector<double>& dy,
                                       const std::vector<double>* x_hat, int64_t rows,
                                       int64_t dim) {
  std::vector<double> sums(static_cast<size_t>(dim), 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t i = 0; i < dim; ++i) {
      const auto at = static_cast<size_t>(row * dim + i);
      sums[static_cast<size_t>(i)] += std::fabs(dy[at] * (x_hat ? (*x_hat)[at] : 1.0));
    }
  }
  return sums;
}

struct TinyCase {
  float scale;  // x = U(-2, 3) * scale
  int64_t dim;
  bool saved;  // backward with the forward's saved rstd
};

void check_tiny_rows(const TinyCase& c, bool layer) {
  SCOPED_TRACE(std::string(layer ? "layer" : "rms") + " scale " + std::to_string(c.scale) +
               " dim " + std::to_string(c.dim) + (c.saved ? " saved rstd" : ""));
  const int64_t rows = 9;  // two groups of four rows (the grouped pass 2) and one on its own
  const double eps = 1e-5;
  const Shape shape{rows, c.dim}, normalized{c.dim};
  auto x = random_floats(static_cast<size_t>(rows * c.dim), 51, -2.0f, 3.0f);
  for (float& v : x) v *= c.scale;
  const auto dy = random_floats(x.size(), 52);
  const auto gamma = random_floats(static_cast<size_t>(c.dim), 53, 0.5f, 1.5f);
  const auto x64 = widen(x), dy64 = widen(dy), g64 = widen(gamma);

  std::vector<double> want_y(x.size()), want_dx(x.size()), want_dg(c.dim), want_db(c.dim);
  std::vector<float> y(x.size()), dx(x.size()), dg(c.dim), db(c.dim), mean(rows), rstd(rows);
  const ConstView g{gamma.data(), normalized};
  if (layer) {
    const NormOptions options{.gamma = g, .eps = static_cast<float>(eps)};
    layer_norm({x.data(), shape}, normalized, {y.data(), shape}, options,
               NormStats{{mean.data(), {rows}}, {rstd.data(), {rows}}});
    std::optional<SavedStats> saved;
    if (c.saved) saved = SavedStats{{mean.data(), {rows}}, {rstd.data(), {rows}}};
    // dbeta is asked for with a beta of zeros: the gradient does not depend on beta's value.
    const std::vector<float> zeros(static_cast<size_t>(c.dim), 0.0f);
    const NormOptions with_beta{
        .gamma = g, .beta = ConstView{zeros.data(), normalized}, .eps = static_cast<float>(eps)};
    layer_norm_backward({dy.data(), shape}, {x.data(), shape}, normalized,
                        {{dx.data(), shape},
                         MutableView{dg.data(), normalized},
                         MutableView{db.data(), normalized}},
                        with_beta, saved);
  } else {
    const NormOptions options{
        .gamma = g, .zero_centered_gamma = false, .eps = static_cast<float>(eps)};
    rms_norm({x.data(), shape}, normalized, {y.data(), shape}, options,
             MutableView{rstd.data(), {rows}});
    rms_norm_backward({dy.data(), shape}, {x.data(), shape}, normalized,
                      {{dx.data(), shape}, MutableView{dg.data(), normalized}}, options,
                      c.saved ? OptionalConst(ConstView{rstd.data(), {rows}}) : std::nullopt);
  }
  // The reference, given the same saved rstd (float32) as the kernel when there is one.
  const auto rstd64 = widen(rstd);
  const double* saved_rstd = c.saved ? rstd64.data() : nullptr;
  if (layer) {
    reference::layer_norm_forward<double>(x64.data(), g64.data(), nullptr, want_y.data(), nullptr,
                                          nullptr, rows, c.dim, eps);
    reference::layer_norm_backward<double>(dy64.data(), x64.data(), g64.data(), saved_rstd, nullptr,
                                           want_dx.data(), want_dg.data(), want_db.data(), rows,
                                           c.dim, eps);
  } else {
    reference::rms_norm_forward<double>(x64.data(), g64.data(), false, want_y.data(), nullptr, rows,
                                        c.dim, eps);
    reference::rms_norm_backward<double>(dy64.data(), x64.data(), g64.data(), false, saved_rstd,
                                         nullptr, want_dx.data(), want_dg.data(), rows, c.dim, eps);
  }
  // y = x_hat * gamma: no beta, so nothing hides an error in x_hat.
  EXPECT_TRUE(within_ulps(y, want_y, 2));
  // dx = rstd * (g - mean(g) - x_hat * mean(g x_hat)): terms up to rstd * |g| in size.
  EXPECT_TRUE(within_ulps(dx, want_dx, 4, testing::max_abs(want_dx)));
  // dgamma and dbeta: within 4 ulp of the terms that cancel in each sum.
  const auto x_hat = reference_x_hat(x64, rows, c.dim, layer, eps);
  EXPECT_TRUE(
      testing::within_ulps_each(dg, want_dg, 4, column_sums_of_abs(dy64, &x_hat, rows, c.dim)));
  if (layer) {
    EXPECT_TRUE(
        testing::within_ulps_each(db, want_db, 4, column_sums_of_abs(dy64, nullptr, rows, c.dim)));
  }
}

TEST_P(TinyRows, MatchTheFloat64Reference) {
  ASSERT_EQ(cpu::current_target_name(), cpu::target_name(GetParam()));
  for (const float scale : {1e-40f, 1e-44f, 1e-36f}) {
    for (const int64_t dim : {9, 64, 257, 1024}) {
      for (const bool saved : {false, true}) {
        for (const bool layer : {true, false}) check_tiny_rows({scale, dim, saved}, layer);
      }
    }
  }
}

// BatchNorm channels of tiny values, training (the batch's spread) and inference (running
// statistics of the same size): y = x_hat * gamma within 2 ulp of the float64 op.
TEST_P(TinyRows, BatchNormChannelsMatchTheFloat64Op) {
  ASSERT_EQ(cpu::current_target_name(), cpu::target_name(GetParam()));
  for (const Shape& shape : {Shape{64, 3}, Shape{16, 5, 7}}) {
    for (const bool training : {true, false}) {
      SCOPED_TRACE(shape.to_string() + (training ? " training" : " inference"));
      const int64_t channels = shape[1];
      const Shape per_channel{channels};
      auto x = random_floats(static_cast<size_t>(shape.numel()), 54, -2.0f, 3.0f);
      for (float& v : x) v *= 1e-40f;
      const auto gamma = random_floats(static_cast<size_t>(channels), 55, 0.5f, 1.5f);
      // Such a channel's variance (~1e-80) is below float32's range: its running variance is 0,
      // and eps sets rstd.
      const std::vector<float> running_mean(static_cast<size_t>(channels), 0.5e-40f);
      const std::vector<float> running_var(static_cast<size_t>(channels), 0.0f);
      const auto x64 = widen(x), g64 = widen(gamma);
      const auto mean64 = widen(running_mean), var64 = widen(running_var);
      std::vector<float> y(x.size());
      std::vector<double> want(x.size());
      BatchNormOptions options{{.gamma = ConstView{gamma.data(), per_channel}}};
      options.training = training;
      float64::BatchNormOptions options64{{.gamma = float64::ConstView{g64.data(), per_channel}}};
      options64.training = training;
      std::optional<RunningStats> running;
      std::optional<float64::RunningStats> running64;
      std::vector<float> mean_copy = running_mean, var_copy = running_var;
      std::vector<double> mean64_copy = mean64, var64_copy = var64;
      if (!training) {
        running = RunningStats{{mean_copy.data(), per_channel}, {var_copy.data(), per_channel}};
        running64 = float64::RunningStats{{mean64_copy.data(), per_channel},
                                          {var64_copy.data(), per_channel}};
      }
      batch_norm({x.data(), shape}, {y.data(), shape}, options, running);
      float64::batch_norm({x64.data(), shape}, {want.data(), shape}, options64, running64);
      EXPECT_TRUE(within_ulps(y, want, 2));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, TinyRows, ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target_info) {
                           return cpu::target_name(target_info.param);
                         });

}  // namespace
}  // namespace addnorm
