// Seeded initialisers drawing from NumPy's generator, one value per element in C order.
#include "addnorm/nn/init.hpp"

#include <cmath>

namespace addnorm::nn {

void uniform_fill(MutableView weight, double low, double high, Generator& generator) {
  const int64_t count = weight.numel();
  for (int64_t i = 0; i < count; ++i) {
    weight.data[i] = static_cast<float>(low + (high - low) * generator.next_double());
  }
}

void xavier_uniform(MutableView weight, int64_t fan_in, int64_t fan_out, double gain,
                    Generator& generator) {
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  uniform_fill(weight, -bound, bound, generator);
}

void normal_fill(MutableView weight, double std, Generator& generator) {
  const int64_t count = weight.numel();
  for (int64_t i = 0; i < count; ++i) {
    weight.data[i] = static_cast<float>(std * generator.standard_normal());
  }
}

}  // namespace addnorm::nn
