// How sure a measurement over several seeds is: the median and the interquartile range of the
// per-seed values. The stochastic experiments (init-gradients, update-size, depth-training, and
// the spread beside gradient-flow's and activation-growth's single draws) report their headline
// numbers this way instead of as a mean, so one outlying seed cannot move them far and the reader
// sees how much the seeds disagree.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <vector>

namespace addnorm::lab {

struct Spread {
  double median = 0.0;
  double low = 0.0;   // 25th percentile
  double high = 0.0;  // 75th percentile
  int count = 0;      // how many values (seeds)
};

// The q-quantile (q in [0, 1]) with linear interpolation between order statistics, NumPy's
// default ("linear"): position q (n - 1) in the sorted values. NaN values sort last (a diverged
// run counts as larger than every finite value). Throws Error for an empty list.
double quantile(std::span<const double> values, double q);
Spread spread_of(std::span<const double> values);

// {"median": m, "q25": low, "q75": high, "seeds": count}
nlohmann::json to_json(const Spread& spread);
nlohmann::json to_json(const std::vector<Spread>& spreads);  // a list of those

}  // namespace addnorm::lab
