// GroupNorm (and InstanceNorm, num_groups = C) against an independent float64 definition on every
// SIMD target: shape sweeps, adversarial rows, 16-bit storage, thread-count identity of
// dgamma/dbeta, finite differences of the float64 op, and its argument checks.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>

#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/group_norm_kernels.hpp"
#include "ops/cpu/kernels.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;
using testing::within_ulps;
using testing::within_ulps_each;

struct Case {
  Shape shape;  // (N, C, *)
  int64_t groups;
  std::string kind = "ordinary";
};

int64_t spatial_of(const Shape& shape) {
  return shape.product(2, shape.rank());
}

// x's rows for a kind of content, as the LayerNorm targets test them.
std::vector<float> make_x(const Case& c, uint32_t seed) {
  const auto count = static_cast<size_t>(c.shape.numel());
  auto x = random_floats(count, seed, -2.0f, 3.0f);
  const int64_t row = count / static_cast<size_t>(c.shape[0] * c.groups);
  if (c.kind == "large_mean") {
    for (float& v : x) v = 1e6f + v * 1e-1f;
  } else if (c.kind == "constant") {
    for (float& v : x) v = 42.5f;
  } else if (c.kind == "huge") {
    for (float& v : x) v *= 1e37f;
  } else if (c.kind == "nan_row") {
    x[static_cast<size_t>(row + row / 2)] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

// The float64 definition, written here from the PyTorch documentation's formula.
struct Want {
  std::vector<double> y, y_scale, mean, rstd, dx, dx_scale, dgamma, dgamma_scale, dbeta,
      dbeta_scale;
};
Want group_norm_float64(const std::vector<float>& x, const std::vector<float>& dy,
                        const std::vector<float>& gamma, const std::vector<float>& beta,
                        const Case& c, double eps) {
  const int64_t n_count = c.shape[0], channels = c.shape[1], spatial = spatial_of(c.shape);
  const int64_t per_group = channels / c.groups, dim = per_group * spatial;
  Want w;
  w.y.resize(x.size());
  w.y_scale.resize(x.size());
  w.dx.resize(x.size());
  w.dx_scale.resize(x.size());
  w.dgamma.assign(channels, 0);
  w.dgamma_scale.assign(channels, 0);
  w.dbeta.assign(channels, 0);
  w.dbeta_scale.assign(channels, 0);
  for (int64_t n = 0; n < n_count; ++n) {
    for (int64_t g = 0; g < c.groups; ++g) {
      const int64_t base = (n * c.groups + g) * dim;
      const auto channel = [&](int64_t i) { return g * per_group + i / spatial; };
      double mean = 0, var = 0;
      for (int64_t i = 0; i < dim; ++i) mean += x[base + i];
      mean /= double(dim);
      for (int64_t i = 0; i < dim; ++i) var += (x[base + i] - mean) * (x[base + i] - mean);
      var /= double(dim);
      const double rstd = 1 / std::sqrt(var + eps);
      w.mean.push_back(mean);
      w.rstd.push_back(rstd);
      double mean_g = 0, mean_gx = 0;
      for (int64_t i = 0; i < dim; ++i) {
        const int64_t ch = channel(i);
        const double x_hat = x[base + i] == mean ? 0.0 : (x[base + i] - mean) * rstd;
        w.y[base + i] = x_hat * gamma[ch] + beta[ch];
        w.y_scale[base + i] = std::fabs(x_hat * gamma[ch]) + std::fabs(beta[ch]);
        const double gi = double(dy[base + i]) * gamma[ch];
        mean_g += gi / double(dim);
        mean_gx += gi * x_hat / double(dim);
        w.dgamma[ch] += double(dy[base + i]) * x_hat;
        w.dgamma_scale[ch] += std::fabs(double(dy[base + i]) * x_hat);
        w.dbeta[ch] += dy[base + i];
        w.dbeta_scale[ch] += std::fabs(dy[base + i]);
      }
      for (int64_t i = 0; i < dim; ++i) {
        const int64_t ch = channel(i);
        const double x_hat = x[base + i] == mean ? 0.0 : (x[base + i] - mean) * rstd;
        const double gi = double(dy[base + i]) * gamma[ch];
        w.dx[base + i] = rstd * (gi - mean_g - x_hat * mean_gx);
        w.dx_scale[base + i] =
            rstd * (std::fabs(gi) + std::fabs(mean_g) + std::fabs(x_hat * mean_gx));
      }
    }
  }
  return w;
}

struct Got {
  std::vector<float> y, mean, rstd, dx, dgamma, dbeta;
};

// values (N, C, *) in channels-first order, rearranged to (N, *, C), or back with to_last false.
std::vector<float> reordered(const std::vector<float>& values, const Shape& shape, bool to_last) {
  const int64_t channels = shape[1], spatial = spatial_of(shape);
  std::vector<float> out(values.size());
  for (int64_t n = 0; n < shape[0]; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t p = 0; p < spatial; ++p) {
        const int64_t first = (n * channels + c) * spatial + p,
                      last = (n * spatial + p) * channels + c;
        out[to_last ? last : first] = values[to_last ? first : last];
      }
    }
  }
  return out;
}

