// The tour's Python/NumPy printing against what Python 3 and NumPy 1.24 print for the same
// values (each expected string was produced by /usr/bin/python3).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tour/numpy_format.hpp"

namespace addnorm::tour {
namespace {

TEST(TourFormat, PythonRepr) {
  EXPECT_EQ(python_repr(5.0), "5.0");
  EXPECT_EQ(python_repr(2.23607), "2.23607");
  EXPECT_EQ(python_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(python_repr(1e-5), "1e-05");
  EXPECT_EQ(python_repr(0.0001), "0.0001");
  EXPECT_EQ(python_repr(1e16), "1e+16");
  EXPECT_EQ(python_repr(123456789012345.6), "123456789012345.6");
  EXPECT_EQ(python_repr(std::pow(2.0, 70)), "1.1805916207174113e+21");
  EXPECT_EQ(python_repr(-0.0), "-0.0");
  EXPECT_EQ(python_repr(6.861952342973359e-14), "6.861952342973359e-14");
  EXPECT_EQ(python_repr_float32(1.1f), "1.1");
  EXPECT_EQ(python_repr_float32(0.4472126f), "0.4472126");
  EXPECT_EQ(python_list({{1.0, 2.0}}), "[1.0, 2.0]");
}

TEST(TourFormat, PythonRoundAndNumpyRoundDiffer) {
  // 2.675 is stored as 2.67499999...: round() sees that, np.round's x * 100 rounds up first.
  EXPECT_EQ(python_round(2.675, 2), 2.67);
  EXPECT_EQ(numpy_round(2.675, 2), 2.68);
  EXPECT_EQ(python_round(0.125, 2), 0.12);  // ties to even
  EXPECT_EQ(numpy_round(1.0000005, 6), 1.000001);
}

TEST(TourFormat, NumpyOneDimensional) {
  EXPECT_EQ(numpy_str(std::vector<double>{-1.3416, -0.4472, 0.4472, 1.3416}),
            "[-1.3416 -0.4472  0.4472  1.3416]");
  EXPECT_EQ(numpy_str(std::vector<double>{2.0, 4.0, 6.0, 8.0}), "[2. 4. 6. 8.]");
  EXPECT_EQ(numpy_str(std::vector<double>{0.1 + 0.2, -7.0, 100.25}), "[  0.3   -7.   100.25]");
  EXPECT_EQ(numpy_str(std::vector<double>{1.0 / 3.0, 2.0}), "[0.33333333 2.        ]");
  EXPECT_EQ(numpy_str(std::vector<double>{-0.0, 0.0}), "[-0.  0.]");
  EXPECT_EQ(numpy_str(std::vector<double>{NAN, 1.5, -INFINITY}), "[ nan  1.5 -inf]");
  EXPECT_EQ(numpy_str(std::vector<double>{INFINITY, 12345.5}), "[    inf 12345.5]");
  EXPECT_EQ(numpy_str(std::vector<double>{NAN}), "[nan]");
}

TEST(TourFormat, NumpyExponentFormat) {
  EXPECT_EQ(numpy_str(std::vector<double>{1e-5, 1.0}), "[1.e-05 1.e+00]");
  EXPECT_EQ(numpy_str(std::vector<double>{1e-5, -2.5e10, 1.0}), "[ 1.0e-05 -2.5e+10  1.0e+00]");
  EXPECT_EQ(numpy_str(std::vector<double>{NAN, 1e-5, 1.0}), "[   nan 1.e-05 1.e+00]");
}

TEST(TourFormat, NumpyTwoDimensional) {
  EXPECT_EQ(numpy_str(std::vector<double>{1200, 2.0, 45, 1500, 3.0, 70, 2000, 3.5, 80}, 3, 3),
            "[[1200.     2.    45. ]\n [1500.     3.    70. ]\n [2000.     3.5   80. ]]");
}

TEST(TourFormat, ProseAndPrintf) {
  EXPECT_EQ(prose_list(std::vector<double>{0.39, -1.57, 0.0, 1.18}, 2), "[0.39, -1.57, 0, 1.18]");
  EXPECT_EQ(prose_number(-0.0001, 2), "0");
  EXPECT_EQ(prose_number(0.5, 4), "0.5");
  EXPECT_EQ(scientific(0.0008618550018821013, 2), "8.62e-04");
  EXPECT_EQ(fixed(3.310074832928725, 2), "3.31");
}

}  // namespace
}  // namespace addnorm::tour
