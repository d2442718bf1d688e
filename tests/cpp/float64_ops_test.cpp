// The float64 ops (addnorm/float64.hpp) against the float32 ops (ops.hpp) on the same
// float32-representable data: two implementations (reference kernels in float64, SIMD kernels
// in float32) of one definition, so the float32 results must lie within a few float32 ulp of the
// float64 ones. Dropout must drop exactly the same elements in both dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::max_abs;
using testing::random_floats;
using testing::widen;
using testing::within_ulps;

TEST(Float64Ops, LayerNormAgreesWithTheFloat32Op) {
  const int64_t rows = 6, dim = 37;
  const Shape shape{rows, dim}, normalized{dim};
  const auto x = random_floats(rows * dim, 1, -2.0f, 3.0f), dy = random_floats(rows * dim, 2);
  const auto gamma = random_floats(dim, 3, 0.5f, 1.5f), beta = random_floats(dim, 4);
  const auto x64 = widen(x), dy64 = widen(dy), g64 = widen(gamma), b64 = widen(beta);

  std::vector<float> y(x.size()), dx(x.size()), dg(dim), db(dim), mean(rows), rstd(rows);
  const NormOptions options{.gamma = ConstView{gamma.data(), normalized},
                            .beta = ConstView{beta.data(), normalized}};
  layer_norm({x.data(), shape}, normalized, {y.data(), shape}, options,
             NormStats{{mean.data(), {rows}}, {rstd.data(), {rows}}});
  layer_norm_backward(
      {dy.data(), shape}, {x.data(), shape}, normalized,
      {{dx.data(), shape}, MutableView{dg.data(), normalized}, MutableView{db.data(), normalized}},
      options);

  std::vector<double> y64(x.size()), dx64(x.size()), dg64(dim), db64(dim), mean64(rows),
      rstd64(rows);
  const float64::NormOptions options64{.gamma = float64::ConstView{g64.data(), normalized},
                                       .beta = float64::ConstView{b64.data(), normalized}};
  float64::layer_norm({x64.data(), shape}, normalized, {y64.data(), shape}, options64,
                      float64::NormStats{{mean64.data(), {rows}}, {rstd64.data(), {rows}}});
  float64::layer_norm_backward({dy64.data(), shape}, {x64.data(), shape}, normalized,
                               {{dx64.data(), shape},
                                float64::MutableView{dg64.data(), normalized},
                                float64::MutableView{db64.data(), normalized}},
                               options64);
  EXPECT_TRUE(within_ulps(y, y64, 2, 4.0));
  EXPECT_TRUE(within_ulps(mean, mean64, 1));
  EXPECT_TRUE(within_ulps(rstd, rstd64, 1));
  EXPECT_TRUE(within_ulps(dx, dx64, 4, 8 * max_abs(dx64)));
  EXPECT_TRUE(within_ulps(dg, dg64, 4, 8.0));
  EXPECT_TRUE(within_ulps(db, db64, 4, 8.0));
}

TEST(Float64Ops, BatchNormTrainingAgreesWithTheFloat32Op) {
  const Shape shape{7, 3, 5}, channels{3};
  const auto x = random_floats(105, 5, -1.0f, 4.0f), dy = random_floats(105, 6);
  const auto gamma = random_floats(3, 7, 0.5f, 1.5f), beta = random_floats(3, 8);
  std::vector<float> y(105), dx(105), running_mean(3, 0.5f), running_var(3, 2.0f);
  BatchNormOptions options{
      {.gamma = ConstView{gamma.data(), channels}, .beta = ConstView{beta.data(), channels}}};
  options.momentum = 0.3f;
  batch_norm({x.data(), shape}, {y.data(), shape}, options,
             RunningStats{{running_mean.data(), channels}, {running_var.data(), channels}});
  batch_norm_backward({dy.data(), shape}, {x.data(), shape},
                      {{dx.data(), shape}, std::nullopt, std::nullopt}, options);

  const auto x64 = widen(x), dy64 = widen(dy), g64 = widen(gamma), b64 = widen(beta);
  std::vector<double> y64(105), dx64(105), running_mean64(3, 0.5), running_var64(3, 2.0);
  // momentum 0.3 as the float32 op sees it, so that both update with the same weight.
  float64::BatchNormOptions options64{{.gamma = float64::ConstView{g64.data(), channels},
                                       .beta = float64::ConstView{b64.data(), channels}}};
  options64.momentum = double(0.3f);
  float64::batch_norm(
      {x64.data(), shape}, {y64.data(), shape}, options64,
      float64::RunningStats{{running_mean64.data(), channels}, {running_var64.data(), channels}});
  float64::batch_norm_backward({dy64.data(), shape}, {x64.data(), shape},
                               {{dx64.data(), shape}, std::nullopt, std::nullopt}, options64);
  EXPECT_TRUE(within_ulps(y, y64, 2, 4.0));
  EXPECT_TRUE(within_ulps(dx, dx64, 4, 8 * max_abs(dx64)));
  EXPECT_TRUE(within_ulps(running_mean, running_mean64, 1));
  EXPECT_TRUE(within_ulps(running_var, running_var64, 1));
}

