// Seeded weight initialisation. Every draw comes from NumPy's default generator (PCG64) seeded
// with the model seed, so a model is the same on every machine and for every thread count.
#pragma once

#include <cstdint>

#include "addnorm/numpy_random.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm::nn {

enum class InitScheme {
  // The 2017 paper's setup: Xavier/Glorot uniform weights, zero biases, embeddings N(0, 1/d).
  xavier_uniform,
  // GPT-2: N(0, 0.02) weights, zero biases, and N(0, 0.02 / sqrt(2 N)) on the projections that
  // write into the residual stream (attention output, second FFN layer), N = number of blocks.
  gpt2_scaled,
};

using Generator = numpy_random::Generator;

// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform(MutableView weight, int64_t fan_in, int64_t fan_out, double gain,
                    Generator& generator);
// N(0, std) for every element.
void normal_fill(MutableView weight, double std, Generator& generator);
// U(low, high) for every element.
void uniform_fill(MutableView weight, double low, double high, Generator& generator);

}  // namespace addnorm::nn
