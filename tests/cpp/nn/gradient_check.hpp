// Finite-difference checks for the nn layers (and the small stack the nn tests share). The loss is
// L = sum_i w_i y_i in float64 over the float32 outputs y of a forward, so dL/dy = w is what
// backward receives; each checked element is moved by +-step and the central difference (in
// float64) is compared with the analytic gradient. The step is large enough that float32 rounding
// of y (about 1e-7 relative) stays far below the tolerance, and small enough that the truncation
// error (step^2) does too.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "addnorm/nn/stack.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::nn::testing {

// A stack small enough for exhaustive checks: width 16, 4 heads, FFN 32.
inline StackConfig small_stack(Placement placement, int64_t depth = 3, uint64_t seed = 3) {
  StackConfig config;
  config.depth = depth;
  config.block.d_model = 16;
  config.block.n_heads = 4;
  config.block.d_ff = 32;
  config.block.placement = placement;
  config.seed = seed;
  return config;
}

inline Tensor random_tensor(const Shape& shape, uint32_t seed, float scale = 1.0f) {
  Tensor t(shape);
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> distribution(-scale, scale);
  for (float& value : t.values()) value = distribution(engine);
  return t;
}

inline double weighted_sum(const Tensor& y, const Tensor& w) {
  double sum = 0;
  for (int64_t i = 0; i < y.numel(); ++i) sum += static_cast<double>(y[i]) * w[i];
  return sum;
}

// Checks `analytic` (the gradient of loss() with respect to `values`) at a spread of indices
// (every index when there are few) by central differences.
inline void expect_gradient(const std::string& what, std::vector<float>& values,
                            const std::vector<float>& analytic, const std::function<double()>& loss,
                            float step = 1e-2f, double tolerance = 1e-2) {
  ASSERT_EQ(values.size(), analytic.size()) << what;
  double scale = 0;
  for (float g : analytic) scale = std::max(scale, std::fabs(static_cast<double>(g)));
  const size_t count = values.size();
  const size_t stride = count <= 24 ? 1 : count / 17;
  int checked = 0;
  for (size_t i = 0; i < count; i += stride) {
    const float saved = values[i];
    values[i] = saved + step;
    const double plus = loss();
    values[i] = saved - step;
    const double minus = loss();
    values[i] = saved;
    const double numeric = (plus - minus) / (2.0 * static_cast<double>(step));
    EXPECT_NEAR(analytic[i], numeric, tolerance * scale + 2e-4)
        << what << "[" << i << "] (largest |gradient| " << scale << ")";
    ++checked;
  }
  EXPECT_GT(checked, 0) << what;
}

}  // namespace addnorm::nn::testing
