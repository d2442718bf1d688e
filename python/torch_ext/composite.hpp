// The operators written as differentiable ATen ops, for what addnorm's own kernels cannot do
// inside PyTorch's autograd: forward-mode AD (dual tensors: torch.autograd.forward_ad,
// torch.func.jvp), functorch's transforms (grad, vmap, jacrev, jacfwd: their tensors are
// wrappers with no storage), meta tensors (no storage either), and differentiating a backward again
// (double backward, gradgradcheck, Hessians). There PyTorch's ops compute, so the results are
// PyTorch's to its own accuracy; everywhere else addnorm's kernels run (autograd.cpp decides per
// call).
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>
#include <vector>

#include "kernels.hpp"

namespace addnorm::torch_ops::composite {

// Whether a call needs the composite forms: an input carries a forward-mode tangent, is one
// of functorch's wrapped tensors, or is a meta tensor (shapes and dtypes only: PyTorch's meta
// kernels then propagate them, as for its own norms).
bool needed(const std::vector<OptionalTensor>& tensors);

// Forwards.
at::Tensor norm(const at::Tensor& input, const OptionalTensor& weight, const OptionalTensor& bias,
                const NormSpec& spec);
std::tuple<at::Tensor, at::Tensor> add_norm_pre(const at::Tensor& x, const at::Tensor& r,
                                                const OptionalTensor& weight,
                                                const OptionalTensor& bias, const NormSpec& spec);
at::Tensor add_norm_post(const at::Tensor& x, const at::Tensor& s, const OptionalTensor& weight,
                         const OptionalTensor& bias, const NormSpec& spec,
                         const DropoutSpec& dropout);
at::Tensor dropout(const at::Tensor& input, const DropoutSpec& spec);

// Backwards as graphs: the gradients of the composite forward, recorded so that they can be
// differentiated again (each is differentiable in grad_y and in every input). A gradient is
// returned for every input that is present, undefined for an absent one.
std::vector<at::Tensor> norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                                      const OptionalTensor& weight, const OptionalTensor& bias,
                                      const NormSpec& spec);
// (dh, dweight, dbias): dh includes grad_h when given.
std::vector<at::Tensor> add_norm_pre_backward(const at::Tensor& grad_y,
                                              const OptionalTensor& grad_h, const at::Tensor& h,
                                              const OptionalTensor& weight,
                                              const OptionalTensor& bias, const NormSpec& spec);
// (dx, ds, dweight, dbias).
std::vector<at::Tensor> add_norm_post_backward(const at::Tensor& grad_y, const at::Tensor& x,
                                               const at::Tensor& s, const OptionalTensor& weight,
                                               const OptionalTensor& bias, const NormSpec& spec,
                                               const DropoutSpec& dropout);
// BatchNorm: training normalises by the batch's statistics, inference by the given ones.
std::vector<at::Tensor> batch_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                                            const OptionalTensor& weight,
                                            const OptionalTensor& bias,
                                            const OptionalTensor& running_mean,
                                            const OptionalTensor& running_var, bool training,
                                            double eps);
std::vector<at::Tensor> group_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                                            int64_t num_groups, const OptionalTensor& weight,
                                            const OptionalTensor& bias, double eps);

}  // namespace addnorm::torch_ops::composite