// (N, C, *) as (N, *, C): the shape of the same tensor stored channels last.
Shape channels_last_shape(const Shape& shape) {
  std::vector<int64_t> dims{shape[0]};
  for (int d = 2; d < shape.rank(); ++d) dims.push_back(shape[d]);
  dims.push_back(shape[1]);
  return Shape(dims);
}

// How run_group_norm stores the tensors: as c.shape says, or in (N, *, C) order through the
// public ops (which take the channels-last kernels for samples of at least
// kChannelsLastMinSampleValues values, copies otherwise), or the same with the channels-last
// kernels (forward and backward) called directly, whatever the sample's size.
enum class Order { channels_first, channels_last, channels_last_kernel };

// GroupNorm forward and backward in `order` (the results are put back in channels-first order).
Got run_group_norm(const std::vector<float>& x_first, const std::vector<float>& dy_first,
                   const std::vector<float>& gamma, const std::vector<float>& beta, const Case& c,
                   float eps, Order order = Order::channels_first) {
  const bool channels_last = order != Order::channels_first;
  const auto x = channels_last ? reordered(x_first, c.shape, true) : x_first;
  const auto dy = channels_last ? reordered(dy_first, c.shape, true) : dy_first;
  const Shape shape = channels_last ? channels_last_shape(c.shape) : c.shape;
  const int64_t channels = c.shape[1];
  const Shape stats_shape{c.shape[0], c.groups};
  Got got{std::vector<float>(x.size()),
          std::vector<float>(stats_shape.numel()),
          std::vector<float>(stats_shape.numel()),
          std::vector<float>(x.size()),
          std::vector<float>(channels),
          std::vector<float>(channels)};
  GroupNormOptions options;
  options.num_groups = c.groups;
  options.gamma = ConstView{gamma.data(), {channels}};
  options.beta = ConstView{beta.data(), {channels}};
  options.eps = eps;
  options.channels_last = channels_last;
  group_norm({x.data(), shape}, {got.y.data(), shape}, options,
             NormStats{{got.mean.data(), stats_shape}, {got.rstd.data(), stats_shape}});
  group_norm_backward({dy.data(), shape}, {x.data(), shape},
                      {{got.dx.data(), shape},
                       MutableView{got.dgamma.data(), {channels}},
                       MutableView{got.dbeta.data(), {channels}}},
                      options);
  if (order == Order::channels_last_kernel) {
    // NaN first, so that an output the kernels leave unwritten fails the comparisons.
    for (auto* out : {&got.y, &got.mean, &got.rstd, &got.dx, &got.dgamma, &got.dbeta}) {
      std::fill(out->begin(), out->end(), std::numeric_limits<float>::quiet_NaN());
    }
    cpu::GroupNormForward args;
    args.x = x.data();
    args.y = got.y.data();
    args.gamma = gamma.data();
    args.beta = beta.data();
    args.mean = got.mean.data();
    args.rstd = got.rstd.data();
    args.layout = {c.shape[0], channels, c.groups, spatial_of(c.shape)};
    args.eps = eps;
    cpu::group_norm_forward_channels_last(args);
    cpu::GroupNormBackward grad_args;
    grad_args.dy = dy.data();
    grad_args.x = x.data();
    grad_args.dx = got.dx.data();
    grad_args.gamma = gamma.data();
    grad_args.dgamma = got.dgamma.data();
    grad_args.dbeta = got.dbeta.data();
    grad_args.layout = args.layout;
    grad_args.eps = eps;
    cpu::group_norm_backward_channels_last(grad_args);
  }
  if (channels_last) {
    got.y = reordered(got.y, c.shape, false);
    got.dx = reordered(got.dx, c.shape, false);
  }
  return got;
}

