#include "composite.hpp"

#include <ATen/ATen.h>
#include <c10/core/DispatchKey.h>

#include <optional>

namespace addnorm::torch_ops::composite {

namespace {

bool needs_composite(const at::Tensor& tensor) {
  if (!tensor.defined()) return false;
  const c10::DispatchKeySet keys = tensor.key_set();
  return keys.has(c10::DispatchKey::FuncTorchGradWrapper) ||
         keys.has(c10::DispatchKey::FuncTorchBatched) || tensor.is_meta() ||
         tensor._fw_grad(/*level=*/0).defined();
}

// The dimensions a norm reduces over: the last normalized_shape.size() ones.
std::vector<int64_t> norm_dims(const at::Tensor& input, const NormSpec& spec) {
  std::vector<int64_t> dims;
  const int64_t rank = input.dim();
  for (int64_t i = rank - static_cast<int64_t>(spec.normalized_shape.size()); i < rank; ++i) {
    dims.push_back(i);
  }
  return dims;
}

// The gradients of y = x_hat * w' + b, where x_hat normalises x over `dims` (centred:
// (x - mean) * rstd; else x * rstd, rstd from the variance or the mean square), written as ATen
// ops on the given tensors: no autograd engine runs here (a nested one would re-enter the node
// being differentiated, whose output a pre-norm backward reads), and autograd records every op,
// so each gradient can be differentiated again in grad_y, x and the weight.
//   dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)),  g = grad_y * w'  (no mean(g) if not
//   centred); dweight = sum(grad_y * x_hat), dbias = sum(grad_y) over the non-affine dims.
// `weight` and `bias` are already shaped to broadcast against x; `reduce_to` sums a full-shape
// gradient down to the parameter's own shape.
struct RowNormGrads {
  at::Tensor dx, dweight, dbias;
};

template <class ReduceTo>
RowNormGrads row_norm_grads(const at::Tensor& grad_y, const at::Tensor& input,
                            const at::Tensor& weight_factor, bool centre, at::IntArrayRef dims,
                            double eps, ReduceTo reduce_to, bool want_weight, bool want_bias) {
  const at::ScalarType type = compute_type(input);
  const at::Tensor x = input.to(type);
  const at::Tensor dy = grad_y.to(type);
  const at::Tensor xc = centre ? x - x.mean(dims, /*keepdim=*/true) : x;
  const at::Tensor rstd = at::rsqrt(xc.pow(2).mean(dims, /*keepdim=*/true) + eps);
  const at::Tensor x_hat = xc * rstd;
  const at::Tensor g = weight_factor.defined() ? dy * weight_factor.to(type) : dy;
  at::Tensor inner = g - x_hat * (g * x_hat).mean(dims, /*keepdim=*/true);
  if (centre) inner = inner - g.mean(dims, /*keepdim=*/true);
  RowNormGrads grads;
  grads.dx = (rstd * inner).to(input.scalar_type());
  if (want_weight) grads.dweight = reduce_to(dy * x_hat);
  if (want_bias) grads.dbias = reduce_to(dy);
  return grads;
}

// Sums a gradient of x's shape over the leading dims, down to normalized_shape.
at::Tensor sum_leading(const at::Tensor& full, int64_t kept) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < full.dim() - kept; ++i) dims.push_back(i);
  return dims.empty() ? full : full.sum(dims);
}

// Sums a gradient of (N, C, *)'s shape over every dim but the channels'.
at::Tensor sum_but_channels(const at::Tensor& full) {
  std::vector<int64_t> dims{0};
  for (int64_t i = 2; i < full.dim(); ++i) dims.push_back(i);
  return full.sum(dims);
}

// A per-channel parameter (C) shaped (1, C, 1, ...) to broadcast over (N, C, *).
at::Tensor per_channel(const at::Tensor& parameter, int64_t rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[1] = parameter.size(0);
  return parameter.reshape(shape);
}

at::Tensor cast_like(const at::Tensor& gradient, const OptionalTensor& parameter) {
  if (!gradient.defined() || !parameter.has_value()) return at::Tensor();
  return gradient.to(parameter->scalar_type());
}

}  // namespace

