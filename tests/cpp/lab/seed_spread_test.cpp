// Median and quartiles over seeds: NumPy's default (linear) quantile, worked out by hand.
#include "addnorm/lab/seed_spread.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "addnorm/error.hpp"

namespace addnorm::lab {
namespace {

TEST(LabSeedSpread, LinearQuantilesLikeNumPy) {
  // np.quantile([4, 1, 3, 2], [0.25, 0.5, 0.75]) = [1.75, 2.5, 3.25]: positions 0.75, 1.5, 2.25
  // in the sorted [1, 2, 3, 4].
  const std::vector<double> values{4, 1, 3, 2};
  const Spread spread = spread_of(values);
  EXPECT_DOUBLE_EQ(spread.median, 2.5);
  EXPECT_DOUBLE_EQ(spread.low, 1.75);
  EXPECT_DOUBLE_EQ(spread.high, 3.25);
  EXPECT_EQ(spread.count, 4);
  // Odd count: the middle value; one value: itself at every quantile.
  EXPECT_DOUBLE_EQ(quantile(std::vector<double>{5, -1, 7}, 0.5), 5.0);
  const Spread one = spread_of(std::vector<double>{0.3});
  EXPECT_DOUBLE_EQ(one.low, 0.3);
  EXPECT_DOUBLE_EQ(one.high, 0.3);
}

TEST(LabSeedSpread, NanCountsAsTheLargestAndEmptyIsAnError) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Sorted: 1, 2, 3, NaN. The median lies between 2 and 3; only the top quantile sees the NaN.
  const std::vector<double> values{nan, 3, 1, 2};
  EXPECT_DOUBLE_EQ(quantile(values, 0.5), 2.5);
  EXPECT_TRUE(std::isnan(quantile(values, 1.0)));
  EXPECT_THROW(quantile(std::vector<double>{}, 0.5), Error);
}

}  // namespace
}  // namespace addnorm::lab
