// The one norm description (NormOptions) as every C++ entry point reads it: with defaults, the
// plain op and both fused ops run the same norm with the same eps (PyTorch's 1e-5 for LayerNorm,
// the seed page's 1e-6 for RMSNorm), and a field the kind has no use for is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"
#include "ops/reference/layer_norm.hpp"
#include "ops/reference/rms_norm.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::widen;
using testing::within_ulps;

constexpr int64_t kRows = 4, kDim = 64;

// Rows of multiples of 2^-10 up to 3 * 2^-10, whose variance and mean square (about 4e-6) are
// of eps's size, so eps changes every element: a default eps of the wrong size (1e-5 where
// 1e-6 is due, or the reverse) moves y by far more than a few ulp.
std::vector<float> tiny_spread_rows() {
  std::vector<float> x(static_cast<size_t>(kRows * kDim));
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = 0.0009765625f * static_cast<float>(static_cast<int>(i % 7) - 3);
  }
  return x;
}

// y of the plain op for `kind` with default options.
std::vector<float> plain_default(NormKind kind, const std::vector<float>& x) {
  const Shape shape{kRows, kDim}, normalized{kDim};
  std::vector<float> y(x.size());
  switch (kind) {
    case NormKind::layer_norm:
      layer_norm(ConstView{x.data(), shape}, normalized, MutableView{y.data(), shape});
      break;
    case NormKind::rms_norm:
      rms_norm(ConstView{x.data(), shape}, normalized, MutableView{y.data(), shape});
      break;
  }
  return y;
}

// The float64 definition at the kind's documented default eps.
std::vector<double> reference_at_documented_eps(NormKind kind, const std::vector<float>& x) {
  const std::vector<double> x64 = widen(x);
  std::vector<double> y(x.size());
  switch (kind) {
    case NormKind::layer_norm:
      reference::layer_norm_forward<double>(x64.data(), nullptr, nullptr, y.data(), nullptr,
                                            nullptr, kRows, kDim, 1e-5);
      break;
    case NormKind::rms_norm:
      reference::rms_norm_forward<double>(x64.data(), nullptr, false, y.data(), nullptr, kRows,
                                          kDim, 1e-6);
      break;
  }
  return y;
}

class NormDefaults : public ::testing::TestWithParam<NormKind> {};

TEST_P(NormDefaults, EveryEntryPointRunsTheSameNormWithTheDocumentedEps) {
  const NormKind kind = GetParam();
  const Shape shape{kRows, kDim}, normalized{kDim};
  const std::vector<float> x = tiny_spread_rows();
  const std::vector<float> zeros(x.size(), 0.0f);
  const std::vector<float> plain = plain_default(kind, x);

  // The default eps is the documented one: y is within a few ulp of the definition at it.
  const std::vector<double> want = reference_at_documented_eps(kind, x);
  EXPECT_TRUE(within_ulps(plain, want, 4, 1.0));

  // The fused ops with only the kind named: x + 0 is x, so y must be the plain op's, bit for bit.
  const NormOptions fused{.norm = kind};
  std::vector<float> h(x.size()), y_pre(x.size()), y_post(x.size());
  add_norm_pre(ConstView{x.data(), shape}, ConstView{zeros.data(), shape}, normalized,
               MutableView{h.data(), shape}, MutableView{y_pre.data(), shape}, fused);
  add_norm_post(ConstView{x.data(), shape}, ConstView{zeros.data(), shape}, normalized,
                MutableView{y_post.data(), shape}, fused);
  EXPECT_EQ(y_pre, plain);
  EXPECT_EQ(y_post, plain);

  // The plain op takes the same description, naming its own kind or not.
  std::vector<float> y_named(x.size());
  switch (kind) {
    case NormKind::layer_norm:
      layer_norm(ConstView{x.data(), shape}, normalized, MutableView{y_named.data(), shape}, fused);
      break;
    case NormKind::rms_norm:
      rms_norm(ConstView{x.data(), shape}, normalized, MutableView{y_named.data(), shape}, fused);
      break;
  }
  EXPECT_EQ(y_named, plain);
  // So does the entry point of any kind, with only the kind named.
  std::vector<float> y_any(x.size());
  norm(ConstView{x.data(), shape}, normalized, MutableView{y_any.data(), shape}, fused);
  EXPECT_EQ(y_any, plain);

  // float64 views: the same defaults.
  const std::vector<double> x64 = widen(x);
  std::vector<double> y64(x.size());
  const float64::ConstView x64_view{x64.data(), shape};
  const float64::MutableView y64_view{y64.data(), shape};
  switch (kind) {
    case NormKind::layer_norm:
      float64::layer_norm(x64_view, normalized, y64_view);
      break;
    case NormKind::rms_norm:
      float64::rms_norm(x64_view, normalized, y64_view);
      break;
  }
  for (size_t i = 0; i < y64.size(); ++i) {
    ASSERT_NEAR(y64[i], want[i], 1e-9 * (1.0 + std::abs(want[i]))) << i;
  }
  std::vector<double> y64_any(x.size());
  float64::norm(x64_view, normalized, {y64_any.data(), shape}, {.norm = kind});
  EXPECT_EQ(y64_any, y64);
}