bool needed(const std::vector<OptionalTensor>& tensors) {
  for (const OptionalTensor& tensor : tensors) {
    if (tensor.has_value() && needs_composite(*tensor)) return true;
  }
  return false;
}

at::Tensor norm(const at::Tensor& input, const OptionalTensor& weight, const OptionalTensor& bias,
                const NormSpec& spec) {
  switch (spec.kind) {
    case NormKind::layer_norm:
      return at::layer_norm(input, spec.normalized_shape, weight, bias, spec.eps);
    case NormKind::rms_norm: {
      const at::Tensor x = input.to(compute_type(input));
      at::Tensor y =
          x * at::rsqrt(x.pow(2).mean(norm_dims(input, spec), /*keepdim=*/true) + spec.eps);
      if (weight.has_value()) {
        const at::Tensor w = weight->to(x.scalar_type());
        y = y * (spec.zero_centered_weight ? w + 1 : w);
      }
      return y.to(input.scalar_type());
    }
  }
  TORCH_CHECK(false, "addnorm: a norm kind with no composite form");
}

at::Tensor dropout(const at::Tensor& input, const DropoutSpec& spec) {
  if (spec.p == 0.0) return input;
  // A meta tensor has no values to draw a mask for, only the shape the product takes.
  if (input.is_meta()) return input * at::ones_like(input);
  // The mask addnorm draws (Philox, seed and offset), computed on a plain tensor of ones, then
  // applied by a multiplication, which every transform understands.
  // functorch's modes are excluded too: its transforms would otherwise wrap the new tensor of
  // ones, and the kernel needs plain memory.
  at::Tensor scale;
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    c10::impl::ExcludeDispatchKeyGuard no_functorch(
        c10::DispatchKeySet({c10::DispatchKey::FuncTorchDynamicLayerFrontMode,
                             c10::DispatchKey::FuncTorchDynamicLayerBackMode}));
    scale = dropout_forward(at::ones(input.sizes(), input.options()), spec);
  }
  return input * scale;
}

std::tuple<at::Tensor, at::Tensor> add_norm_pre(const at::Tensor& x, const at::Tensor& r,
                                                const OptionalTensor& weight,
                                                const OptionalTensor& bias, const NormSpec& spec) {
  at::Tensor h = x + r;
  at::Tensor y = norm(h, weight, bias, spec);
  return {h, y};
}

at::Tensor add_norm_post(const at::Tensor& x, const at::Tensor& s, const OptionalTensor& weight,
                         const OptionalTensor& bias, const NormSpec& spec,
                         const DropoutSpec& dropout_spec) {
  return norm(x + dropout(s, dropout_spec), weight, bias, spec);
}

std::vector<at::Tensor> norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                                      const OptionalTensor& weight, const OptionalTensor& bias,
                                      const NormSpec& spec) {
  at::Tensor factor;
  if (weight.has_value()) factor = spec.zero_centered_weight ? *weight + 1 : *weight;
  const auto kept = static_cast<int64_t>(spec.normalized_shape.size());
  RowNormGrads g = row_norm_grads(
      grad_y, input, factor, norm_traits(spec.kind).centres, norm_dims(input, spec), spec.eps,
      [kept](const at::Tensor& full) { return sum_leading(full, kept); }, weight.has_value(),
      bias.has_value());
  return {g.dx, cast_like(g.dweight, weight), cast_like(g.dbias, bias)};
}

std::vector<at::Tensor> add_norm_pre_backward(const at::Tensor& grad_y,
                                              const OptionalTensor& grad_h, const at::Tensor& h,
                                              const OptionalTensor& weight,
                                              const OptionalTensor& bias, const NormSpec& spec) {
  std::vector<at::Tensor> grads = norm_backward(grad_y, h, weight, bias, spec);
  if (grad_h.has_value() && grad_h->defined()) grads[0] = grads[0] + *grad_h;
  return grads;
}