std::vector<Case> cases() {
  std::vector<Case> all = {
      {{2, 4}, 2},        {{3, 6, 5}, 3},       {{2, 6, 5}, 6},       {{2, 8, 4, 4}, 4},
      {{1, 32, 7, 9}, 8}, {{2, 3, 2, 2, 3}, 1}, {{4, 64, 17}, 32},    {{2, 16, 33, 33}, 4},
      {{1, 4, 4100}, 2},  {{3, 12, 1}, 4},      {{2, 512, 8, 8}, 32}, {{5, 10, 3}, 5},
  };
  for (const char* kind : {"large_mean", "constant", "huge", "nan_row"}) {
    all.push_back({{2, 6, 9}, 3, kind});
    all.push_back({{3, 4, 100}, 2, kind});
  }
  return all;
}

class GroupNormEveryTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override { cpu::force_target(0); }
};

// Every case of cases() against the float64 definition, stored in `order`.
void expect_cases_match_float64(Order order) {
  uint32_t seed = 11;
  for (const Case& c : cases()) {
    const int64_t channels = c.shape[1];
    const auto x = make_x(c, seed++);
    const auto dy = random_floats(x.size(), seed++, -1.0f, 1.0f);
    const auto gamma = random_floats(static_cast<size_t>(channels), seed++, 0.5f, 2.0f);
    const auto beta = random_floats(static_cast<size_t>(channels), seed++, -1.0f, 1.0f);
    const double eps = c.kind == "constant" ? 0.0 : 1e-5;
    const Got got = run_group_norm(x, dy, gamma, beta, c, static_cast<float>(eps), order);
    const Want want = group_norm_float64(x, dy, gamma, beta, c, eps);
    SCOPED_TRACE("shape " + c.shape.to_string() + " groups " + std::to_string(c.groups) + " " +
                 c.kind + " order " + std::to_string(static_cast<int>(order)) + " on " +
                 cpu::current_target_name());
    if (c.kind == "nan_row") {
      // Row 1 holds the NaN: its outputs are NaN, every other row is exact.
      const int64_t dim = c.shape.numel() / (c.shape[0] * c.groups);
      for (int64_t i = 0; i < c.shape.numel(); ++i) {
        const bool poisoned = i / dim == 1;
        EXPECT_EQ(std::isnan(got.y[i]), poisoned) << "y[" << i << "]";
        EXPECT_EQ(std::isnan(got.dx[i]), poisoned) << "dx[" << i << "]";
      }
      continue;
    }
    if (c.kind == "constant") {
      // eps = 0 and a constant row: x_hat is exactly 0, so y is exactly beta.
      const int64_t spatial = spatial_of(c.shape);
      for (int64_t i = 0; i < c.shape.numel(); ++i) {
        ASSERT_EQ(got.y[i], beta[(i / spatial) % channels]) << "y[" << i << "]";
      }
      continue;
    }
    EXPECT_TRUE(within_ulps_each(got.y, want.y, 3, want.y_scale));
    EXPECT_TRUE(within_ulps(got.mean, want.mean, 1, c.kind == "large_mean" ? 1e6 : 5.0));
    EXPECT_TRUE(within_ulps(got.rstd, want.rstd, 2));
    EXPECT_TRUE(within_ulps_each(got.dx, want.dx, 4, want.dx_scale));
    EXPECT_TRUE(within_ulps_each(got.dgamma, want.dgamma, 4, want.dgamma_scale));
    EXPECT_TRUE(within_ulps_each(got.dbeta, want.dbeta, 4, want.dbeta_scale));
  }
}