// The post-norm block with dropout: the same elements of s are dropped in both dtypes (ds is 0
// exactly there), and the gradients agree.
TEST(Float64Ops, PostNormDropsTheSameElementsAsTheFloat32Op) {
  const int64_t rows = 5, dim = 40;
  const Shape shape{rows, dim}, normalized{dim};
  const auto n = static_cast<size_t>(rows * dim);
  const auto x = random_floats(n, 9), s = random_floats(n, 10), dy = random_floats(n, 11);
  const DropoutOptions dropout{0.3f, 1234, 17};
  std::vector<float> y(n), dx(n), ds(n);
  add_norm_post({x.data(), shape}, {s.data(), shape}, normalized, {y.data(), shape}, {}, dropout);
  add_norm_post_backward({dy.data(), shape}, {x.data(), shape}, {s.data(), shape}, normalized,
                         {{dx.data(), shape}, {ds.data(), shape}, std::nullopt, std::nullopt}, {},
                         dropout);

  const auto x64 = widen(x), s64 = widen(s), dy64 = widen(dy);
  const float64::DropoutOptions dropout64{double(dropout.p), dropout.seed, dropout.offset};
  std::vector<double> y64(n), dx64(n), ds64(n);
  float64::add_norm_post({x64.data(), shape}, {s64.data(), shape}, normalized, {y64.data(), shape},
                         {}, dropout64);
  float64::add_norm_post_backward(
      {dy64.data(), shape}, {x64.data(), shape}, {s64.data(), shape}, normalized,
      {{dx64.data(), shape}, {ds64.data(), shape}, std::nullopt, std::nullopt}, {}, dropout64);
  int dropped = 0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(ds[i] == 0.0f, ds64[i] == 0.0) << "element " << i;
    dropped += ds64[i] == 0.0;
  }
  EXPECT_GT(dropped, 30);
  // The float32 op rounds h = x + Dropout(s) to float32 before normalising it; the float64 op
  // does not: the difference is a float32 rounding of h, scaled by rstd.
  EXPECT_TRUE(within_ulps(y, y64, 4, 8 * max_abs(y64)));
  EXPECT_TRUE(within_ulps(dx, dx64, 4, 16 * max_abs(dx64)));
  EXPECT_TRUE(within_ulps(ds, ds64, 4, 16 * max_abs(ds64)));
}

