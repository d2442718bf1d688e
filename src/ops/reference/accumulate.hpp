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

// (x - mean) * rstd, except that an exactly centred value stays 0 when rstd is infinite
// (a constant row with eps = 0): the output of a constant row is then exactly beta. A NaN rstd
// (variance + eps < 0, with a negative eps) makes every value NaN, as in the fast kernels.
template <class A>
inline A normalise(A centred, A rstd) {
  return centred == A(0) && !std::isnan(rstd) ? A(0) : centred * rstd;
}

}  // namespace addnorm::reference
