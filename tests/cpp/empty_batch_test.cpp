// Every op on tensors with no elements (an empty batch, which PyTorch accepts): the data
// pointers of the empty tensors are null, so an op that reads or writes them crashes here (and
// under the sanitizers). What must come out is the definition's value over no elements: sums
// (dgamma, dbeta) are 0, statistics (a mean, an rstd) of no elements are 0/0 = NaN, and
// running statistics keep their values, as torch.nn.functional.batch_norm leaves them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "addnorm/overloads.hpp"
#include "errors_test_support.hpp"

namespace addnorm {
namespace {

template <class T>
using In = TensorView<const T>;
template <class T>
using Out = TensorView<T>;

// Values an op must overwrite (or, for running statistics, must keep).
constexpr double kUntouched = 7.0;

template <class T>
std::vector<T> untouched(int64_t count) {
  return std::vector<T>(static_cast<size_t>(count), T(kUntouched));
}

template <class T>
void expect_all(const std::vector<T>& values, double expected, const char* what) {
  for (T value : values) {
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(value)) << what << " holds " << value << ", expected NaN";
    } else {
      EXPECT_EQ(value, T(expected)) << what;
    }
  }
}

template <class T>
class EmptyBatch : public ::testing::Test {};
TYPED_TEST_SUITE(EmptyBatch, testing::ElementTypes, testing::ElementName);

// Row norms: x of shape `x_shape` normalised over `normalized`; rows = the leading dims.
struct RowCase {
  Shape x_shape;
  Shape normalized;
  int64_t rows;
};
const RowCase kRowCases[] = {
    {{0, 8}, {8}, 0},        // no rows
    {{3, 0, 8}, {8}, 0},     // no rows, an inner batch dimension empty
    {{2, 0}, {0}, 2},        // rows of no elements: their statistics are NaN
    {{2, 3, 0}, {3, 0}, 2},  // the same, over two normalised dims
};

TYPED_TEST(EmptyBatch, RowNormsWriteSumsOfNothingAndNanStatistics) {
  using T = TypeParam;
  for (const RowCase& c : kRowCases) {
    SCOPED_TRACE(c.x_shape.to_string());
    const int64_t dim = c.normalized.numel();
    const std::vector<T> gamma = untouched<T>(dim), beta = untouched<T>(dim);
    const In<T> x{nullptr, c.x_shape};
    const Out<T> y{nullptr, c.x_shape};
    for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
      const bool shifts = norm_traits(kind).has_shift;
      BasicNormOptions<T> options{.norm = kind, .gamma = In<T>{gamma.data(), c.normalized}};
      if (shifts) options.beta = In<T>{beta.data(), c.normalized};
      std::vector<T> mean = untouched<T>(c.rows), rstd = untouched<T>(c.rows);
      const BasicNormStats<T> stats{{mean.data(), {c.rows}}, {rstd.data(), {c.rows}}};
      overloads::norm(x, c.normalized, y, options, stats);
      if (norm_traits(kind).centres) expect_all(mean, NAN, "mean");
      expect_all(rstd, NAN, "rstd");

      std::vector<T> dgamma = untouched<T>(dim), dbeta = untouched<T>(dim);
      const auto grad = [&](std::vector<T>& v) { return Out<T>{v.data(), c.normalized}; };
      const std::optional<Out<T>> dbeta_view =
          shifts ? std::optional<Out<T>>(grad(dbeta)) : std::nullopt;
      overloads::norm_backward(x, x, c.normalized, {y, grad(dgamma), dbeta_view}, options);
      expect_all(dgamma, 0.0, "dgamma");
      if (shifts) expect_all(dbeta, 0.0, "dbeta");

      // The fused ops: their statistics and gradients too (refilled in place, so that the views
      // stay valid and each op must write them itself).
      const auto refill = [&] {
        for (auto* v : {&mean, &rstd, &dgamma, &dbeta})
          std::fill(v->begin(), v->end(), T(kUntouched));
      };
      refill();
      overloads::add_norm_pre(x, x, c.normalized, y, y, options, stats);
      overloads::add_norm_pre_backward(x, std::optional<In<T>>(x), x, c.normalized,
                                       {y, grad(dgamma), dbeta_view}, options);
      if (norm_traits(kind).centres) expect_all(mean, NAN, "add_norm_pre mean");
      expect_all(rstd, NAN, "add_norm_pre rstd");
      expect_all(dgamma, 0.0, "add_norm_pre dgamma");
      if (shifts) expect_all(dbeta, 0.0, "add_norm_pre dbeta");

      refill();
      const BasicDropoutOptions<T> dropout{.p = T(0.25), .seed = 3};
      overloads::add_norm_post(x, x, c.normalized, y, options, dropout, stats);
      overloads::add_norm_post_backward(x, x, x, c.normalized, {y, y, grad(dgamma), dbeta_view},
                                        options, dropout);
      if (norm_traits(kind).centres) expect_all(mean, NAN, "add_norm_post mean");
      expect_all(rstd, NAN, "add_norm_post rstd");
      expect_all(dgamma, 0.0, "add_norm_post dgamma");
      if (shifts) expect_all(dbeta, 0.0, "add_norm_post dbeta");
    }
    // The plain ops reach the same code by their own entry points.
    overloads::layer_norm(x, c.normalized, y);
    overloads::rms_norm(x, c.normalized, y);
  }
}

