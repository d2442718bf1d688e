// Adam with the 2017 paper's learning-rate schedule and global-norm gradient clipping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "addnorm/nn/parameter.hpp"

namespace addnorm::nn {

enum class LrScheduleKind {
  constant,  // lr every step
  // The 2017 paper: factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).
  noam,
  // lr * min(1, step / warmup_steps): a linear warmup to lr, then constant.
  linear_warmup,
};

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::constant;
  double lr = 1e-3;             // constant and linear_warmup
  int64_t warmup_steps = 4000;  // noam and linear_warmup, >= 1
  int64_t d_model = 512;        // noam only, >= 1
  double factor = 1.0;          // noam only
  // The rate of optimiser step `step` (counting from 1). Throws Error for step < 1.
  double rate(int64_t step) const;
};

struct AdamOptions {
  double beta1 = 0.9;  // the 2017 paper's values
  double beta2 = 0.98;
  double eps = 1e-9;
  LrSchedule schedule;
  double clip_norm = 0;  // > 0: clip the global gradient norm to this before the update
};

struct AdamStep {
  int64_t step = 0;      // this step's number, from 1
  double lr = 0;         // the rate used
  double grad_norm = 0;  // global gradient norm before clipping
  bool clipped = false;
};

class Adam {
 public:
  // Throws Error naming the option when out of range (betas in [0, 1), eps >= 0, clip_norm >= 0).
  Adam(ParameterList parameters, const AdamOptions& options);

  // One update with the current gradients (PyTorch's Adam with bias correction, no weight
  // decay). Does not zero the gradients.
  AdamStep step();
  int64_t steps() const { return steps_; }
  const ParameterList& parameters() const { return parameters_; }

 private:
  ParameterList parameters_;
  AdamOptions options_;
  int64_t steps_ = 0;
  std::vector<std::vector<float>> first_moment_, second_moment_;
};

}  // namespace addnorm::nn