// norm and norm_backward are layer_norm / rms_norm and their backwards, bit for bit, with every
// output: y, the saved statistics (mean a centring kind's only), dx, dgamma and dbeta.
TEST_P(NormDefaults, TheEntryPointOfAnyKindIsThePlainOp) {
  const NormKind kind = GetParam();
  const bool centres = norm_traits(kind).centres;
  const Shape shape{kRows, kDim}, normalized{kDim}, rows{kRows};
  const std::vector<float> x = testing::random_floats(kRows * kDim, 1, -2.0f, 3.0f);
  const std::vector<float> dy = testing::random_floats(x.size(), 2);
  const std::vector<float> gamma = testing::random_floats(kDim, 3, 0.5f, 1.5f);
  const std::vector<float> beta = testing::random_floats(kDim, 4);
  const NormOptions options{
      .norm = kind,
      .gamma = ConstView{gamma.data(), normalized},
      .beta = centres ? OptionalConst(ConstView{beta.data(), normalized}) : std::nullopt};
  struct Outputs {
    std::vector<float> y = std::vector<float>(kRows * kDim), mean = std::vector<float>(kRows),
                       rstd = std::vector<float>(kRows), dx = std::vector<float>(kRows * kDim),
                       dgamma = std::vector<float>(kDim), dbeta = std::vector<float>(kDim);
  } any, own;
  const ConstView xv{x.data(), shape}, dyv{dy.data(), shape};
  norm(xv, normalized, MutableView{any.y.data(), shape}, options,
       NormStats{{any.mean.data(), rows}, {any.rstd.data(), rows}});
  const OptionalMutable any_dbeta =
      centres ? OptionalMutable(MutableView{any.dbeta.data(), normalized}) : std::nullopt;
  norm_backward(
      dyv, xv, normalized,
      {MutableView{any.dx.data(), shape}, MutableView{any.dgamma.data(), normalized}, any_dbeta},
      options);
  switch (kind) {
    case NormKind::layer_norm:
      layer_norm(xv, normalized, MutableView{own.y.data(), shape}, options,
                 NormStats{{own.mean.data(), rows}, {own.rstd.data(), rows}});
      layer_norm_backward(
          dyv, xv, normalized,
          {MutableView{own.dx.data(), shape}, MutableView{own.dgamma.data(), normalized},
           MutableView{own.dbeta.data(), normalized}},
          options);
      break;
    case NormKind::rms_norm:
      rms_norm(xv, normalized, MutableView{own.y.data(), shape}, options,
               MutableView{own.rstd.data(), rows});
      rms_norm_backward(
          dyv, xv, normalized,
          {MutableView{own.dx.data(), shape}, MutableView{own.dgamma.data(), normalized}}, options);
      break;
  }
  EXPECT_EQ(any.y, own.y);
  EXPECT_EQ(any.mean, own.mean);  // zeros both for RMSNorm: nothing is written
  EXPECT_EQ(any.rstd, own.rstd);
  EXPECT_EQ(any.dx, own.dx);
  EXPECT_EQ(any.dgamma, own.dgamma);
  EXPECT_EQ(any.dbeta, own.dbeta);
  // The statistics are real: rstd of the first row from its float64 definition.
  double mean = 0, square = 0;
  for (int64_t i = 0; i < kDim; ++i) mean += x[static_cast<size_t>(i)] / double(kDim);
  if (!centres) mean = 0;
  for (int64_t i = 0; i < kDim; ++i) square += std::pow(x[static_cast<size_t>(i)] - mean, 2) / kDim;
  EXPECT_NEAR(any.rstd[0], 1 / std::sqrt(square + norm_traits(kind).default_eps), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Kinds, NormDefaults,
                         ::testing::Values(NormKind::layer_norm, NormKind::rms_norm));

// An Error naming `argument`, and y left as it was.
template <class Call>
void expect_refused(const char* argument, const Call& call) {
  try {
    call();
    ADD_FAILURE() << "expected an Error naming " << argument;
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), argument) << error.what();
    EXPECT_EQ(error.kind(), ErrorKind::value) << error.what();
  }
}

