// Helpers shared by the op tests: seeded data, float64 copies, and the ulp-based comparison that
// states the numerics contract ("within a few ulp of a float64 computation").
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "addnorm/dtype.hpp"

namespace addnorm::testing {

// Uniform values in [low, high), reproducible from the seed.
inline std::vector<float> random_floats(size_t count, uint32_t seed, float low = -1.0f,
                                        float high = 1.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(engine);
  return values;
}

inline std::vector<double> widen(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

// The spacing of float32 numbers at |value| (the float32 ulp), never below the smallest denormal.
inline double float_ulp(double value) {
  const float magnitude = static_cast<float>(std::fabs(value));
  if (!std::isfinite(magnitude)) return std::numeric_limits<double>::infinity();
  const float next = std::nextafter(magnitude, std::numeric_limits<float>::infinity());
  return static_cast<double>(next) - static_cast<double>(magnitude);
}

// Checks got[i] against want[i] (float64) within `ulps` float32 ulps of want[i], plus `ulps`
// ulps of `scale` (the size of the terms that cancelled to make want[i], for results near 0).
// NaN must match NaN.
inline ::testing::AssertionResult within_ulps(const std::vector<float>& got,
                                              const std::vector<double>& want, double ulps,
                                              double scale = 0.0) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  }
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) || std::isnan(got[i])) {
      if (std::isnan(want[i]) != std::isnan(got[i])) {
        return ::testing::AssertionFailure()
               << "element " << i << ": got " << got[i] << ", want " << want[i];
      }
      continue;
    }
    const double allowed = ulps * (float_ulp(want[i]) + float_ulp(scale));
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(error <= allowed)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", want " << want[i] << " (error " << error
             << " > allowed " << allowed << ")";
    }
    if (error / (float_ulp(want[i]) + float_ulp(scale)) > worst) {
      worst = error / (float_ulp(want[i]) + float_ulp(scale));
      worst_at = i;
    }
  }
  return ::testing::AssertionSuccess() << "worst " << worst << " ulp at " << worst_at;
}

// The same with a scale per element: scales[i] is the size of the terms that cancelled to make
// want[i] (for a sum over rows such as dgamma, the sum of the terms' magnitudes).
inline ::testing::AssertionResult within_ulps_each(const std::vector<float>& got,
                                                   const std::vector<double>& want, double ulps,
                                                   const std::vector<double>& scales) {
  if (got.size() != want.size() || scales.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << got.size() << ", " << want.size() << ", " << scales.size();
  }
  double worst = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const ::testing::AssertionResult one = within_ulps({got[i]}, {want[i]}, ulps, scales[i]);
    if (!one) return ::testing::AssertionFailure() << "element " << i << ": " << one.message();
    const double unit = float_ulp(want[i]) + float_ulp(scales[i]);
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]) / unit;
    if (error > worst) {
      worst = error;
      worst_at = i;
    }
  }
  return ::testing::AssertionSuccess() << "worst " << worst << " ulp at " << worst_at;
}