TEST_P(GroupNormEveryTarget, MatchesFloat64ForwardAndBackward) {
  expect_cases_match_float64(Order::channels_first);
}

// Channels last (PyTorch's channels_last): through the public ops, and with the column-kernel
// paths (BatchNorm's kernels), forward and backward, on every case whatever its size; the same
// bounds.
TEST_P(GroupNormEveryTarget, ChannelsLastMatchesFloat64ForwardAndBackward) {
  expect_cases_match_float64(Order::channels_last);
  expect_cases_match_float64(Order::channels_last_kernel);
}

// Rows whose values span many decades (each N(0, 1) times 10^k, k drawn from a random range
// within [-30, 30]), where dx's means cancel across scales: dx within 4 ulp of its terms on
// every target. (The audit's draws, which put dx 8 ulp out while the means were summed over the
// forward's float32 x_hat, are checked against long double in tests/python/
// test_python_functions.py; this float64 definition is too coarse to see that.)
TEST_P(GroupNormEveryTarget, DxHoldsItsBoundOnRowsSpanningManyDecades) {
  std::mt19937 engine(122);
  for (int draw = 0; draw < 40; ++draw) {
    std::uniform_int_distribution<int64_t> length(5, 1500), decade(-30, 30);
    const Case c{{2, 4, length(engine)}, 2};
    int64_t low = decade(engine), high = decade(engine);
    if (low > high) std::swap(low, high);
    std::uniform_int_distribution<int64_t> exponent(low, high);
    std::normal_distribution<float> normal;
    std::vector<float> x(static_cast<size_t>(c.shape.numel()));
    for (float& v : x) v = normal(engine) * static_cast<float>(std::pow(10.0, exponent(engine)));
    std::vector<float> dy(x.size()), gamma(4), beta(4);
    for (float& v : dy) v = normal(engine);
    for (float& v : gamma) v = normal(engine);
    for (float& v : beta) v = normal(engine);
    SCOPED_TRACE("draw " + std::to_string(draw) + " length " + std::to_string(c.shape[2]) +
                 " decades " + std::to_string(low) + " to " + std::to_string(high));
    const Got got = run_group_norm(x, dy, gamma, beta, c, 1e-5f);
    const Want want = group_norm_float64(x, dy, gamma, beta, c, static_cast<double>(1e-5f));
    EXPECT_TRUE(within_ulps_each(got.dx, want.dx, 4, want.dx_scale));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, GroupNormEveryTarget,
                         ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target) {
                           return cpu::target_name(target.param);
                         });

// InstanceNorm is GroupNorm with one channel per group; GroupNorm with one group and no affine
// is LayerNorm over (C, *): the engine's own rows, bit for bit.
TEST(GroupNorm, OneGroupWithoutAffineIsLayerNormBitForBit) {
  const Shape shape{3, 8, 5, 7};
  const auto x = random_floats(static_cast<size_t>(shape.numel()), 5, -4.0f, 9.0f);
  std::vector<float> got(x.size()), want(x.size());
  group_norm({x.data(), shape}, {got.data(), shape}, {{}, 1});
  layer_norm({x.data(), shape}, Shape{8, 5, 7}, {want.data(), shape});
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
}