TEST(NormOptions, APlainOpRefusesAnotherKindAndFieldsItsKindHasNoUseFor) {
  const Shape shape{kRows, kDim}, normalized{kDim};
  const std::vector<float> x = tiny_spread_rows(), beta(kDim, 0.5f);
  std::vector<float> y(x.size(), -7.0f);
  const ConstView xv{x.data(), shape}, bv{beta.data(), normalized};
  const MutableView yv{y.data(), shape};
  const std::vector<float> untouched(x.size(), -7.0f);
  expect_refused("norm", [&] { rms_norm(xv, normalized, yv, {.norm = NormKind::layer_norm}); });
  expect_refused("norm", [&] { layer_norm(xv, normalized, yv, {.norm = NormKind::rms_norm}); });
  expect_refused("beta", [&] { rms_norm(xv, normalized, yv, {.beta = bv}); });
  expect_refused("zero_centered_gamma",
                 [&] { layer_norm(xv, normalized, yv, {.zero_centered_gamma = true}); });
  // The entry point of any kind checks the kind it runs the same way.
  expect_refused("beta",
                 [&] { norm(xv, normalized, yv, {.norm = NormKind::rms_norm, .beta = bv}); });
  std::vector<float> dx(x.size(), -7.0f), dbeta(kDim, -7.0f);
  expect_refused("dbeta", [&] {
    norm_backward(
        xv, xv, normalized,
        {MutableView{dx.data(), shape}, std::nullopt, MutableView{dbeta.data(), normalized}},
        {.norm = NormKind::rms_norm});
  });
  EXPECT_EQ(dx, untouched);
  EXPECT_EQ(dbeta, std::vector<float>(kDim, -7.0f));
  EXPECT_EQ(y, untouched);
}

// GroupNorm and BatchNorm take the same description, of the centring kind: another kind or a
// field only RMSNorm has is refused in the op's own name, and nothing is written.
TEST(NormOptions, TheChannelNormsTakeTheCentringDescriptionOnly) {
  const Shape shape{kRows, kDim, 2};
  const std::vector<float> x(static_cast<size_t>(shape.numel()), 0.5f);
  std::vector<float> y(x.size(), -7.0f);
  const ConstView xv{x.data(), shape};
  const MutableView yv{y.data(), shape};
  const auto expect_message = [](const std::string& expected, const auto& call) {
    try {
      call();
      ADD_FAILURE() << "accepted, expected: " << expected;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
    }
  };
  expect_message("norm is rms_norm, expected layer_norm or none: group_norm centres", [&] {
    group_norm(xv, yv, {{.norm = NormKind::rms_norm}, 2});
  });
  expect_message("zero_centered_gamma was set for group_norm, expected it only with rms_norm", [&] {
    group_norm(xv, yv, {{.zero_centered_gamma = true}, 2});
  });
  expect_message("norm is rms_norm, expected layer_norm or none: batch_norm centres",
                 [&] { batch_norm(xv, yv, BatchNormOptions{{.norm = NormKind::rms_norm}}); });
  expect_message("zero_centered_gamma was set for batch_norm",
                 [&] { batch_norm(xv, yv, BatchNormOptions{{.zero_centered_gamma = true}}); });
  EXPECT_EQ(y, std::vector<float>(x.size(), -7.0f));
  batch_norm(xv, yv, BatchNormOptions{{.norm = NormKind::layer_norm}});  // the kind it runs
  EXPECT_EQ(y, std::vector<float>(x.size(), 0.0f));  // a constant channel is beta, here 0
}

// A channel norm's options handed to a row norm would lose their own fields: refused at compile
// time (the deleted overloads of ops.hpp), while NormOptions itself is taken.
template <class Options>
constexpr bool kRowNormTakes = requires(AnyConstView x, AnyMutableView y, const Options& o) {
  layer_norm(x, Shape{4}, y, o);
};
template <class Options>
constexpr bool kFusedNormTakes = requires(AnyConstView x, AnyMutableView y, const Options& o) {
  add_norm_pre(x, x, Shape{4}, y, y, o);
};
static_assert(kRowNormTakes<NormOptions> && kFusedNormTakes<NormOptions>);
static_assert(!kRowNormTakes<GroupNormOptions> && !kFusedNormTakes<GroupNormOptions>);
static_assert(!kRowNormTakes<BatchNormOptions> && !kFusedNormTakes<BatchNormOptions>);

}  // namespace
}  // namespace addnorm
