// The fast kernels' internal paths, on every compiled SIMD target:
// - streaming (non-temporal) stores, which the public ops use only for outputs of 8 MiB or
//   more, give bitwise the same results as ordinary stores, at every alignment; so do the
//   wider row groups a streamed float32 backward takes (eight rows, not four);
// - the backward's float32 pass 2 keeps each dx within a few ulp of its own terms (the
//   numerics contract), in groups of rows and in rows that fall back to float64 lanes;
// - a public call above the streaming threshold equals the same rows run without streaming.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::float_ulp;
using testing::random_floats;

class KernelPaths : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override { cpu::force_target(0); }
};

// A buffer whose data starts `shift` floats past a 64-byte boundary.
struct Shifted {
  Shifted(size_t count, int64_t shift) : storage(count + 32), data(aligned() + shift) {}
  float* aligned() {
    const auto address = reinterpret_cast<uintptr_t>(storage.data());
    return storage.data() + (64 - address % 64) % 64 / sizeof(float);
  }
  std::vector<float> storage;
  float* data;
};

TEST_P(KernelPaths, StreamingStoresGiveTheSameBits) {
  // Two eight-row groups and a row: row 5, all zeros, fails the float32 pass (a zero spread), so
  // its group goes a row at a time. Streamed short rows (D = 16, 64, 128, 1024 here) sum the next
  // group a row at a time between this group's outputs (kInterleaveShortRows), the last group's
  // one row and seven spare lanes included; not streamed, D = 1024 sums each group just before
  // its outputs.
  const int64_t rows = 17;
  for (int64_t dim : {5, 16, 37, 64, 128, 300, 1024}) {
    for (int64_t shift : {0, 1, 3}) {
      for (int variant = 0; variant < 4; ++variant) {
        SCOPED_TRACE("dim " + std::to_string(dim) + " shift " + std::to_string(shift) +
                     " variant " + std::to_string(variant));
        const auto count = static_cast<size_t>(rows * dim);
        auto x = random_floats(count, 31, -2.0f, 3.0f);
        std::fill(x.begin() + 5 * dim, x.begin() + 6 * dim, 0.0f);
        const auto r = random_floats(count, 32);
        const auto dy = random_floats(count, 33);
        const auto gamma = random_floats(static_cast<size_t>(dim), 34, 0.5f, 1.5f);
        const auto beta = random_floats(static_cast<size_t>(dim), 35);
        const bool residual = variant % 2 == 1, centre = variant < 2;
        std::vector<std::vector<float>> outputs;
        std::vector<std::vector<double>> partials;  // dgamma's then dbeta's, compared bit for bit
        for (bool stream : {false, true}) {
          Shifted y(count, shift), h(count, shift), dx(count, shift);
          std::vector<float> mean(rows), rstd(rows);
          cpu::NormForward f;
          f.x = x.data();
          f.residual = residual ? r.data() : nullptr;
          f.h = residual ? h.data : nullptr;
          f.gamma = gamma.data();
          f.beta = centre ? beta.data() : nullptr;
          f.y = y.data;
          f.mean = mean.data();
          f.rstd = rstd.data();
          f.rows = rows;
          f.dim = dim;
          f.eps = 1e-5;
          f.norm = centre ? NormKind::layer_norm : NormKind::rms_norm;
          f.stream_outputs = stream;
          cpu::norm_forward_range(f, 0, rows);
          cpu::NormBackward b;
          b.dy = dy.data();
          b.x = x.data();
          b.gamma = gamma.data();
          b.dh_next = residual ? r.data() : nullptr;
          b.dx = dx.data;
          b.rows = rows;
          b.dim = dim;
          b.eps = 1e-5;
          b.norm = centre ? NormKind::layer_norm : NormKind::rms_norm;
          b.stream_outputs = stream;
          std::vector<double> dgamma(static_cast<size_t>(dim)), dbeta(static_cast<size_t>(dim));
          cpu::norm_backward_range(b, 0, rows, dgamma.data(), dbeta.data());
          std::vector<float> all(y.data, y.data + count);
          if (residual) all.insert(all.end(), h.data, h.data + count);
          all.insert(all.end(), dx.data, dx.data + count);
          all.insert(all.end(), mean.begin(), mean.end());
          all.insert(all.end(), rstd.begin(), rstd.end());
          outputs.push_back(all);
          dgamma.insert(dgamma.end(), dbeta.begin(), dbeta.end());
          partials.push_back(dgamma);
        }
        EXPECT_EQ(outputs[0], outputs[1]);
        EXPECT_EQ(std::memcmp(partials[0].data(), partials[1].data(),
                              partials[0].size() * sizeof(double)),
                  0);
      }
    }
  }
}

