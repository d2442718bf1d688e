// What the reference kernels accumulate in: float64 for float32 data, and the x87 80-bit long
// double for float64 data, so that sums of squares of the largest finite inputs cannot overflow
// and cancellation in (x - mean) costs nothing visible at the storage precision.
#pragma once

#include <cmath>
#include <limits>

namespace addnorm::reference {

template <class T>
struct Accumulator;
template <>
struct Accumulator<float> {
  using type = double;
};
template <>
struct Accumulator<double> {
  using type = long double;
};
template <class T>
using Acc = typename Accumulator<T>::type;

template <class T>
constexpr T quiet_nan() {
  return std::numeric_limits<T>::quiet_NaN();
}

// 1 / sqrt(variance + eps). A variance + eps of 0 or below has no root, and gives NaN (a
// negative eps can do that to a row of any spread, as in PyTorch), except for a zero-spread row
// with eps = 0, whose rstd is +inf (normalise keeps its centred values, all exactly 0, at 0).
template <class A>
inline A rstd_of(A variance, A eps) {
  const A sum = variance + eps;
  if (sum > 0) return A(1) / std::sqrt(sum);
  return sum == 0 && variance == 0 ? std::numeric_limits<A>::infinity()
                                   : std::numeric_limits<A>::quiet_NaN();
}
// Inference's 1 / sqrt(running_var + eps): the values are not known to be centred, so a
// running_var + eps of 0 or below gives NaN outright.
template <class A>
inline A inference_rstd_of(A running_var, A eps) {
  const A rstd = rstd_of(running_var, eps);
  return std::isinf(rstd) ? std::numeric_limits<A>::quiet_NaN() : rstd;
}

// (x - mean) * rstd, except that an exactly centred value stays 0 when rstd is infinite
// (rstd_of: a constant row with eps = 0): the output of a constant row is then exactly beta.
// A NaN rstd makes every value NaN, as in the fast kernels.
template <class A>
inline A normalise(A centred, A rstd) {
  return centred == A(0) && !std::isnan(rstd) ? A(0) : centred * rstd;
}

}  // namespace addnorm::reference
