// Summary statistics of an activation tensor, for the per-layer plots of the lab.
#pragma once

#include "addnorm/tensor.hpp"

namespace addnorm::nn {

struct ActivationStats {
  double mean = 0;             // over every element
  double std = 0;              // population standard deviation over every element
  double rms = 0;              // sqrt(mean of squares)
  double mean_token_norm = 0;  // mean over rows (tokens) of the L2 norm over the last axis
  double max_abs = 0;
};

// Statistics of x [..., d], accumulated in float64 in index order (thread-count independent).
// NaN values propagate into every field.
ActivationStats activation_stats(ConstView x);

}  // namespace addnorm::nn