TEST_P(KernelPaths, BackwardDxIsWithinAFewUlpOfItsTerms) {
  // 13 rows: three groups of four and a single row. Row 5 is tiny with eps = 0, so its rstd
  // (about 1e30) is beyond the float32 pass and its group runs row by row, partly in float64.
  for (const std::string kind : {"ordinary", "large_mean", "tiny_row"}) {
    for (int64_t dim : {7, 64, 333}) {
      SCOPED_TRACE(kind + " dim " + std::to_string(dim));
      const int64_t rows = 13;
      auto x = random_floats(static_cast<size_t>(rows * dim), 41, -2.0f, 3.0f);
      const auto dy = random_floats(x.size(), 42);
      const auto gamma = random_floats(static_cast<size_t>(dim), 43, 0.5f, 1.5f);
      const double eps = kind == "tiny_row" ? 0.0 : 1e-5;
      if (kind == "large_mean") {
        for (float& v : x) v = 3e4f + v;
      } else if (kind == "tiny_row") {
        for (int64_t i = 0; i < dim; ++i) x[static_cast<size_t>(5 * dim + i)] *= 1e-30f;
      }
      const Shape shape{rows, dim}, normalized{dim};
      std::vector<float> dx(x.size()), dg(static_cast<size_t>(dim));
      layer_norm_backward(
          {dy.data(), shape}, {x.data(), shape}, normalized,
          {{dx.data(), shape}, MutableView{dg.data(), normalized}, std::nullopt},
          {.gamma = ConstView{gamma.data(), normalized}, .eps = static_cast<float>(eps)});
      const testing::WantDx want = testing::norm_dx(x, dy, gamma, rows, dim, eps, true);
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double allowed = 3 * (float_ulp(want.dx[i]) + float_ulp(want.scale[i]));
        worst = std::max(worst, std::fabs(dx[i] - want.dx[i]) / allowed);
      }
      EXPECT_LE(worst, 1.0) << "worst error in units of the allowed bound";
    }
  }
}

// Rows of values near FLT_MAX whose mean is near FLT_MAX too: x - mean overflows float32 for
// the one negative element, so these rows must take the float64 lanes, forward and backward.
TEST_P(KernelPaths, ValuesNearFloatMaxDoNotOverflow) {
  const int64_t rows = 3, dim = 37;
  std::vector<float> x(static_cast<size_t>(rows * dim), 3e38f);
  for (int64_t row = 0; row < rows; ++row) {
    x[static_cast<size_t>(row * dim + 5 + row)] = -3e38f;
    x[static_cast<size_t>(row * dim + 9)] = 2.5e38f;
  }
  const auto dy = random_floats(x.size(), 44);
  const Shape shape{rows, dim}, normalized{dim};
  std::vector<float> y(x.size()), dx(x.size());
  layer_norm({x.data(), shape}, normalized, {y.data(), shape});
  layer_norm_backward({dy.data(), shape}, {x.data(), shape}, normalized,
                      {{dx.data(), shape}, std::nullopt, std::nullopt});
  const std::vector<float> ones(static_cast<size_t>(dim), 1.0f);
  const testing::WantDx want_dx = testing::norm_dx(x, dy, ones, rows, dim, 1e-5, true);
  for (int64_t row = 0; row < rows; ++row) {
    double mean = 0, variance = 0;
    for (int64_t i = 0; i < dim; ++i) mean += x[static_cast<size_t>(row * dim + i)] / double(dim);
    for (int64_t i = 0; i < dim; ++i) {
      variance += std::pow(x[static_cast<size_t>(row * dim + i)] - mean, 2) / double(dim);
    }
    for (int64_t i = 0; i < dim; ++i) {
      const auto at = static_cast<size_t>(row * dim + i);
      const double want = (x[at] - mean) / std::sqrt(variance + 1e-5);
      ASSERT_TRUE(std::isfinite(y[at])) << at;
      EXPECT_LE(std::fabs(y[at] - want), 4 * (float_ulp(want) + float_ulp(4.0))) << at;
      EXPECT_LE(std::fabs(dx[at] - want_dx.dx[at]),
                4 * (float_ulp(want_dx.dx[at]) + float_ulp(want_dx.scale[at])))
          << at;
    }
  }
}