// docs/numerics.md's rule for a constant row, group or channel with eps = 0: its centred values
// are exactly 0 and x_hat is 0 there, not 0 * inf, so y = beta exactly. The same in both
// precisions and in every centring norm: LayerNorm, GroupNorm, and BatchNorm in training (batch
// statistics, (N, C) and (N, C, L)); in inference a running variance of 0 has no root and gives
// NaN in both. Channel 1 is constant; the others are not, and stay finite.
TEST(Float64Ops, ConstantChannelsWithZeroEpsGiveBetaInBothPrecisions) {
  const int64_t batch = 4, channels = 3;
  const std::vector<float> beta{0.25f, -1.5f, 2.0f}, gamma{2.0f, 3.0f, 0.5f};
  const std::vector<double> beta64(beta.begin(), beta.end()), gamma64(gamma.begin(), gamma.end());
  for (const int64_t length : {int64_t{1}, int64_t{5}}) {
    const Shape shape{batch, channels, length};
    std::vector<float> x = random_floats(static_cast<size_t>(shape.numel()), 7, -2.0f, 2.0f);
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t l = 0; l < length; ++l)
        x[static_cast<size_t>((n * channels + 1) * length + l)] = 0.75f;
    }
    const auto x64 = widen(x);
    const Shape per_channel{channels};
    // Channel 1 is beta, or NaN where the rule gives a NaN rstd.
    const auto expect_channel_1 = [&](const auto& y, const char* what, bool nan = false) {
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t c = 0; c < channels; ++c) {
          for (int64_t l = 0; l < length; ++l) {
            const double value = double(y[static_cast<size_t>((n * channels + c) * length + l)]);
            if (c == 1 && nan) {
              EXPECT_TRUE(std::isnan(value)) << what << ", L = " << length;
            } else if (c == 1) {
              EXPECT_EQ(value, double(beta[1])) << what << ", L = " << length;
            } else {
              EXPECT_TRUE(std::isfinite(value)) << what << ", L = " << length;
            }
          }
        }
      }
    };
    std::vector<float> y(x.size());
    std::vector<double> y64(x.size());
    BatchNormOptions options{{.gamma = ConstView{gamma.data(), per_channel},
                              .beta = ConstView{beta.data(), per_channel},
                              .eps = 0.0f}};
    float64::BatchNormOptions options64{{.gamma = float64::ConstView{gamma64.data(), per_channel},
                                         .beta = float64::ConstView{beta64.data(), per_channel},
                                         .eps = 0.0}};
    batch_norm({x.data(), shape}, {y.data(), shape}, options);
    float64::batch_norm({x64.data(), shape}, {y64.data(), shape}, options64);
    expect_channel_1(y, "BatchNorm, training, float32");
    expect_channel_1(y64, "BatchNorm, training, float64");
    std::vector<float> running_mean{0.0f, 0.75f, 0.0f}, running_var{1.0f, 0.0f, 1.0f};
    const std::vector<double> running_mean64(running_mean.begin(), running_mean.end()),
        running_var64(running_var.begin(), running_var.end());
    options.training = false;
    options64.training = false;
    batch_norm({x.data(), shape}, {y.data(), shape}, options,
               RunningStats{{running_mean.data(), per_channel}, {running_var.data(), per_channel}});
    auto rm64 = running_mean64, rv64 = running_var64;
    float64::batch_norm(
        {x64.data(), shape}, {y64.data(), shape}, options64,
        float64::RunningStats{{rm64.data(), per_channel}, {rv64.data(), per_channel}});
    // Inference does not know its values centred: a running_var + eps of 0 has no root, and the
    // channel is NaN (docs/numerics.md), even where each value equals running_mean.
    expect_channel_1(y, "BatchNorm, inference, float32", true);
    expect_channel_1(y64, "BatchNorm, inference, float64", true);
    // GroupNorm with one channel a group (InstanceNorm) over L = 5: channel 1 of each sample is
    // a constant group.
    if (length > 1) {
      GroupNormOptions groups{{.gamma = ConstView{gamma.data(), per_channel},
                               .beta = ConstView{beta.data(), per_channel},
                               .eps = 0.0f},
                              channels};
      float64::GroupNormOptions groups64{{.gamma = float64::ConstView{gamma64.data(), per_channel},
                                          .beta = float64::ConstView{beta64.data(), per_channel},
                                          .eps = 0.0},
                                         channels};
      group_norm({x.data(), shape}, {y.data(), shape}, groups);
      float64::group_norm({x64.data(), shape}, {y64.data(), shape}, groups64);
      expect_channel_1(y, "GroupNorm, float32");
      expect_channel_1(y64, "GroupNorm, float64");
    }
  }
}