// Channels last: samples of 18432 values run whole on the threads, samples of 2^18 one at a
// time with their rows spread (group_norm_channels_last.cpp, kSpreadSampleMinValues).
TEST(GroupNorm, ParameterGradientsAreIdenticalForAnyThreadCount) {
  const int saved = omp_get_max_threads();
  for (const Shape& shape : {Shape{16, 32, 24, 24}, Shape{3, 64, 64, 64}}) {
    const auto x = random_floats(static_cast<size_t>(shape.numel()), 21, -3.0f, 3.0f);
    const auto dy = random_floats(x.size(), 22, -1.0f, 1.0f);
    const auto gamma = random_floats(static_cast<size_t>(shape[1]), 23, 0.5f, 1.5f);
    const auto beta = random_floats(static_cast<size_t>(shape[1]), 24, -1.0f, 1.0f);
    for (const bool channels_last : {false, true}) {
      SCOPED_TRACE(shape.to_string() + (channels_last ? " channels last" : ""));
      std::vector<Got> runs;
      for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        runs.push_back(
            run_group_norm(x, dy, gamma, beta, {shape, 8}, 1e-5f,
                           channels_last ? Order::channels_last : Order::channels_first));
      }
      for (size_t r = 1; r < runs.size(); ++r) {
        EXPECT_EQ(runs[r].dgamma, runs[0].dgamma);
        EXPECT_EQ(runs[r].dbeta, runs[0].dbeta);
        EXPECT_EQ(runs[r].dx, runs[0].dx);
        EXPECT_EQ(runs[r].y, runs[0].y);
        EXPECT_EQ(runs[r].mean, runs[0].mean);
        EXPECT_EQ(runs[r].rstd, runs[0].rstd);
      }
    }
  }
  omp_set_num_threads(saved);
}

// The channels-last calls without a kernel of their own (y stored in another type than x; the
// float64 op) run the channels-first kernels between copies: the channels-first results, bit for
// bit, in the other order.
TEST(GroupNorm, ChannelsLastByCopiesIsTheChannelsFirstResultReordered) {
  const Shape shape{2, 6, 3, 5};
  const auto wide = random_floats(static_cast<size_t>(shape.numel()), 51, -2.0f, 2.0f);
  std::vector<uint16_t> x_first(wide.size());
  for (size_t i = 0; i < wide.size(); ++i) x_first[i] = to_bfloat16(wide[i]).bits;
  std::vector<uint16_t> x_last(wide.size());
  std::vector<float> stored(wide.size());
  for (size_t i = 0; i < wide.size(); ++i) stored[i] = to_float(bfloat16{x_first[i]});
  const auto stored_last = reordered(stored, shape, true);
  for (size_t i = 0; i < wide.size(); ++i) x_last[i] = to_bfloat16(stored_last[i]).bits;
  GroupNormOptions options;
  options.num_groups = 3;
  std::vector<float> y_first(wide.size()), y_last(wide.size());
  group_norm(AnyConstView(x_first.data(), shape, DType::bfloat16), {y_first.data(), shape},
             options);
  options.channels_last = true;
  const Shape last_shape = channels_last_shape(shape);
  group_norm(AnyConstView(x_last.data(), last_shape, DType::bfloat16), {y_last.data(), last_shape},
             options);
  EXPECT_EQ(reordered(y_last, shape, false), y_first);

  const std::vector<double> x64(stored.begin(), stored.end());
  const auto last = reordered(stored, shape, true);
  const std::vector<double> x64_last(last.begin(), last.end());
  std::vector<double> y64_first(x64.size()), y64_last(x64.size());
  float64::GroupNormOptions options64;
  options64.num_groups = 3;
  float64::group_norm({x64.data(), shape}, {y64_first.data(), shape}, options64);
  options64.channels_last = true;
  float64::group_norm({x64_last.data(), last_shape}, {y64_last.data(), last_shape}, options64);
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t c = 0; c < 6; ++c) {
      for (int64_t p = 0; p < 15; ++p) {
        ASSERT_EQ(y64_last[(n * 15 + p) * 6 + c], y64_first[(n * 6 + c) * 15 + p]);
      }
    }
  }
}

