// torch.ops.addnorm.*: the operators' schemas (TORCH_LIBRARY) and their CPU kernels, thin
// adapters from the schema's arguments to kernels.hpp.
#include <torch/library.h>

#include "kernels.hpp"
#include "operators.hpp"

namespace addnorm::torch_ops::ops {

namespace {

NormSpec spec_of(NormKind kind, at::IntArrayRef normalized_shape, double eps,
                 bool zero_centered_weight = false) {
  return {kind, normalized_shape.vec(), eps, zero_centered_weight};
}

}  // namespace

at::Tensor layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                      const OptionalTensor& weight, const OptionalTensor& bias, double eps) {
  return norm_forward(input, weight, bias, spec_of(NormKind::layer_norm, normalized_shape, eps),
                      false)
      .y;
}

Grads3 layer_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                           at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                           const OptionalTensor& bias, double eps, const OptionalTensor& mean,
                           const OptionalTensor& rstd, std::array<bool, 3> output_mask) {
  NormGrads grads = norm_backward(grad_y, {}, input, weight, bias,
                                  spec_of(NormKind::layer_norm, normalized_shape, eps), mean, rstd,
                                  {output_mask[1], output_mask[2]});
  return {masked(grads.dx, output_mask[0]), grads.dweight, grads.dbias};
}

at::Tensor rms_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                    const OptionalTensor& weight, c10::optional<double> eps,
                    bool zero_centered_weight) {
  const double resolved = eps_or_default(eps, NormKind::rms_norm, input);
  return norm_forward(input, weight, {},
                      spec_of(NormKind::rms_norm, normalized_shape, resolved, zero_centered_weight),
                      false)
      .y;
}

Grads2 rms_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                         at::IntArrayRef normalized_shape, const OptionalTensor& weight, double eps,
                         bool zero_centered_weight, const OptionalTensor& rstd,
                         std::array<bool, 2> output_mask) {
  NormGrads grads =
      norm_backward(grad_y, {}, input, weight, {},
                    spec_of(NormKind::rms_norm, normalized_shape, eps, zero_centered_weight), {},
                    rstd, {output_mask[1], false});
  return {masked(grads.dx, output_mask[0]), grads.dweight};
}

Grads2 add_norm_pre(const at::Tensor& x_in, const at::Tensor& r_in,
                    at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                    const OptionalTensor& bias, c10::optional<double> eps, c10::string_view norm,
                    bool zero_centered_weight) {
  const NormKind kind = norm_kind(norm);
  const auto [x, r] = as_addends(x_in, r_in, "r");
  PreNormOutputs out = add_norm_pre_forward(
      x, r, weight, bias,
      spec_of(kind, normalized_shape, eps_or_default(eps, kind, x), zero_centered_weight), false);
  return {out.h, out.y};
}

Grads3 add_norm_pre_backward(const at::Tensor& grad_y, const OptionalTensor& grad_h,
                             const at::Tensor& h, at::IntArrayRef normalized_shape,
                             const OptionalTensor& weight, const OptionalTensor& bias, double eps,
                             c10::string_view norm, bool zero_centered_weight,
                             const OptionalTensor& mean, const OptionalTensor& rstd,
                             std::array<bool, 3> output_mask) {
  NormGrads grads =
      norm_backward(grad_y, grad_h, h, weight, bias,
                    spec_of(norm_kind(norm), normalized_shape, eps, zero_centered_weight), mean,
                    rstd, {output_mask[1], output_mask[2]});
  return {masked(grads.dx, output_mask[0]), grads.dweight, grads.dbias};
}

at::Tensor add_norm_post(const at::Tensor& x_in, const at::Tensor& s_in,
                         at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                         const OptionalTensor& bias, c10::optional<double> eps,
                         c10::string_view norm, bool zero_centered_weight, double p, int64_t seed,
                         int64_t offset) {
  const NormKind kind = norm_kind(norm);
  DropoutSpec dropout{p, seed, offset};
  const auto [x, s] =
      as_addends(x_in, dropped_before_broadcast(s_in, x_in, dropout, dropout_forward), "s");
  return add_norm_post_forward(
             x, s, weight, bias,
             spec_of(kind, normalized_shape, eps_or_default(eps, kind, x), zero_centered_weight),
             dropout, false)
      .y;
}

Grads4 add_norm_post_backward(const at::Tensor& grad_y, const at::Tensor& x, const at::Tensor& s,
                              at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                              const OptionalTensor& bias, double eps, c10::string_view norm,
                              bool zero_centered_weight, double p, int64_t seed, int64_t offset,
                              const OptionalTensor& mean, const OptionalTensor& rstd,
                              std::array<bool, 4> output_mask) {
  PostNormGrads grads = torch_ops::add_norm_post_backward(
      grad_y, x, s, weight, bias,
      spec_of(norm_kind(norm), normalized_shape, eps, zero_centered_weight), {p, seed, offset},
      mean, rstd, {output_mask[2], output_mask[3]});
  return {masked(grads.dx, output_mask[0]), masked(grads.ds, output_mask[1]), grads.dweight,
          grads.dbias};
}

at::Tensor batch_norm(const at::Tensor& input, const OptionalTensor& weight,
                      const OptionalTensor& bias, const OptionalTensor& running_mean,
                      const OptionalTensor& running_var, bool training, double momentum,
                      double eps) {
  return batch_norm_forward(input, weight, bias, running_mean, running_var,
                            {training, momentum, eps});
}