// A negative eps is taken, as PyTorch and ONNX take it: where variance + eps stays positive the
// float32 ops agree with the float64 ones as for any eps, and a row (or channel) whose variance +
// eps is 0 or below, a constant one included, is NaN throughout in both, forward and backward,
// as docs/numerics.md's one rstd rule says. Row 5 alternates +1 and -1: its variance and mean
// square are exactly 1, so with eps = -1 its variance + eps is exactly 0.
TEST(Float64Ops, NegativeEpsIsTakenAndAVariancePlusEpsOfZeroOrBelowIsNaN) {
  constexpr int64_t kRows = 7, kDim = 16;
  const float scales[kRows] = {0.1f, 4.0f, 0.3f, 5.0f, 0.0f, 1.0f, 3.0f};  // row 4 is constant
  const float eps = -1.0f;
  std::vector<float> x = random_floats(kRows * kDim, 21, -1.0f, 1.0f);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t i = 0; i < kDim; ++i) {
      float& value = x[static_cast<size_t>(r * kDim + i)];
      value = r == 5 ? (i % 2 == 0 ? 1.0f : -1.0f) : value * scales[r];
    }
  }
  const auto x64 = widen(x);
  // Whether row r's variance (mean square for RMSNorm) + eps is 0 or below, in float64.
  const auto rootless = [&](int64_t r, bool centre) {
    double sum = 0, squares = 0;
    for (int64_t i = 0; i < kDim; ++i) sum += x64[static_cast<size_t>(r * kDim + i)];
    const double mean = centre ? sum / kDim : 0.0;
    for (int64_t i = 0; i < kDim; ++i) {
      const double d = x64[static_cast<size_t>(r * kDim + i)] - mean;
      squares += d * d;
    }
    return squares / kDim + eps <= 0;
  };
  const auto expect_rows = [&](const std::vector<float>& y, const std::vector<double>& y64,
                               bool centre, const char* what) {
    int nan_rows = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      nan_rows += rootless(r, centre) ? 1 : 0;
      for (int64_t i = 0; i < kDim; ++i) {
        const auto at = static_cast<size_t>(r * kDim + i);
        if (rootless(r, centre)) {
          EXPECT_TRUE(std::isnan(y[at]) && std::isnan(y64[at]))
              << what << " row " << r << ": " << y[at] << ", " << y64[at];
        } else {
          EXPECT_NEAR(y[at], y64[at], 1e-4 * (1 + std::fabs(y64[at]))) << what << " row " << r;
        }
      }
    }
    EXPECT_GE(nan_rows, 3) << what;  // the small rows, the constant one and row 5
    EXPECT_LT(nan_rows, kRows) << what;
  };
  const Shape shape{kRows, kDim}, normalized{kDim};
  std::vector<float> y(x.size()), h(x.size()), dx(x.size());
  std::vector<double> y64(x.size()), h64(x.size()), dx64(x.size()), zeros64(x.size(), 0.0);
  const std::vector<float> zeros(x.size(), 0.0f), dy = random_floats(kRows * kDim, 22);
  const auto dy64 = widen(dy);
  layer_norm({x.data(), shape}, normalized, {y.data(), shape}, {.eps = eps});
  float64::layer_norm({x64.data(), shape}, normalized, {y64.data(), shape}, {.eps = double(eps)});
  expect_rows(y, y64, true, "layer_norm");
  layer_norm_backward({dy.data(), shape}, {x.data(), shape}, normalized,
                      {{dx.data(), shape}, std::nullopt, std::nullopt}, {.eps = eps});
  float64::layer_norm_backward({dy64.data(), shape}, {x64.data(), shape}, normalized,
                               {{dx64.data(), shape}, std::nullopt, std::nullopt},
                               {.eps = double(eps)});
  expect_rows(dx, dx64, true, "layer_norm_backward");
  rms_norm({x.data(), shape}, normalized, {y.data(), shape}, {.eps = eps});
  float64::rms_norm({x64.data(), shape}, normalized, {y64.data(), shape}, {.eps = double(eps)});
  expect_rows(y, y64, false, "rms_norm");
  rms_norm_backward({dy.data(), shape}, {x.data(), shape}, normalized,
                    {{dx.data(), shape}, std::nullopt}, {.eps = eps});
  float64::rms_norm_backward({dy64.data(), shape}, {x64.data(), shape}, normalized,
                             {{dx64.data(), shape}, std::nullopt}, {.eps = double(eps)});
  expect_rows(dx, dx64, false, "rms_norm_backward");
  add_norm_pre({x.data(), shape}, {zeros.data(), shape}, normalized, {h.data(), shape},
               {y.data(), shape}, {.eps = eps});
  float64::add_norm_pre({x64.data(), shape}, {zeros64.data(), shape}, normalized,
                        {h64.data(), shape}, {y64.data(), shape}, {.eps = double(eps)});
  expect_rows(y, y64, true, "add_norm_pre");
  // GroupNorm with one group a sample over (N, C, L) = (7, 4, 4): each row is a group.
  const Shape grouped{kRows, 4, 4};
  group_norm({x.data(), grouped}, {y.data(), grouped}, {{.eps = eps}, 1});
  float64::group_norm({x64.data(), grouped}, {y64.data(), grouped}, {{.eps = double(eps)}, 1});
  expect_rows(y, y64, true, "group_norm");
  // BatchNorm over (N, C, L) = (1, 7, 16): each row is a channel.
  const Shape channels{1, kRows, kDim};
  BatchNormOptions batch{{.eps = eps}};
  batch.momentum = 1.5f;  // extrapolates, as PyTorch's does; taken
  float64::BatchNormOptions batch64{{.eps = double(eps)}};
  batch64.momentum = 1.5;
  std::vector<float> running_mean(kRows, 0.0f), running_var(kRows, 1.0f);
  std::vector<double> running_mean64(kRows, 0.0), running_var64(kRows, 1.0);
  batch_norm({x.data(), channels}, {y.data(), channels}, batch,
             RunningStats{{running_mean.data(), {kRows}}, {running_var.data(), {kRows}}});
  float64::batch_norm(
      {x64.data(), channels}, {y64.data(), channels}, batch64,
      float64::RunningStats{{running_mean64.data(), {kRows}}, {running_var64.data(), {kRows}}});
  expect_rows(y, y64, true, "batch_norm");
  for (int64_t c = 0; c < kRows; ++c) {
    const auto at = static_cast<size_t>(c);
    EXPECT_NEAR(running_mean[at], running_mean64[at], 1e-5 * (1 + std::fabs(running_mean64[at])));
    EXPECT_NEAR(running_var[at], running_var64[at], 1e-5 * (1 + std::fabs(running_var64[at])));
  }
  // Inference with running_var + eps of exactly 0 (channel 5) or below (channel 0): NaN.
  std::vector<float> inference_var(kRows, 4.0f);
  inference_var[5] = 1.0f;
  inference_var[0] = 0.5f;
  std::vector<double> inference_var64(inference_var.begin(), inference_var.end());
  std::vector<float> inference_mean(kRows, 0.0f);
  std::vector<double> inference_mean64(kRows, 0.0);
  batch.training = false;
  batch64.training = false;
  batch_norm({x.data(), channels}, {y.data(), channels}, batch,
             RunningStats{{inference_mean.data(), {kRows}}, {inference_var.data(), {kRows}}});
  float64::batch_norm(
      {x64.data(), channels}, {y64.data(), channels}, batch64,
      float64::RunningStats{{inference_mean64.data(), {kRows}}, {inference_var64.data(), {kRows}}});
  for (int64_t c = 0; c < kRows; ++c) {
    for (int64_t i = 0; i < kDim; ++i) {
      const auto at = static_cast<size_t>(c * kDim + i);
      if (c == 0 || c == 5) {
        EXPECT_TRUE(std::isnan(y[at]) && std::isnan(y64[at])) << "inference channel " << c;
      } else {
        EXPECT_NEAR(y[at], y64[at], 1e-5 * (1 + std::fabs(y64[at]))) << "inference channel " << c;
      }
    }
  }
}

// A momentum outside [0, 1] can carry a running statistic beyond float32's range: it saturates
// to infinity (no undefined conversion), where float64 holds it.
TEST(Float64Ops, ARunningStatisticBeyondFloat32SaturatesToInfinity) {
  const std::vector<float> x{10.0f, 10.0f};
  const std::vector<double> x64(x.begin(), x.end());
  const Shape shape{2, 1};
  std::vector<float> y(2), mean{0.0f}, var{1.0f};
  std::vector<double> y64(2), mean64{0.0}, var64{1.0};
  BatchNormOptions options;
  options.momentum = 3e38f;
  float64::BatchNormOptions options64;
  options64.momentum = double(3e38f);
  batch_norm({x.data(), shape}, {y.data(), shape}, options,
             RunningStats{{mean.data(), {1}}, {var.data(), {1}}});
  float64::batch_norm({x64.data(), shape}, {y64.data(), shape}, options64,
                      float64::RunningStats{{mean64.data(), {1}}, {var64.data(), {1}}});
  EXPECT_EQ(mean[0], std::numeric_limits<float>::infinity());
  EXPECT_NEAR(mean64[0], 10.0 * double(3e38f), 1e25);
}

}  // namespace
}  // namespace addnorm
