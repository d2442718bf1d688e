// Median and interquartile range over seeds (see seed_spread.hpp).
#include "addnorm/lab/seed_spread.hpp"

#include <algorithm>
#include <cmath>

#include "addnorm/error.hpp"

namespace addnorm::lab {

double quantile(std::span<const double> values, double q) {
  if (values.empty()) throw Error("quantile of an empty list of values");
  std::vector<double> sorted(values.begin(), values.end());
  // NaN last: a diverged seed is worse than any finite value, not a reason to lose the others.
  std::sort(sorted.begin(), sorted.end(), [](double a, double b) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
    return a < b;
  });
  const double position = q * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  if (fraction == 0.0) return sorted[below];
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

Spread spread_of(std::span<const double> values) {
  return {quantile(values, 0.5), quantile(values, 0.25), quantile(values, 0.75),
          static_cast<int>(values.size())};
}

nlohmann::json to_json(const Spread& spread) {
  return {{"median", spread.median},
          {"q25", spread.low},
          {"q75", spread.high},
          {"seeds", spread.count}};
}

nlohmann::json to_json(const std::vector<Spread>& spreads) {
  nlohmann::json list = nlohmann::json::array();
  for (const Spread& spread : spreads) list.push_back(to_json(spread));
  return list;
}

}  // namespace addnorm::lab
