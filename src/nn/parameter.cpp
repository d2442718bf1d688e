// Parameters and the global gradient operations (zeroing, norms, clipping).
#include "addnorm/nn/parameter.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "addnorm/error.hpp"

namespace addnorm::nn {

Parameter::Parameter(std::string parameter_name, const Shape& shape)
    : name(std::move(parameter_name)), value(shape), grad(shape) {}

void zero_grad(const ParameterList& parameters) {
  for (Parameter* parameter : parameters) {
    std::fill(parameter->grad.values().begin(), parameter->grad.values().end(), 0.0f);
  }
}

double l2_norm(ConstView values) {
  const int64_t count = values.numel();
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double value = values.data[i];
    sum += value * value;
  }
  return std::sqrt(sum);
}

double global_grad_norm(const ParameterList& parameters) {
  double sum = 0;
  for (const Parameter* parameter : parameters) {
    const double norm = l2_norm(parameter->grad.view());
    sum += norm * norm;
  }
  return std::sqrt(sum);
}

double clip_grad_norm(const ParameterList& parameters, double max_norm) {
  if (!(max_norm > 0) || !std::isfinite(max_norm)) {
    throw Error("max_norm is " + std::to_string(max_norm) + ", expected a finite value > 0");
  }
  const double norm = global_grad_norm(parameters);
  if (norm > max_norm) {
    // PyTorch's clip_grad_norm_ uses the same factor (with 1e-6 added to the norm).
    const auto factor = static_cast<float>(max_norm / (norm + 1e-6));
    for (Parameter* parameter : parameters) {
      for (float& g : parameter->grad.values()) g *= factor;
    }
  }
  return norm;
}

std::vector<ParameterNorm> parameter_norms(const ParameterList& parameters) {
  std::vector<ParameterNorm> norms;
  norms.reserve(parameters.size());
  for (const Parameter* parameter : parameters) {
    norms.push_back({parameter->name, parameter->layer, l2_norm(parameter->grad.view()),
                     l2_norm(parameter->value.view())});
  }
  return norms;
}

int64_t parameter_count(const ParameterList& parameters) {
  int64_t count = 0;
  for (const Parameter* parameter : parameters) count += parameter->value.numel();
  return count;
}

}  // namespace addnorm::nn
