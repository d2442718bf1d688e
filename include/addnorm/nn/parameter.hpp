// Trainable parameters of the nn layers: a value, its gradient and a name, plus the global
// operations an optimiser step needs (zeroing, norms, clipping).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "addnorm/tensor.hpp"

namespace addnorm::nn {

// One trainable tensor. Backward passes *accumulate* into `grad`; call zero_grad between steps.
struct Parameter {
  Parameter() = default;
  Parameter(std::string parameter_name, const Shape& shape);

  std::string name;  // dotted path, e.g. "blocks.3.attn.in_proj.weight"
  int layer = -1;    // index of the block it belongs to in a Stack; -1 outside any block
  Tensor value;
  Tensor grad;  // same shape as value
};

// Non-owning pointers to a model's parameters, in a fixed order (the order Adam keeps its state
// in). They stay valid while the module that returned them is alive and not moved.
using ParameterList = std::vector<Parameter*>;

void zero_grad(const ParameterList& parameters);

// The L2 norm of one tensor's values, summed in float64 in index order.
double l2_norm(ConstView values);

// sqrt(sum over parameters of |grad|^2), in float64, in list order.
double global_grad_norm(const ParameterList& parameters);

// Scales every gradient by max_norm / norm when the global norm exceeds max_norm (max_norm > 0,
// finite). Returns the global norm before clipping.
double clip_grad_norm(const ParameterList& parameters, double max_norm);

// The gradient and value norm of every parameter, for per-layer gradient-flow plots.
struct ParameterNorm {
  std::string name;
  int layer = -1;
  double grad_norm = 0;
  double value_norm = 0;
};
std::vector<ParameterNorm> parameter_norms(const ParameterList& parameters);

// Total number of trainable values.
int64_t parameter_count(const ParameterList& parameters);

}  // namespace addnorm::nn
