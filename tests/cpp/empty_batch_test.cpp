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

      std::fill(dgamma.begin(), dgamma.end(), T(kUntouched));  // in place: the views stay valid
      overloads::add_norm_pre(x, x, c.normalized, y, y, options);
      overloads::add_norm_pre_backward(x, std::optional<In<T>>(x), x, c.normalized,
                                       {y, grad(dgamma), dbeta_view}, options);
      expect_all(dgamma, 0.0, "add_norm_pre dgamma");

      std::fill(dgamma.begin(), dgamma.end(), T(kUntouched));
      const BasicDropoutOptions<T> dropout{.p = T(0.25), .seed = 3};
      overloads::add_norm_post(x, x, c.normalized, y, options, dropout);
      overloads::add_norm_post_backward(x, x, x, c.normalized, {y, y, grad(dgamma), dbeta_view},
                                        options, dropout);
      expect_all(dgamma, 0.0, "add_norm_post dgamma");
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
        .num_groups = 2, .gamma = In<T>{gamma.data(), {4}}, .beta = In<T>{beta.data(), {4}}};
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
          .gamma = In<T>{gamma.data(), {3}}, .beta = In<T>{beta.data(), {3}}, .training = training};
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