// dx of LayerNorm (centre) or RMSNorm in float64 from the float32 inputs, with each element's
// term scale rstd * (|g| + |mean(g)| + |x_hat * mean(g x_hat)|) (the bound the contract states),
// x_hat, and each row's magnitude rstd * max|g| * (1 + max|x_hat|) (the size of the terms of
// mean(g) and mean(g x_hat), for bounds stated in the row's magnitude).
struct WantDx {
  std::vector<double> dx, scale, x_hat, row_magnitude;
};
inline WantDx norm_dx(const std::vector<float>& x, const std::vector<float>& dy,
                      const std::vector<float>& gamma, int64_t rows, int64_t dim, double eps,
                      bool centre) {
  const auto count = static_cast<double>(dim);
  WantDx want{std::vector<double>(x.size()), std::vector<double>(x.size()),
              std::vector<double>(x.size()), std::vector<double>(static_cast<size_t>(rows))};
  for (int64_t row = 0; row < rows; ++row) {
    const float* xr = x.data() + row * dim;
    const float* dyr = dy.data() + row * dim;
    double mean = 0, variance = 0, mean_g = 0, mean_gx = 0, max_g = 0, max_x_hat = 0;
    if (centre) {
      for (int64_t i = 0; i < dim; ++i) mean += xr[i];
      mean /= count;
    }
    for (int64_t i = 0; i < dim; ++i) variance += (xr[i] - mean) * (xr[i] - mean);
    const double rstd = 1 / std::sqrt(variance / count + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double g = static_cast<double>(dyr[i]) * gamma[i];
      if (centre) mean_g += g / count;
      mean_gx += g * (xr[i] - mean) * rstd / count;
      max_g = std::max(max_g, std::fabs(g));
      max_x_hat = std::max(max_x_hat, std::fabs((xr[i] - mean) * rstd));
    }
    want.row_magnitude[static_cast<size_t>(row)] = rstd * max_g * (1 + max_x_hat);
    for (int64_t i = 0; i < dim; ++i) {
      const double g = static_cast<double>(dyr[i]) * gamma[i];
      const double x_hat = (xr[i] - mean) * rstd;
      const auto at = static_cast<size_t>(row * dim + i);
      want.dx[at] = rstd * (g - mean_g - x_hat * mean_gx);
      want.scale[at] = rstd * (std::fabs(g) + std::fabs(mean_g) + std::fabs(x_hat * mean_gx));
      want.x_hat[at] = x_hat;
    }
  }
  return want;
}

inline double max_abs(const std::vector<double>& values) {
  double largest = 0;
  for (double v : values) largest = std::max(largest, std::fabs(v));
  return largest;
}

// Central finite differences of a scalar function of a float64 vector, checked against an
// analytic gradient: |fd - analytic| <= tolerance * (1 + |analytic|).
template <class Loss>
::testing::AssertionResult matches_finite_differences(Loss loss, std::vector<double> point,
                                                      const std::vector<double>& analytic,
                                                      double step = 1e-6, double tolerance = 1e-6) {
  for (size_t i = 0; i < point.size(); ++i) {
    const double saved = point[i];
    point[i] = saved + step;
    const double up = loss(point);
    point[i] = saved - step;
    const double down = loss(point);
    point[i] = saved;
    const double numeric = (up - down) / (2 * step);
    if (!(std::fabs(numeric - analytic[i]) <= tolerance * (1 + std::fabs(analytic[i])))) {
      return ::testing::AssertionFailure() << "component " << i << ": finite difference " << numeric
                                           << ", analytic " << analytic[i];
    }
  }
  return ::testing::AssertionSuccess();
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// 16-bit storage: a float32 value's bits after rounding to bfloat16 or float16, and back.
inline float widen_one(uint16_t bits, DType dtype) {
  return dtype == DType::bfloat16 ? to_float(bfloat16{bits}) : to_float(float16{bits});
}
inline std::vector<uint16_t> narrow_all(const std::vector<float>& values, DType dtype) {
  std::vector<uint16_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    out[i] = dtype == DType::bfloat16 ? to_bfloat16(values[i]).bits : to_float16(values[i]).bits;
  }
  return out;
}
inline std::vector<float> widen_all(const std::vector<uint16_t>& bits, DType dtype) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = widen_one(bits[i], dtype);
  return out;
}

// Within one unit in the last place of the 16-bit storage type (0.5 from the final rounding, the
// rest from float32), plus the same of `scale` for results that cancel. NaN must match NaN.
inline ::testing::AssertionResult within_storage_ulp(const std::vector<float>& got,
                                                     const std::vector<double>& want, DType dtype,
                                                     double scale) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  }
  const double unit = dtype == DType::bfloat16 ? 0x1p-7 : 0x1p-10;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    const double allowed = unit * (std::fabs(want[i]) + scale);
    if (!(std::fabs(got[i] - want[i]) <= allowed)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace addnorm::testing
