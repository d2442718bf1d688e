// Text the way Python and NumPy print it, so the tour's output reads exactly like the seed pages'
// NumPy runs: repr() of a float, round() and np.round(), and str() of a small float64 array.
//
// What this deliberately is not: a full NumPy printer. Arrays are printed with NumPy's default
// options (precision 8, floatmode 'maxprec', sign '-', no suppression) on one line per row; the
// tour's arrays are short, so line wrapping at 75 characters and summarisation are left out.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace addnorm::tour {

// Python's repr(float): the shortest digits that round-trip, "5.0", "2.23607", "1e-05".
std::string python_repr(double value);
// The same for a float32 value (NumPy's repr of np.float32): "1.1" for 1.1f, not 1.100000023.
std::string python_repr_float32(float value);
// A Python list of floats: "[1.0, 2.0]".
std::string python_list(std::span<const double> values);
std::string python_list_float32(std::span<const double> values);  // each value cast to float32

// Python's round(x, ndigits): the correctly rounded nearest, ties to even on the exact value.
double python_round(double value, int ndigits);
// np.round(x, decimals): rint(x * 10^decimals) / 10^decimals, which can differ from round() in
// the last bit.
double numpy_round(double value, int decimals);
std::vector<double> numpy_round(std::span<const double> values, int decimals);
// x + 0.0, the pages' trick that turns -0.0 into 0.0 before printing.
std::vector<double> plus_zero(std::vector<double> values);

// str(np.array(values)) for a 1-D float64 array: "[-1.3416 -0.4472  0.4472  1.3416]".
std::string numpy_str(std::span<const double> values);
// str() of a 2-D float64 array given in C order: "[[ 1.4135 -0.7455]\n [ 1.4131 -0.7551]]".
std::string numpy_str(std::span<const double> values, int64_t rows, int64_t cols);

// The pages' prose style for a list: fixed decimals with trailing zeros trimmed,
// "[0.39, -1.57, 0, 1.18]".
std::string prose_list(std::span<const double> values, int decimals);
// One number in that style: "2.55", "0.5", "0".
std::string prose_number(double value, int decimals);

// printf-style fixed and scientific formatting: fixed(0.000862, 2) is "0.00",
// scientific(0.000862, 2) is "8.62e-04" (Python's f"{x:.2e}").
std::string fixed(double value, int decimals);
std::string scientific(double value, int decimals);

}  // namespace addnorm::tour