// Gradients near the float32 range: g = dy * gamma, g - mean(g) or x_hat * mean(g x_hat)
// would overflow in float32 lanes though dx itself is finite, so these rows must take the
// float64 pass 2 (found in review: dx came out Inf or NaN).
TEST_P(KernelPaths, HugeGradientsDoNotOverflow) {
  struct Row {
    std::vector<float> x, dy, gamma;
  };
  const std::vector<Row> cases = {
      {{0.0f, 1e10f, 0.0f, 1e10f}, {3e38f, -3e38f, -3e38f, -3e38f}, {1, 1, 1, 1}},
      {{0, 1, 2, 3, 4, 5, 6, 7}, std::vector<float>(8, 1e30f), std::vector<float>(8, 1e10f)},
  };
  for (const Row& c : cases) {
    const auto dim = static_cast<int64_t>(c.x.size());
    const Shape shape{1, dim}, normalized{dim};
    std::vector<float> dx(c.x.size());
    layer_norm_backward({c.dy.data(), shape}, {c.x.data(), shape}, normalized,
                        {{dx.data(), shape}, std::nullopt, std::nullopt},
                        {.gamma = ConstView{c.gamma.data(), normalized}});
    const testing::WantDx want = testing::norm_dx(c.x, c.dy, c.gamma, 1, dim, 1e-5, true);
    for (size_t i = 0; i < dx.size(); ++i) {
      ASSERT_TRUE(std::isfinite(dx[i])) << i << ": " << dx[i];
      EXPECT_LE(std::fabs(dx[i] - want.dx[i]),
                4 * (float_ulp(want.dx[i]) + float_ulp(want.scale[i])))
          << i;
    }
  }
}

