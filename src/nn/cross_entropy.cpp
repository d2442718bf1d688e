// Softmax cross-entropy with log-sum-exp in float64.
#include "addnorm/nn/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "addnorm/error.hpp"

namespace addnorm::nn {

double softmax_cross_entropy(ConstView logits, std::span<const int32_t> targets,
                             OptionalMutable dlogits, int32_t ignore_index) {
  if (logits.shape.rank() < 1 || logits.shape[logits.shape.rank() - 1] < 1) {
    throw Error("logits has shape " + logits.shape.to_string() + ", expected [..., classes >= 1]");
  }
  const int64_t classes = logits.shape[logits.shape.rank() - 1];
  const int64_t rows = logits.numel() / classes;
  if (static_cast<int64_t>(targets.size()) != rows) {
    throw Error("targets has " + std::to_string(targets.size()) + " entries, expected " +
                std::to_string(rows) + " (one per row of logits)");
  }
  if (dlogits && !(dlogits->shape == logits.shape)) {
    throw Error("dlogits has shape " + dlogits->shape.to_string() + ", expected " +
                logits.shape.to_string());
  }
  int64_t counted = 0;
  for (int64_t row = 0; row < rows; ++row) {
    const int32_t target = targets[static_cast<size_t>(row)];
    if (target == ignore_index) continue;
    if (target < 0 || target >= classes) {
      throw Error("targets[" + std::to_string(row) + "] is " + std::to_string(target) +
                  ", expected a value in [0, " + std::to_string(classes) + ") or ignore_index " +
                  std::to_string(ignore_index));
    }
    ++counted;
  }
  const double weight = counted == 0 ? 0.0 : 1.0 / static_cast<double>(counted);
  double total = 0;
  for (int64_t row = 0; row < rows; ++row) {
    const float* z = logits.data + row * classes;
    const int32_t target = targets[static_cast<size_t>(row)];
    float* dz = dlogits ? dlogits->data + row * classes : nullptr;
    if (target == ignore_index) {
      if (dz != nullptr) std::fill(dz, dz + classes, 0.0f);
      continue;
    }
    const double max = *std::max_element(z, z + classes);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c]) - max);
    const double log_sum = std::log(sum) + max;
    total += log_sum - z[target];
    if (dz != nullptr) {
      for (int64_t c = 0; c < classes; ++c) {
        const double probability = std::exp(static_cast<double>(z[c]) - log_sum);
        dz[c] = static_cast<float>(weight * (probability - (c == target ? 1.0 : 0.0)));
      }
    }
  }
  return total * weight;
}

}  // namespace addnorm::nn
