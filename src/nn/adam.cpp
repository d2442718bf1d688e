// Adam (PyTorch's update with bias correction) with the 2017 paper's schedule and clipping.
#include "addnorm/nn/adam.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "addnorm/error.hpp"

namespace addnorm::nn {

double LrSchedule::rate(int64_t step) const {
  if (step < 1) throw Error("step is " + std::to_string(step) + ", expected >= 1");
  const auto s = static_cast<double>(step);
  switch (kind) {
    case LrScheduleKind::constant:
      return lr;
    case LrScheduleKind::linear_warmup:
      return step >= warmup_steps ? lr : lr * s / static_cast<double>(warmup_steps);
    case LrScheduleKind::noam:
      break;
  }
  return factor * std::pow(static_cast<double>(d_model), -0.5) *
         std::min(std::pow(s, -0.5), s * std::pow(static_cast<double>(warmup_steps), -1.5));
}

Adam::Adam(ParameterList parameters, const AdamOptions& options)
    : parameters_(std::move(parameters)), options_(options) {
  auto in_unit = [](double value, const char* what) {
    if (!(value >= 0.0 && value < 1.0)) {
      throw Error(std::string(what) + " is " + std::to_string(value) + ", expected [0, 1)");
    }
  };
  in_unit(options.beta1, "beta1");
  in_unit(options.beta2, "beta2");
  if (!(options.eps >= 0.0) || !std::isfinite(options.eps)) {
    throw Error("eps is " + std::to_string(options.eps) + ", expected a finite value >= 0");
  }
  if (!(options.clip_norm >= 0.0)) {
    throw Error("clip_norm is " + std::to_string(options.clip_norm) + ", expected >= 0 (0: off)");
  }
  const LrSchedule& schedule = options.schedule;
  if (schedule.kind == LrScheduleKind::noam &&
      (schedule.warmup_steps < 1 || schedule.d_model < 1)) {
    throw Error("schedule warmup_steps and d_model must be >= 1, got " +
                std::to_string(schedule.warmup_steps) + " and " + std::to_string(schedule.d_model));
  }
  if (schedule.kind == LrScheduleKind::linear_warmup && schedule.warmup_steps < 1) {
    throw Error("schedule warmup_steps is " + std::to_string(schedule.warmup_steps) +
                ", expected >= 1");
  }
  if (schedule.kind != LrScheduleKind::noam &&
      !(schedule.lr >= 0.0 && std::isfinite(schedule.lr))) {
    throw Error("lr is " + std::to_string(schedule.lr) + ", expected a finite value >= 0");
  }
  for (const Parameter* parameter : parameters_) {
    first_moment_.emplace_back(static_cast<size_t>(parameter->value.numel()), 0.0f);
    second_moment_.emplace_back(static_cast<size_t>(parameter->value.numel()), 0.0f);
  }
}

AdamStep Adam::step() {
  AdamStep info;
  info.step = ++steps_;
  info.lr = options_.schedule.rate(steps_);
  if (options_.clip_norm > 0) {
    info.grad_norm = clip_grad_norm(parameters_, options_.clip_norm);
    info.clipped = info.grad_norm > options_.clip_norm;
  } else {
    info.grad_norm = global_grad_norm(parameters_);
  }
  const auto beta1 = static_cast<float>(options_.beta1);
  const auto beta2 = static_cast<float>(options_.beta2);
  const double correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(steps_));
  const double correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(steps_));
  const auto step_size = static_cast<float>(info.lr / correction1);
  const auto sqrt_correction2 = static_cast<float>(std::sqrt(correction2));
  const auto eps = static_cast<float>(options_.eps);
  for (size_t index = 0; index < parameters_.size(); ++index) {
    Parameter& parameter = *parameters_[index];
    float* value = parameter.value.data();
    const float* grad = parameter.grad.data();
    float* m = first_moment_[index].data();
    float* v = second_moment_[index].data();
    const int64_t count = parameter.value.numel();
    for (int64_t i = 0; i < count; ++i) {
      m[i] = beta1 * m[i] + (1.0f - beta1) * grad[i];
      v[i] = beta2 * v[i] + (1.0f - beta2) * grad[i] * grad[i];
      const float denominator = std::sqrt(v[i]) / sqrt_correction2 + eps;
      value[i] -= step_size * m[i] / denominator;
    }
  }
  return info;
}

}  // namespace addnorm::nn