// Short rows take their output set-up a group at a time (group_outputs: one row a float64 lane,
// the same rule and roundings as output_row's). Rows the float32 lanes do not take sit among
// ordinary ones here, with eps = 0: constant rows (rstd +inf, x_hat exactly 0, so y is exactly
// beta) and a row holding a NaN (NaN throughout, its statistics NaN). Eleven rows make whole and
// partial groups on every target; each row must get the bits it gets in a call of its own.
TEST_P(KernelPaths, ShortRowGroupsGiveEachRowItsOwnOutputs) {
  const int64_t rows = 11, dim = 64;
  auto x = random_floats(static_cast<size_t>(rows * dim), 61, -2.0f, 3.0f);
  for (int64_t row : {2, 9}) {
    std::fill(x.begin() + row * dim, x.begin() + (row + 1) * dim, 42.5f);
  }
  x[static_cast<size_t>(4 * dim + 7)] = std::numeric_limits<float>::quiet_NaN();
  const auto gamma = random_floats(static_cast<size_t>(dim), 62, 0.5f, 1.5f);
  const auto beta = random_floats(static_cast<size_t>(dim), 63);
  for (const bool centre : {true, false}) {
    SCOPED_TRACE(centre ? "LayerNorm" : "RMSNorm");
    auto forward = [&](int64_t first, int64_t count, float* y, float* mean, float* rstd) {
      cpu::NormForward f;
      f.x = x.data() + first * dim;
      f.gamma = gamma.data();
      f.beta = centre ? beta.data() : nullptr;
      f.y = y;
      f.mean = centre ? mean : nullptr;
      f.rstd = rstd;
      f.rows = count;
      f.dim = dim;
      f.eps = 0;
      f.norm = centre ? NormKind::layer_norm : NormKind::rms_norm;
      cpu::norm_forward_range(f, 0, count);
    };
    std::vector<float> y(x.size()), mean(rows), rstd(rows);
    forward(0, rows, y.data(), mean.data(), rstd.data());
    for (int64_t row = 0; row < rows; ++row) {
      SCOPED_TRACE("row " + std::to_string(row));
      std::vector<float> y_alone(static_cast<size_t>(dim));
      float mean_alone = 0, rstd_alone = 0;
      forward(row, 1, y_alone.data(), &mean_alone, &rstd_alone);
      const float* y_row = y.data() + row * dim;
      EXPECT_EQ(std::memcmp(y_row, y_alone.data(), sizeof(float) * static_cast<size_t>(dim)), 0);
      EXPECT_EQ(std::memcmp(&rstd[static_cast<size_t>(row)], &rstd_alone, sizeof(float)), 0);
      if (centre) {
        EXPECT_EQ(std::memcmp(&mean[static_cast<size_t>(row)], &mean_alone, sizeof(float)), 0);
      }
    }
    for (int64_t i = 0; i < dim; ++i) {
      EXPECT_TRUE(std::isnan(y[static_cast<size_t>(4 * dim + i)])) << i;
    }
    EXPECT_TRUE(std::isnan(rstd[4]));
    if (centre) {
      EXPECT_TRUE(std::isnan(mean[4]));
      for (int64_t row : {2, 9}) {
        EXPECT_EQ(mean[static_cast<size_t>(row)], 42.5f);
        EXPECT_EQ(rstd[static_cast<size_t>(row)], std::numeric_limits<float>::infinity());
        for (int64_t i = 0; i < dim; ++i) {
          EXPECT_EQ(y[static_cast<size_t>(row * dim + i)], beta[static_cast<size_t>(i)]) << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, KernelPaths, ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target_info) {
                           return cpu::target_name(target_info.param);
                         });

// A LayerNorm of 8 MiB or more (streamed) equals the same rows in smaller calls (not streamed),
// forward and backward, in place and not.
TEST(KernelPaths, LargeCallsEqualSmallOnes) {
  const int64_t dim = 1000, rows = 2100;  // 8.0 MiB of float32
  ASSERT_TRUE(cpu::streams_output(rows * dim * int64_t{sizeof(float)}));
  const int64_t part = 300;
  ASSERT_FALSE(cpu::streams_output(part * dim * int64_t{sizeof(float)}));
  const auto x = random_floats(static_cast<size_t>(rows * dim), 51, -1.0f, 2.0f);
  const auto dy = random_floats(x.size(), 52);
  const auto gamma = random_floats(static_cast<size_t>(dim), 53, 0.5f, 1.5f);
  const auto beta = random_floats(static_cast<size_t>(dim), 54);
  const Shape normalized{dim};
  const NormOptions options{.gamma = ConstView{gamma.data(), normalized},
                            .beta = ConstView{beta.data(), normalized}};
  std::vector<float> y_large(x.size()), y_small(x.size());
  layer_norm({x.data(), {rows, dim}}, normalized, {y_large.data(), {rows, dim}}, options);
  for (int64_t first = 0; first < rows; first += part) {
    const Shape shape{part, dim};
    const auto at = static_cast<size_t>(first * dim);
    layer_norm({x.data() + at, shape}, normalized, {y_small.data() + at, shape}, options);
  }
  EXPECT_TRUE(y_large == y_small);
  std::vector<float> dx_large(x.size()), dx_small(x.size());
  layer_norm_backward({dy.data(), {rows, dim}}, {x.data(), {rows, dim}}, normalized,
                      {{dx_large.data(), {rows, dim}}, std::nullopt, std::nullopt}, options);
  for (int64_t first = 0; first < rows; first += part) {
    const Shape shape{part, dim};
    const auto at = static_cast<size_t>(first * dim);
    layer_norm_backward({dy.data() + at, shape}, {x.data() + at, shape}, normalized,
                        {{dx_small.data() + at, shape}, std::nullopt, std::nullopt}, options);
  }
  EXPECT_TRUE(dx_large == dx_small);
  // The backward in place (dx over dy) with dgamma and dbeta, in eight-row groups (D <= 2048,
  // streamed): every input element is read before its dx is stored.
  struct Grads {
    std::vector<float> dgamma, dbeta;
  };
  auto backward_into = [&](const float* dy_data, float* dx_data) {
    Grads grads{std::vector<float>(gamma.size()), std::vector<float>(gamma.size())};
    layer_norm_backward({dy_data, {rows, dim}}, {x.data(), {rows, dim}}, normalized,
                        {{dx_data, {rows, dim}},
                         MutableView{grads.dgamma.data(), normalized},
                         MutableView{grads.dbeta.data(), normalized}},
                        options);
    return grads;
  };
  std::vector<float> dx_apart(x.size());
  const Grads apart = backward_into(dy.data(), dx_apart.data());
  EXPECT_TRUE(dx_apart == dx_large);
  std::vector<float> dy_in_place = dy;
  const Grads in_place_grads = backward_into(dy_in_place.data(), dy_in_place.data());
  EXPECT_TRUE(dy_in_place == dx_apart);
  EXPECT_TRUE(in_place_grads.dgamma == apart.dgamma);
  EXPECT_TRUE(in_place_grads.dbeta == apart.dbeta);
  // In place: y overwrites x.
  std::vector<float> in_place = x;
  layer_norm({in_place.data(), {rows, dim}}, normalized, {in_place.data(), {rows, dim}}, options);
  EXPECT_TRUE(in_place == y_large);
}

}  // namespace
}  // namespace addnorm