TYPED_TEST(EmptyBatch, ResidualAndDropoutDoNothing) {
  using T = TypeParam;
  const Shape shape{0, 5};
  overloads::add(In<T>{nullptr, shape}, In<T>{nullptr, shape}, Out<T>{nullptr, shape});
  const BasicDropoutOptions<T> dropout{.p = T(0.5), .seed = 1};
  overloads::dropout(In<T>{nullptr, shape}, Out<T>{nullptr, shape}, dropout);
  overloads::dropout_backward(In<T>{nullptr, shape}, Out<T>{nullptr, shape}, dropout);
  dropout_mask(TensorView<uint8_t>{nullptr, shape}, DropoutOptions{.p = 0.5f, .seed = 1});
}

// A zero dimension makes a tensor empty but does not excuse its other dimensions: their product
// must still fit, or the ops' layouts (products of some of the dims) would overflow.
TYPED_TEST(EmptyBatch, OtherDimensionsMustStillFit) {
  using T = TypeParam;
  const Shape absurd{0, 3, int64_t{1} << 62, 4};
  try {
    overloads::batch_norm(In<T>{nullptr, absurd}, Out<T>{nullptr, absurd});
    ADD_FAILURE() << "an x of shape " << absurd.to_string() << " was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.argument(), "x");
    EXPECT_NE(std::string(error.what()).find("overflows"), std::string::npos) << error.what();
  }
}

// Zero channels: nothing to normalise and no parameters' elements, for both channel norms.
TYPED_TEST(EmptyBatch, NoChannels) {
  using T = TypeParam;
  const Shape shape{2, 0, 5};
  const In<T> x{nullptr, shape};
  const Out<T> y{nullptr, shape};
  BasicBatchNormOptions<T> training;  // PyTorch's defaults, in training mode
  training.training = true;
  overloads::batch_norm(x, y, training);
  overloads::batch_norm_backward(x, x, {y, std::nullopt, std::nullopt}, training);
  overloads::group_norm(x, y, BasicGroupNormOptions<T>{{}, 1});
  overloads::group_norm_backward(x, x, {y}, BasicGroupNormOptions<T>{{}, 1});
}

// The 16-bit storage types reach the same rule through the any-storage views.
TEST(EmptyBatchStorage, SixteenBitTypes) {
  const Shape shape{0, 8}, normalized{8};
  const std::vector<float> gamma(8, 1.0f);
  std::vector<float> dgamma(8, float(kUntouched));
  const AnyConstView x{nullptr, shape, DType::bfloat16};
  const AnyMutableView y{nullptr, shape, DType::bfloat16};
  const NormOptions options{.gamma = ConstView{gamma.data(), normalized}};
  layer_norm(x, normalized, y, options);
  layer_norm_backward(x, x, normalized, {y, MutableView{dgamma.data(), normalized}, std::nullopt},
                      options);
  expect_all(dgamma, 0.0, "dgamma");
  group_norm(AnyConstView{nullptr, {0, 4, 3}, DType::float16},
             AnyMutableView{nullptr, {0, 4, 3}, DType::float16}, GroupNormOptions{{}, 2});
}