// 16-bit x, y, dy and dx: the float64 result on the stored inputs, rounded once.
TEST(GroupNorm, SixteenBitStorageIsTheFloat64ResultRoundedOnce) {
  const Case c{{2, 6, 3, 5}, 3};
  const int64_t channels = 6;
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    const auto wide = random_floats(static_cast<size_t>(c.shape.numel()), 31, -2.0f, 2.0f);
    const auto dy_wide = random_floats(wide.size(), 32, -1.0f, 1.0f);
    std::vector<uint16_t> x(wide.size()), dy(wide.size()), y(wide.size()), dx(wide.size());
    std::vector<float> x_stored, dy_stored;
    for (size_t i = 0; i < wide.size(); ++i) {
      x[i] = dtype == DType::bfloat16 ? to_bfloat16(wide[i]).bits : to_float16(wide[i]).bits;
      dy[i] = dtype == DType::bfloat16 ? to_bfloat16(dy_wide[i]).bits : to_float16(dy_wide[i]).bits;
      x_stored.push_back(dtype == DType::bfloat16 ? to_float(bfloat16{x[i]})
                                                  : to_float(float16{x[i]}));
      dy_stored.push_back(dtype == DType::bfloat16 ? to_float(bfloat16{dy[i]})
                                                   : to_float(float16{dy[i]}));
    }
    const auto gamma = random_floats(channels, 33, 0.5f, 2.0f);
    const auto beta = random_floats(channels, 34, -1.0f, 1.0f);
    GroupNormOptions options;
    options.num_groups = c.groups;
    options.gamma = ConstView{gamma.data(), {channels}};
    options.beta = ConstView{beta.data(), {channels}};
    std::vector<float> dgamma(channels), dbeta(channels);
    group_norm(AnyConstView(x.data(), c.shape, dtype), AnyMutableView(y.data(), c.shape, dtype),
               options);
    group_norm_backward(
        AnyConstView(dy.data(), c.shape, dtype), AnyConstView(x.data(), c.shape, dtype),
        {AnyMutableView(dx.data(), c.shape, dtype), MutableView{dgamma.data(), {channels}},
         MutableView{dbeta.data(), {channels}}},
        options);
    const Want want = group_norm_float64(x_stored, dy_stored, gamma, beta, c, 1e-5);
    const int bits = dtype == DType::bfloat16 ? 8 : 11;
    for (size_t i = 0; i < wide.size(); ++i) {
      const float got_y =
          dtype == DType::bfloat16 ? to_float(bfloat16{y[i]}) : to_float(float16{y[i]});
      const float got_dx =
          dtype == DType::bfloat16 ? to_float(bfloat16{dx[i]}) : to_float(float16{dx[i]});
      // Half a 16-bit ulp of the rounding plus float32's few ulp of the terms.
      const double y_ulp = std::ldexp(want.y_scale[i] + 1e-30, -bits);
      const double dx_ulp = std::ldexp(want.dx_scale[i] + 1e-30, -bits);
      EXPECT_LE(std::fabs(got_y - want.y[i]), y_ulp) << "y[" << i << "]";
      EXPECT_LE(std::fabs(got_dx - want.dx[i]), dx_ulp) << "dx[" << i << "]";
    }
    EXPECT_TRUE(within_ulps_each(dgamma, want.dgamma, 4, want.dgamma_scale));
    EXPECT_TRUE(within_ulps_each(dbeta, want.dbeta, 4, want.dbeta_scale));
  }
}