Grads3 batch_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                           const OptionalTensor& weight, const OptionalTensor& bias,
                           const OptionalTensor& running_mean, const OptionalTensor& running_var,
                           bool training, double eps, std::array<bool, 3> output_mask) {
  NormGrads grads =
      torch_ops::batch_norm_backward(grad_y, input, weight, bias, running_mean, running_var,
                                     {training, 0.0, eps}, {output_mask[1], output_mask[2]});
  return {masked(grads.dx, output_mask[0]), grads.dweight, grads.dbias};
}

at::Tensor group_norm(const at::Tensor& input, int64_t num_groups, const OptionalTensor& weight,
                      const OptionalTensor& bias, double eps) {
  return group_norm_forward(input, weight, bias, {num_groups, eps}, false).y;
}

Grads3 group_norm_backward(const at::Tensor& grad_y, const at::Tensor& input, int64_t num_groups,
                           const OptionalTensor& weight, const OptionalTensor& bias, double eps,
                           std::array<bool, 3> output_mask) {
  NormGrads grads = torch_ops::group_norm_backward(grad_y, input, weight, bias, {num_groups, eps},
                                                   {output_mask[1], output_mask[2]});
  return {masked(grads.dx, output_mask[0]), grads.dweight, grads.dbias};
}

at::Tensor dropout(const at::Tensor& input, double p, int64_t seed, int64_t offset) {
  return dropout_forward(input, {p, seed, offset});
}

}  // namespace addnorm::torch_ops::ops

// Argument names and defaults follow torch.nn.functional (input, normalized_shape, weight, bias,
// eps) and addnorm's Python functions (norm, zero_centered_weight, p, seed, offset).
TORCH_LIBRARY(addnorm, m) {
  m.def(
      "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> Tensor");
  m.def(
      "layer_norm_backward(Tensor grad_y, Tensor input, int[] normalized_shape, Tensor? weight, "
      "Tensor? bias, float eps, Tensor? mean=None, Tensor? rstd=None, "
      "bool[3] output_mask=[True, True, True]) -> (Tensor, Tensor, Tensor)");
  m.def(
      "rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None, "
      "bool zero_centered_weight=False) -> Tensor");
  m.def(
      "rms_norm_backward(Tensor grad_y, Tensor input, int[] normalized_shape, Tensor? weight, "
      "float eps, bool zero_centered_weight=False, Tensor? rstd=None, "
      "bool[2] output_mask=[True, True]) -> (Tensor, Tensor)");
  m.def(
      "add_norm_pre(Tensor x, Tensor r, int[] normalized_shape, Tensor? weight=None, "
      "Tensor? bias=None, float? eps=None, str norm=\"layer_norm\", "
      "bool zero_centered_weight=False) -> (Tensor, Tensor)");
  m.def(
      "add_norm_pre_backward(Tensor grad_y, Tensor? grad_h, Tensor h, int[] normalized_shape, "
      "Tensor? weight, Tensor? bias, float eps, str norm=\"layer_norm\", "
      "bool zero_centered_weight=False, Tensor? mean=None, Tensor? rstd=None, "
      "bool[3] output_mask=[True, True, True]) -> (Tensor, Tensor, Tensor)");
  m.def(
      "add_norm_post(Tensor x, Tensor s, int[] normalized_shape, Tensor? weight=None, "
      "Tensor? bias=None, float? eps=None, str norm=\"layer_norm\", "
      "bool zero_centered_weight=False, float p=0.0, int seed=0, int offset=0) -> Tensor");
  m.def(
      "add_norm_post_backward(Tensor grad_y, Tensor x, Tensor s, int[] normalized_shape, "
      "Tensor? weight, Tensor? bias, float eps, str norm=\"layer_norm\", "
      "bool zero_centered_weight=False, float p=0.0, int seed=0, int offset=0, "
      "Tensor? mean=None, Tensor? rstd=None, bool[4] output_mask=[True, True, True, True]) "
      "-> (Tensor, Tensor, Tensor, Tensor)");
  m.def(
      "batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor(a!)? running_mean, "
      "Tensor(b!)? running_var, bool training, float momentum=0.1, float eps=1e-05) -> Tensor");
  m.def(
      "batch_norm_backward(Tensor grad_y, Tensor input, Tensor? weight, Tensor? bias, "
      "Tensor? running_mean, Tensor? running_var, bool training, float eps=1e-05, "
      "bool[3] output_mask=[True, True, True]) -> (Tensor, Tensor, Tensor)");
  m.def(
      "group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05) -> Tensor");
  m.def(
      "group_norm_backward(Tensor grad_y, Tensor input, int num_groups, Tensor? weight, "
      "Tensor? bias, float eps=1e-05, bool[3] output_mask=[True, True, True]) "
      "-> (Tensor, Tensor, Tensor)");
  m.def("dropout(Tensor input, float p, int seed, int offset=0) -> Tensor");
}

TORCH_LIBRARY_IMPL(addnorm, CPU, m) {
  namespace ops = addnorm::torch_ops::ops;
  m.impl("layer_norm", ops::layer_norm);
  m.impl("layer_norm_backward", ops::layer_norm_backward);
  m.impl("rms_norm", ops::rms_norm);
  m.impl("rms_norm_backward", ops::rms_norm_backward);
  m.impl("add_norm_pre", ops::add_norm_pre);
  m.impl("add_norm_pre_backward", ops::add_norm_pre_backward);
  m.impl("add_norm_post", ops::add_norm_post);
  m.impl("add_norm_post_backward", ops::add_norm_post_backward);
  m.impl("batch_norm", ops::batch_norm);
  m.impl("batch_norm_backward", ops::batch_norm_backward);
  m.impl("group_norm", ops::group_norm);
  m.impl("group_norm_backward", ops::group_norm_backward);
  m.impl("dropout", ops::dropout);
}