TYPED_TEST(EmptyBatch, GroupNormGivesNanStatisticsToGroupsOfNothing) {
  using T = TypeParam;
  struct Case {
    Shape x_shape;
    int64_t samples;
  };
  // (N, C, L) with 2 groups of 2 channels: no samples, then samples with no positions.
  for (const Case& c : {Case{{0, 4, 3}, 0}, Case{{2, 4, 0}, 2}}) {
    SCOPED_TRACE(c.x_shape.to_string());
    const std::vector<T> gamma = untouched<T>(4), beta = untouched<T>(4);
    const BasicGroupNormOptions<T> options{
        {.gamma = In<T>{gamma.data(), {4}}, .beta = In<T>{beta.data(), {4}}}, 2};
    std::vector<T> mean = untouched<T>(c.samples * 2), rstd = untouched<T>(c.samples * 2);
    const In<T> x{nullptr, c.x_shape};
    const Out<T> y{nullptr, c.x_shape};
    overloads::group_norm(
        x, y, options,
        BasicNormStats<T>{{mean.data(), {c.samples, 2}}, {rstd.data(), {c.samples, 2}}});
    expect_all(mean, NAN, "mean");
    expect_all(rstd, NAN, "rstd");
    std::vector<T> dgamma = untouched<T>(4), dbeta = untouched<T>(4);
    overloads::group_norm_backward(x, x, {y, Out<T>{dgamma.data(), {4}}, Out<T>{dbeta.data(), {4}}},
                                   options);
    expect_all(dgamma, 0.0, "dgamma");
    expect_all(dbeta, 0.0, "dbeta");
  }
}

TYPED_TEST(EmptyBatch, BatchNormKeepsRunningStatisticsAndSumsNothing) {
  using T = TypeParam;
  struct Case {
    Shape x_shape;
    bool channels_last;
  };
  for (const Case& c : {Case{{0, 3, 5}, false}, Case{{4, 3, 0}, false}, Case{{0, 5, 3}, true},
                        Case{{0, 3}, false}}) {
    SCOPED_TRACE(c.x_shape.to_string());
    for (const bool training : {true, false}) {
      const std::vector<T> gamma = untouched<T>(3), beta = untouched<T>(3);
      BasicBatchNormOptions<T> options{
          {.gamma = In<T>{gamma.data(), {3}}, .beta = In<T>{beta.data(), {3}}}, training};
      options.channels_last = c.channels_last;
      std::vector<T> running_mean = untouched<T>(3), running_var = untouched<T>(3);
      const BasicRunningStats<T> running{{running_mean.data(), {3}}, {running_var.data(), {3}}};
      const In<T> x{nullptr, c.x_shape};
      const Out<T> y{nullptr, c.x_shape};
      std::vector<T> mean = untouched<T>(3), rstd = untouched<T>(3);
      std::optional<BasicNormStats<T>> batch_stats;
      if (training) batch_stats = BasicNormStats<T>{{mean.data(), {3}}, {rstd.data(), {3}}};
      overloads::batch_norm(x, y, options, running, batch_stats);
      expect_all(running_mean, kUntouched, "running_mean");
      expect_all(running_var, kUntouched, "running_var");
      if (training) {
        expect_all(mean, NAN, "batch mean");
        expect_all(rstd, NAN, "batch rstd");
      }
      std::vector<T> dgamma = untouched<T>(3), dbeta = untouched<T>(3);
      overloads::batch_norm_backward(
          x, x, {y, Out<T>{dgamma.data(), {3}}, Out<T>{dbeta.data(), {3}}}, options, running);
      expect_all(dgamma, 0.0, "dgamma");
      expect_all(dbeta, 0.0, "dbeta");
    }
  }
}

}  // namespace
}  // namespace addnorm
