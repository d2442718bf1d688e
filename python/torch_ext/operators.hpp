// The operators torch.ops.addnorm.* with their schema signatures (ops.cpp defines and registers
// them as CPU kernels; autograd.cpp calls them through the dispatcher by these types).
// Backward ops return undefined gradients (None) for absent weight/bias, and for those their
// output_mask (PyTorch's convention: one flag per output) leaves out.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>

#include <array>
#include <cstdint>
#include <tuple>

namespace addnorm::torch_ops::ops {

using OptionalTensor = c10::optional<at::Tensor>;
using Grads2 = std::tuple<at::Tensor, at::Tensor>;
using Grads3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;
using Grads4 = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

at::Tensor layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                      const OptionalTensor& weight, const OptionalTensor& bias, double eps);
Grads3 layer_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                           at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                           const OptionalTensor& bias, double eps, const OptionalTensor& mean,
                           const OptionalTensor& rstd, std::array<bool, 3> output_mask);

at::Tensor rms_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                    const OptionalTensor& weight, c10::optional<double> eps,
                    bool zero_centered_weight);
Grads2 rms_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                         at::IntArrayRef normalized_shape, const OptionalTensor& weight, double eps,
                         bool zero_centered_weight, const OptionalTensor& rstd,
                         std::array<bool, 2> output_mask);

Grads2 add_norm_pre(const at::Tensor& x, const at::Tensor& r, at::IntArrayRef normalized_shape,
                    const OptionalTensor& weight, const OptionalTensor& bias,
                    c10::optional<double> eps, c10::string_view norm, bool zero_centered_weight);
Grads3 add_norm_pre_backward(const at::Tensor& grad_y, const OptionalTensor& grad_h,
                             const at::Tensor& h, at::IntArrayRef normalized_shape,
                             const OptionalTensor& weight, const OptionalTensor& bias, double eps,
                             c10::string_view norm, bool zero_centered_weight,
                             const OptionalTensor& mean, const OptionalTensor& rstd,
                             std::array<bool, 3> output_mask);

at::Tensor add_norm_post(const at::Tensor& x, const at::Tensor& s, at::IntArrayRef normalized_shape,
                         const OptionalTensor& weight, const OptionalTensor& bias,
                         c10::optional<double> eps, c10::string_view norm,
                         bool zero_centered_weight, double p, int64_t seed, int64_t offset);
Grads4 add_norm_post_backward(const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& s,
                              at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                              const OptionalTensor& bias, double eps, c10::string_view norm,
                              bool zero_centered_weight, double p, int64_t seed, int64_t offset,
                              const OptionalTensor& mean, const OptionalTensor& rstd,
                              std::array<bool, 4> output_mask);

at::Tensor batch_norm(const at::Tensor& input, const OptionalTensor& weight,
                      const OptionalTensor& bias, const OptionalTensor& running_mean,
                      const OptionalTensor& running_var, bool training, double momentum,
                      double eps);
Grads3 batch_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                           const OptionalTensor& weight, const OptionalTensor& bias,
                           const OptionalTensor& running_mean, const OptionalTensor& running_var,
                           bool training, double eps, std::array<bool, 3> output_mask);

at::Tensor group_norm(const at::Tensor& input, int64_t num_groups, const OptionalTensor& weight,
                      const OptionalTensor& bias, double eps);
Grads3 group_norm_backward(const at::Tensor& grad_y, const at::Tensor& input, int64_t num_groups,
                           const OptionalTensor& weight, const OptionalTensor& bias, double eps,
                           std::array<bool, 3> output_mask);

at::Tensor dropout(const at::Tensor& input, double p, int64_t seed, int64_t offset);

}  // namespace addnorm::torch_ops::ops