// The float64 op's gradients against central differences of sum(y * w).
TEST(GroupNorm, Float64BackwardMatchesFiniteDifferences) {
  const Shape shape{2, 4, 3};
  const int64_t channels = 4;
  const auto xf = random_floats(24, 41, -2.0f, 2.0f);
  const auto wf = random_floats(24, 42, -1.0f, 1.0f);
  const auto gf = random_floats(4, 43, 0.5f, 1.5f);
  const auto bf = random_floats(4, 44, -0.5f, 0.5f);
  const std::vector<double> x(xf.begin(), xf.end()), w(wf.begin(), wf.end()),
      gamma(gf.begin(), gf.end()), beta(bf.begin(), bf.end());
  const auto loss = [&](const std::vector<double>& xs, const std::vector<double>& gs,
                        const std::vector<double>& bs) {
    std::vector<double> y(xs.size());
    float64::GroupNormOptions options;
    options.num_groups = 2;
    options.gamma = float64::ConstView{gs.data(), {channels}};
    options.beta = float64::ConstView{bs.data(), {channels}};
    float64::group_norm({xs.data(), shape}, {y.data(), shape}, options);
    return testing::dot(y, w);
  };
  std::vector<double> dx(24), dgamma(4), dbeta(4);
  float64::GroupNormOptions options;
  options.num_groups = 2;
  options.gamma = float64::ConstView{gamma.data(), {channels}};
  options.beta = float64::ConstView{beta.data(), {channels}};
  float64::group_norm_backward({w.data(), shape}, {x.data(), shape},
                               {{dx.data(), shape},
                                float64::MutableView{dgamma.data(), {channels}},
                                float64::MutableView{dbeta.data(), {channels}}},
                               options);
  EXPECT_TRUE(testing::matches_finite_differences(
      [&](const std::vector<double>& p) { return loss(p, gamma, beta); }, x, dx));
  EXPECT_TRUE(testing::matches_finite_differences(
      [&](const std::vector<double>& p) { return loss(x, p, beta); }, gamma, dgamma));
  EXPECT_TRUE(testing::matches_finite_differences(
      [&](const std::vector<double>& p) { return loss(x, gamma, p); }, beta, dbeta));
}

void expect_refused(const std::string& message, const std::function<void()>& call) {
  try {
    call();
    ADD_FAILURE() << "accepted, expected: " << message;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
  }
}

TEST(GroupNorm, RefusesBadArgumentsAndWritesNothing) {
  std::vector<float> x(24, 1.0f), y(24, -7.0f), gamma(6, 1.0f), stats(8, -7.0f);
  const Shape shape{2, 6, 2};
  expect_refused("num_groups is 4, expected a divisor of the 6 channels", [&] {
    group_norm({x.data(), shape}, {y.data(), shape}, {{}, 4});
  });
  expect_refused("num_groups is 0", [&] {
    group_norm({x.data(), shape}, {y.data(), shape}, {{}, 0});
  });
  expect_refused("x has shape [24], expected (N, C, *)", [&] {
    group_norm({x.data(), Shape{24}}, {y.data(), Shape{24}}, {{}, 1});
  });
  expect_refused("gamma has shape [5], expected [6]", [&] {
    group_norm({x.data(), shape}, {y.data(), shape}, {{.gamma = ConstView{gamma.data(), {5}}}, 3});
  });
  expect_refused("eps", [&] {
    group_norm({x.data(), shape}, {y.data(), shape},
               {{.eps = std::numeric_limits<float>::infinity()}, 3});
  });
  expect_refused("mean has shape [8], expected [2, 3]", [&] {
    group_norm({x.data(), shape}, {y.data(), shape}, {{}, 3},
               NormStats{{stats.data(), {8}}, {stats.data(), {8}}});
  });
  // The description is the centring kind's: another kind, or a field only RMSNorm has, is
  // refused by name.
  expect_refused("norm is rms_norm, expected layer_norm", [&] {
    group_norm({x.data(), shape}, {y.data(), shape}, {{.norm = NormKind::rms_norm}, 3});
  });
  expect_refused("zero_centered_gamma", [&] {
    group_norm({x.data(), shape}, {y.data(), shape},
               {{.gamma = ConstView{gamma.data(), {6}}, .zero_centered_gamma = true}, 3});
  });
  EXPECT_EQ(y, std::vector<float>(24, -7.0f));
  EXPECT_EQ(stats, std::vector<float>(8, -7.0f));
}

