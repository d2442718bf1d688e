// A program that uses an installed addnorm the way a C++ user would: one pre-norm Add & Norm
// (h = x + r, y = LayerNorm(h) * gamma + beta) forward and backward through the public API,
// checked against this file's own float64 arithmetic: the forward against a two-pass LayerNorm,
// the backward against central finite differences of a float64 loss. It prints what it checked
// and exits non-zero when a number is off, so the packaging test (scripts/test-cpp-package.sh)
// can build it every way a user links addnorm and trust the result.
#include <addnorm/ops.hpp>
#include <addnorm/version.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int64_t kRows = 3;
constexpr int64_t kWidth = 64;
constexpr double kEps = 1e-5;

// Values that are not round numbers, without a random generator whose stream could differ.
std::vector<float> sample(int64_t count, double phase) {
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    values[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.37 * double(i) + phase) * 1.5);
  }
  return values;
}

// y = LayerNorm(x + r) * gamma + beta for one row, in float64.
void reference_row(const float* x, const float* r, const float* gamma, const float* beta,
                   double* y) {
  double h[kWidth];
  double mean = 0;
  for (int64_t j = 0; j < kWidth; ++j) {
    h[j] = double(x[j]) + double(r[j]);
    mean += h[j];
  }
  mean /= kWidth;
  double variance = 0;
  for (int64_t j = 0; j < kWidth; ++j) variance += (h[j] - mean) * (h[j] - mean);
  variance /= kWidth;
  const double rstd = 1.0 / std::sqrt(variance + kEps);
  for (int64_t j = 0; j < kWidth; ++j) y[j] = (h[j] - mean) * rstd * gamma[j] + beta[j];
}

// The loss whose gradient the backward computes: sum(dy * y), in float64.
double reference_loss(const std::vector<float>& x, const std::vector<float>& r,
                      const std::vector<float>& gamma, const std::vector<float>& beta,
                      const std::vector<float>& dy) {
  double loss = 0;
  double y[kWidth];
  for (int64_t row = 0; row < kRows; ++row) {
    const size_t at = static_cast<size_t>(row * kWidth);
    reference_row(&x[at], &r[at], gamma.data(), beta.data(), y);
    for (int64_t j = 0; j < kWidth; ++j) loss += double(dy[at + size_t(j)]) * y[j];
  }
  return loss;
}

int failures = 0;

void check(const char* what, double got, double expected, double tolerance) {
  if (!(std::fabs(got - expected) <= tolerance)) {
    std::printf("FAIL %s: %.9g, expected %.9g (tolerance %.3g)\n", what, got, expected, tolerance);
    ++failures;
  }
}

}  // namespace

int main() {
  using namespace addnorm;
  const Version library = version();
  std::printf("addnorm %s (headers %s)\n", library.string, ADDNORM_VERSION_STRING);
  if (std::strcmp(library.string, ADDNORM_VERSION_STRING) != 0) {
    std::printf("FAIL the library's version differs from its headers'\n");
    ++failures;
  }

  const Shape shape{kRows, kWidth};
  const Shape width{kWidth};
  std::vector<float> x = sample(kRows * kWidth, 0.1), r = sample(kRows * kWidth, 2.3);
  std::vector<float> gamma = sample(kWidth, 4.0), beta = sample(kWidth, 5.5);
  std::vector<float> dy = sample(kRows * kWidth, 7.7);
  std::vector<float> h(x.size()), y(x.size()), mean(kRows), rstd(kRows);

  NormOptions options;
  options.gamma = ConstView{gamma.data(), width};
  options.beta = ConstView{beta.data(), width};
  options.eps = float(kEps);
  add_norm_pre(
      ConstView{x.data(), shape}, ConstView{r.data(), shape}, width, MutableView{h.data(), shape},
      MutableView{y.data(), shape}, options,
      NormStats{MutableView{mean.data(), Shape{kRows}}, MutableView{rstd.data(), Shape{kRows}}});

  // Forward: h is x + r rounded once; y within a few float32 ulp of the float64 value.
  double expected[kWidth];
  for (int64_t row = 0; row < kRows; ++row) {
    const size_t at = static_cast<size_t>(row * kWidth);
    reference_row(&x[at], &r[at], gamma.data(), beta.data(), expected);
    for (int64_t j = 0; j < kWidth; ++j) {
      check("h", h[at + size_t(j)], double(x[at + size_t(j)] + r[at + size_t(j)]), 0.0);
      check("y", y[at + size_t(j)], expected[j], 4 * 1.2e-7 * (std::fabs(expected[j]) + 1.0));
    }
  }

  // Backward: dh (= dx = dr), dgamma and dbeta against central differences of sum(dy * y).
  std::vector<float> dh(x.size()), dgamma(kWidth), dbeta(kWidth);
  AddNormPreGrads grads{MutableView{dh.data(), shape}, MutableView{dgamma.data(), width},
                        MutableView{dbeta.data(), width}};
  add_norm_pre_backward(
      ConstView{dy.data(), shape}, std::nullopt, ConstView{h.data(), shape}, width, grads, options,
      SavedStats{ConstView{mean.data(), Shape{kRows}}, ConstView{rstd.data(), Shape{kRows}}});
  auto finite_difference = [&](std::vector<float>& values, size_t at) {
    const float kept = values[at];
    const double step = 1e-2;
    values[at] = float(double(kept) + step);
    const double up = reference_loss(x, r, gamma, beta, dy);
    values[at] = float(double(kept) - step);
    const double down = reference_loss(x, r, gamma, beta, dy);
    const double actual_step =
        (double(float(double(kept) + step)) - double(float(double(kept) - step)));
    values[at] = kept;
    return (up - down) / actual_step;
  };
  for (size_t at = 0; at < x.size(); at += 7) {
    check("dh", dh[at], finite_difference(x, at), 2e-3);
  }
  for (size_t at = 0; at < gamma.size(); at += 5) {
    check("dgamma", dgamma[at], finite_difference(gamma, at), 2e-3);
    check("dbeta", dbeta[at], finite_difference(beta, at), 2e-3);
  }

  // Bad input is refused with addnorm::Error, naming the argument, and nothing is written.
  const std::vector<float> y_before = y;
  try {
    add_norm_pre(ConstView{x.data(), shape}, ConstView{r.data(), Shape{kRows, kWidth - 1}}, width,
                 MutableView{h.data(), shape}, MutableView{y.data(), shape}, options);
    std::printf("FAIL a residual of the wrong shape was accepted\n");
    ++failures;
  } catch (const Error& error) {
    if (std::strstr(error.what(), "r") == nullptr) {
      std::printf("FAIL the error does not name the argument: %s\n", error.what());
      ++failures;
    }
  }
  if (y != y_before) {
    std::printf("FAIL a refused call wrote to y\n");
    ++failures;
  }

  if (failures == 0) {
    std::printf("pre-norm block: forward and backward match float64 (%lld rows of %lld)\n",
                static_cast<long long>(kRows), static_cast<long long>(kWidth));
  }
  return failures == 0 ? 0 : 1;
}
