// The CPU kernels behind torch.ops.addnorm.*: each takes at::Tensors, checks them (device,
// dtype, shapes, values: errors name the argument), and runs addnorm's library on the tensors'
// memory. float32, bfloat16 and float16 run the library's ops (addnorm/ops.hpp), which take
// 16-bit storage directly for every norm, both Add & Norm placements and dropout; float64 runs
// the library's float64 ops (addnorm/float64.hpp).
//
// ops.cpp registers these as the operators' CPU kernels; autograd.cpp calls them from the
// autograd kernels (to keep the statistics a backward reuses).
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <array>
#include <cstdint>
#include <vector>

#include "addnorm/ops.hpp"

namespace addnorm::torch_ops {

using OptionalTensor = c10::optional<at::Tensor>;

// What a norm is, apart from its tensors.
struct NormSpec {
  NormKind kind = NormKind::layer_norm;
  std::vector<int64_t> normalized_shape;
  double eps = 1e-5;
  bool zero_centered_weight = false;  // RMSNorm only: scale by (1 + weight)
};

struct DropoutSpec {
  double p = 0.0;
  int64_t seed = 0;
  int64_t offset = 0;
};

// The normalised output and, when asked for, the statistics a backward reuses (float32, or
// float64 for float64 input; mean only for LayerNorm).
struct NormOutputs {
  at::Tensor y, mean, rstd;
};
struct NormGrads {
  at::Tensor dx, dweight, dbias;  // dweight/dbias undefined where the parameter is absent
};

// Which parameter gradients a backward computes, as the output_mask of PyTorch's own backward
// ops: autograd asks only for those a graph edge needs, so a frozen weight and bias (fine-tuning
// with the norms frozen) skip the float64 dγ/dβ sums.
struct ParameterGrads {
  bool weight = true;
  bool bias = true;
};

// A gradient an output_mask leaves out: undefined (None), as PyTorch's backward ops return it.
// (dx is computed whatever the mask, as the library always writes it; dweight and dbias are
// left out of the computation by ParameterGrads.)
inline at::Tensor masked(const at::Tensor& gradient, bool wanted) {
  return wanted ? gradient : at::Tensor();
}

// The dtype the library computes a tensor of a supported dtype in: float64 for float64, float32
// for float32 and the 16-bit types (whose statistics and parameter gradients are float32, as in
// PyTorch's own norms).
at::ScalarType compute_type(const at::Tensor& tensor);

// Saved statistics given to a backward operator must be what the forward saves: x's compute
// type, x's dimensions before normalized_shape, and for a norm that centres both mean and rstd
// or neither (then they are recomputed); RMSNorm takes no mean. Raises naming the argument.
void check_saved_statistics(const OptionalTensor& mean, const OptionalTensor& rstd,
                            const at::Tensor& x, const NormSpec& spec);

// "layer_norm" or "rms_norm", as the operators' `norm` argument spells it.
NormKind norm_kind(c10::string_view norm);
// The eps a torch operator runs with: the one given, or PyTorch's default for the kind:
// F.layer_norm's 1e-5, and for RMSNorm the machine epsilon of the input's compute type
// (F.rms_norm's eps=None: float32's for float32, bfloat16 and float16 input; float64's for
// float64). Every operator of the face, plain or fused, resolves eps=None here.
double eps_or_default(c10::optional<double> eps, NormKind kind, const at::Tensor& input);

NormOutputs norm_forward(const at::Tensor& input, const OptionalTensor& weight,
                         const OptionalTensor& bias, const NormSpec& spec, bool save_stats);
// dx = Norm'(grad_y) at input (+ grad_h, the residual stream's gradient, when given).
NormGrads norm_backward(const at::Tensor& grad_y, const OptionalTensor& grad_h,
                        const at::Tensor& input, const OptionalTensor& weight,
                        const OptionalTensor& bias, const NormSpec& spec,
                        const OptionalTensor& mean, const OptionalTensor& rstd,
                        ParameterGrads wanted = {});

// Refuses an undefined tensor (None for a tensor argument, from Python) by name; the first of
// check_tensor's checks, for the places that must run before it.
void check_defined(const char* name, const at::Tensor& tensor);

// The fused ops' two addends as `x + r` combines them: broadcast to one shape and promoted to
// one dtype by PyTorch's rules (with its errors for shapes that do not broadcast), each
// returned as it is where it already agrees, the fused kernels' own case. Called above
// autograd, the expansion and the cast are recorded, so each gradient comes back summed and
// cast to its addend's shape and dtype.
// `branch`: the second addend's name in errors ("r" or "s"); an undefined addend (None from
// Python) is refused by name first, as check_tensor refuses it.
std::pair<at::Tensor, at::Tensor> as_addends(const at::Tensor& x, const at::Tensor& r,
                                             const char* branch);

// Post-norm's branch s where the sum broadcasts it and dropout drops: Norm(x + Dropout(s))
// drops s's own elements, so the mask is drawn over s before the broadcast (`drop(s, spec)`)
// and the fused op then runs with p = 0. Otherwise s, and the spec unchanged.
template <class Drop>
at::Tensor dropped_before_broadcast(const at::Tensor& s, const at::Tensor& x, DropoutSpec& dropout,
                                    const Drop& drop) {
  check_defined("x", x);
  check_defined("s", s);
  // As x + F.dropout(s): dropout draws on floating-point values only, broadcast or not.
  TORCH_CHECK(dropout.p == 0.0 || at::isFloatingType(s.scalar_type()), "s has dtype ",
              s.scalar_type(), ", expected a floating-point branch where dropout drops (p > 0)");
  if (dropout.p == 0.0 || s.sizes() == at::IntArrayRef(at::infer_size(x.sizes(), s.sizes()))) {
    return s;
  }
  at::Tensor dropped = drop(s, dropout);
  dropout.p = 0.0;
  return dropped;
}

// Pre-norm: h = x + r and y = Norm(h).
struct PreNormOutputs {
  at::Tensor h, y, mean, rstd;
};
PreNormOutputs add_norm_pre_forward(const at::Tensor& x, const at::Tensor& r,
                                    const OptionalTensor& weight, const OptionalTensor& bias,
                                    const NormSpec& spec, bool save_stats);

// Post-norm: y = Norm(x + Dropout(s)); the backward regenerates the mask from the same spec.
NormOutputs add_norm_post_forward(const at::Tensor& x, const at::Tensor& s,
                                  const OptionalTensor& weight, const OptionalTensor& bias,
                                  const NormSpec& spec, const DropoutSpec& dropout,
                                  bool save_stats);
struct PostNormGrads {
  at::Tensor dx, ds, dweight, dbias;
};
PostNormGrads add_norm_post_backward(const at::Tensor& grad_y, const at::Tensor& x,
                                     const at::Tensor& s, const OptionalTensor& weight,
                                     const OptionalTensor& bias, const NormSpec& spec,
                                     const DropoutSpec& dropout, const OptionalTensor& mean,
                                     const OptionalTensor& rstd, ParameterGrads wanted = {});

// BatchNorm over channel axis 1 of (N, C, *), rank 2 to 5; training updates the running
// statistics in place (PyTorch's convention).
struct BatchNormSpec {
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
};
at::Tensor batch_norm_forward(const at::Tensor& input, const OptionalTensor& weight,
                              const OptionalTensor& bias, const OptionalTensor& running_mean,
                              const OptionalTensor& running_var, const BatchNormSpec& spec);
NormGrads batch_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                              const OptionalTensor& weight, const OptionalTensor& bias,
                              const OptionalTensor& running_mean, const OptionalTensor& running_var,
                              const BatchNormSpec& spec, ParameterGrads wanted = {});

// GroupNorm over channel axis 1 of (N, C, *): each sample's num_groups groups of channels
// normalised, weight and bias per channel (torch.nn.functional.group_norm). The statistics are
// shaped (N, num_groups), in the compute dtype.
struct GroupNormSpec {
  int64_t num_groups = 1;
  double eps = 1e-5;
};
NormOutputs group_norm_forward(const at::Tensor& input, const OptionalTensor& weight,
                               const OptionalTensor& bias, const GroupNormSpec& spec,
                               bool save_stats);
NormGrads group_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                              const OptionalTensor& weight, const OptionalTensor& bias,
                              const GroupNormSpec& spec, ParameterGrads wanted = {});

// Dropout with addnorm's counter-based mask; linear, so its backward is itself.
at::Tensor dropout_forward(const at::Tensor& input, const DropoutSpec& spec);

}  // namespace addnorm::torch_ops