// An absent eps is GroupNorm's default, PyTorch's 1e-5, and an explicit layer_norm kind is the
// same call: the description's defaults are the centring kind's.
TEST(GroupNorm, DefaultEpsIsPyTorchs) {
  const Shape shape{2, 6, 3};
  const auto x = random_floats(static_cast<size_t>(shape.numel()), 11, -1e-3f, 1e-3f);
  std::vector<float> by_default(x.size()), given(x.size()), named(x.size()), other(x.size());
  group_norm({x.data(), shape}, {by_default.data(), shape}, {{}, 2});
  group_norm({x.data(), shape}, {given.data(), shape}, {{.eps = 1e-5f}, 2});
  group_norm({x.data(), shape}, {named.data(), shape}, {{.norm = NormKind::layer_norm}, 2});
  group_norm({x.data(), shape}, {other.data(), shape}, {{.eps = 1e-6f}, 2});
  EXPECT_EQ(by_default, given);
  EXPECT_EQ(by_default, named);
  EXPECT_NE(by_default, other);  // rows this small are eps's: the default is not another value
}

}  // namespace
}  // namespace addnorm

namespace addnorm {
namespace {

// y may be x, dx may be dy or x: the same bits as into separate memory.
TEST(GroupNorm, InPlaceCallsGiveTheSameBits) {
  const Shape shape{3, 8, 37};
  const int64_t channels = 8;
  const auto x = testing::random_floats(static_cast<size_t>(shape.numel()), 51, -2.0f, 4.0f);
  const auto dy = testing::random_floats(x.size(), 52, -1.0f, 1.0f);
  const auto gamma = testing::random_floats(channels, 53, 0.5f, 2.0f);
  const auto beta = testing::random_floats(channels, 54, -1.0f, 1.0f);
  GroupNormOptions options;
  options.num_groups = 4;
  options.gamma = ConstView{gamma.data(), {channels}};
  options.beta = ConstView{beta.data(), {channels}};
  std::vector<float> y(x.size()), dx(x.size());
  group_norm({x.data(), shape}, {y.data(), shape}, options);
  group_norm_backward({dy.data(), shape}, {x.data(), shape}, {{dx.data(), shape}}, options);

  std::vector<float> in_place = x;
  group_norm({in_place.data(), shape}, {in_place.data(), shape}, options);
  EXPECT_EQ(in_place, y);
  std::vector<float> over_dy = dy;
  group_norm_backward({over_dy.data(), shape}, {x.data(), shape}, {{over_dy.data(), shape}},
                      options);
  EXPECT_EQ(over_dy, dx);
  std::vector<float> over_x = x;
  group_norm_backward({dy.data(), shape}, {over_x.data(), shape}, {{over_x.data(), shape}},
                      options);
  EXPECT_EQ(over_x, dx);
}

}  // namespace
}  // namespace addnorm

namespace addnorm {
namespace {

// An output over 8 MiB is streamed by the affine pass (runs of 150 x 151 values, so most start
// unaligned): the same float64 bounds as the in-cache path, on every target.
TEST_P(GroupNormEveryTarget, StreamedOutputMatchesFloat64) {
  const Case c{{2, 48, 150, 151}, 8};
  const auto x = make_x(c, 61);
  const auto dy = testing::random_floats(x.size(), 62, -1.0f, 1.0f);
  const auto gamma = testing::random_floats(48, 63, 0.5f, 2.0f);
  const auto beta = testing::random_floats(48, 64, -1.0f, 1.0f);
  ASSERT_GE(x.size() * sizeof(float), size_t{8} << 20);
  const Got got = run_group_norm(x, dy, gamma, beta, c, 1e-5f);
  const Want want = group_norm_float64(x, dy, gamma, beta, c, 1e-5);
  // The worst error in units of the float32 ulp of each element's scale (within_ulps_each's
  // measure, without its per-element messages: 2 million elements).
  const auto worst_ulps = [](const std::vector<float>& values, const std::vector<double>& exact,
                             const std::vector<double>& scale) {
    double worst = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const double unit = testing::float_ulp(exact[i]) + testing::float_ulp(scale[i]);
      worst = std::max(worst, std::fabs(values[i] - exact[i]) / unit);
    }
    return worst;
  };
  EXPECT_LE(worst_ulps(got.y, want.y, want.y_scale), 3.0);
  EXPECT_LE(worst_ulps(got.dx, want.dx, want.dx_scale), 8.0);
}

}  // namespace
}  // namespace addnorm