std::vector<at::Tensor> add_norm_post_backward(const at::Tensor& grad_y, const at::Tensor& x,
                                               const at::Tensor& s, const OptionalTensor& weight,
                                               const OptionalTensor& bias, const NormSpec& spec,
                                               const DropoutSpec& dropout_spec) {
  const at::Tensor h = x + dropout(s, dropout_spec);
  std::vector<at::Tensor> grads = norm_backward(grad_y, h, weight, bias, spec);
  const at::Tensor dh = grads[0];
  return {dh.to(x.scalar_type()), dropout(dh, dropout_spec).to(s.scalar_type()), grads[1],
          grads[2]};
}

std::vector<at::Tensor> batch_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                                            const OptionalTensor& weight,
                                            const OptionalTensor& bias,
                                            const OptionalTensor& running_mean,
                                            const OptionalTensor& running_var, bool training,
                                            double eps) {
  const int64_t rank = input.dim();
  const at::Tensor factor = weight.has_value() ? per_channel(*weight, rank) : at::Tensor();
  if (training) {
    // Normalised by the batch's own statistics, over every dim but the channels'.
    std::vector<int64_t> dims{0};
    for (int64_t i = 2; i < rank; ++i) dims.push_back(i);
    RowNormGrads g = row_norm_grads(grad_y, input, factor, true, dims, eps, sum_but_channels,
                                    weight.has_value(), bias.has_value());
    return {g.dx, cast_like(g.dweight, weight), cast_like(g.dbias, bias)};
  }
  // Inference: fixed statistics, so y is affine in x.
  const at::ScalarType type = compute_type(input);
  const at::Tensor x = input.to(type);
  const at::Tensor dy = grad_y.to(type);
  const at::Tensor rstd = at::rsqrt(per_channel(running_var->to(type), rank) + eps);
  const at::Tensor x_hat = (x - per_channel(running_mean->to(type), rank)) * rstd;
  const at::Tensor dx = (factor.defined() ? dy * factor.to(type) : dy) * rstd;
  at::Tensor dweight, dbias;
  if (weight.has_value()) dweight = sum_but_channels(dy * x_hat);
  if (bias.has_value()) dbias = sum_but_channels(dy);
  return {dx.to(input.scalar_type()), cast_like(dweight, weight), cast_like(dbias, bias)};
}

std::vector<at::Tensor> group_norm_backward(const at::Tensor& grad_y, const at::Tensor& input,
                                            int64_t num_groups, const OptionalTensor& weight,
                                            const OptionalTensor& bias, double eps) {
  // Each sample's groups of channels normalised: (N, C, *) as (N, G, C/G * spatial), with the
  // per-channel weight applied before the reshape.
  const int64_t rank = input.dim();
  const at::ScalarType type = compute_type(input);
  const at::Tensor dy = grad_y.to(type);
  const at::Tensor g_full = weight.has_value() ? dy * per_channel(weight->to(type), rank) : dy;
  const int64_t n = input.size(0);
  // The group's size in full, not -1: an empty batch cannot infer it.
  int64_t group_size = input.size(1) / num_groups;
  for (int64_t d = 2; d < rank; ++d) group_size *= input.size(d);
  const at::Tensor x = input.to(type).reshape({n, num_groups, group_size});
  const at::Tensor g = g_full.reshape({n, num_groups, group_size});
  const at::Tensor xc = x - x.mean(2, /*keepdim=*/true);
  const at::Tensor rstd = at::rsqrt(xc.pow(2).mean(2, /*keepdim=*/true) + eps);
  const at::Tensor x_hat = xc * rstd;
  const at::Tensor dx =
      rstd * (g - g.mean(2, /*keepdim=*/true) - x_hat * (g * x_hat).mean(2, /*keepdim=*/true));
  at::Tensor dweight, dbias;
  if (weight.has_value()) dweight = sum_but_channels(dy * x_hat.reshape(input.sizes()));
  if (bias.has_value()) dbias = sum_but_channels(dy);
  return {dx.reshape(input.sizes()).to(input.scalar_type()), cast_like(dweight, weight),
          cast_like(dbias, bias)};
}

}  // namespace addnorm::torch_ops::composite
