// The operators' Autograd and AutocastCPU kernels.
//
// Autograd: each forward op records a graph node that saves what its backward needs (the inputs
// and the float32 statistics) and calls the matching *_backward operator: LayerNorm and RMSNorm
// a node of their own (NormBackwardNode, as PyTorch's generated nodes are written), the other
// ops a torch::autograd::Function.
// Where addnorm's kernels cannot follow PyTorch's autograd, the composite forms run instead
// (composite.hpp: the same ops written as differentiable ATen ops):
//   - forward-mode AD and functorch: an input with a tangent, or one of functorch's wrapped
//     tensors, sends the forward to its composite form, which PyTorch differentiates in every
//     mode (jvp, vmap, grad, jacrev, jacfwd);
//   - higher-order gradients: each *_backward operator has an autograd kernel of its own; when
//     its result must itself be differentiable (a backward with create_graph=True whose inputs
//     require grad: double backward, gradgradcheck, Hessians) it computes the gradients of the
//     composite forward as a graph, else it runs addnorm's backward kernel.
// Dropout is linear with a fixed mask, so its backward is dropout itself and differentiates to
// any order.
//
// AutocastCPU: PyTorch 1.13's CPU autocast leaves its norms alone (layer_norm, group_norm and
// batch_norm are on none of its cast lists), so a norm runs in its input's dtype: float32 in,
// float32 out; bfloat16 in, bfloat16 out. addnorm follows that. The single-input operators fall
// through autocast; the fused ones first add as `x + r` would, in the promoted dtype of their
// two activations (a float32 residual stream plus a bfloat16 sublayer output stays float32),
// which their kernels, taking one dtype, would otherwise refuse.
#include <array>
#include <mutex>
#include <string>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include "composite.hpp"
#include "kernels.hpp"
#include "operators.hpp"

namespace addnorm::torch_ops {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <class Signature>
c10::TypedOperatorHandle<Signature> handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

bool requires_grad(const at::Tensor& tensor) {
  return tensor.defined() && tensor.requires_grad();
}
bool requires_grad(const OptionalTensor& tensor) {
  return tensor.has_value() && requires_grad(*tensor);
}
// Whether this call must record a graph: grad mode on and some input requiring a gradient.
template <class... Tensors>
bool records_graph(const Tensors&... tensors) {
  return at::GradMode::is_enabled() && (requires_grad(tensors) || ...);
}

at::Tensor value(const OptionalTensor& tensor) {
  return tensor.has_value() ? *tensor : at::Tensor();
}
OptionalTensor optional(const at::Tensor& tensor) {
  if (!tensor.defined()) return c10::nullopt;
  return tensor;
}

void save_spec(AutogradContext* ctx, const NormSpec& spec) {
  ctx->saved_data["norm"] = std::string(norm_traits(spec.kind).name);
  ctx->saved_data["normalized_shape"] = spec.normalized_shape;
  ctx->saved_data["eps"] = spec.eps;
  ctx->saved_data["zero_centered_weight"] = spec.zero_centered_weight;
}
NormSpec load_spec(AutogradContext* ctx) {
  return {*norm_kind_named(ctx->saved_data["norm"].toStringRef()),
          ctx->saved_data["normalized_shape"].toIntVector(), ctx->saved_data["eps"].toDouble(),
          ctx->saved_data["zero_centered_weight"].toBool()};
}
const char* norm_name(const NormSpec& spec) {
  return norm_traits(spec.kind).name;
}

void save_dropout(AutogradContext* ctx, const DropoutSpec& spec) {
  ctx->saved_data["p"] = spec.p;
  ctx->saved_data["seed"] = spec.seed;
  ctx->saved_data["offset"] = spec.offset;
}
DropoutSpec load_dropout(AutogradContext* ctx) {
  return {ctx->saved_data["p"].toDouble(), ctx->saved_data["seed"].toInt(),
          ctx->saved_data["offset"].toInt()};
}

// Which gradients a torch::autograd::Function's backward must compute, as an output_mask: the
// activations' (any of the first `activations` graph edges), then weight's and bias's, whose edges
// follow where they were given (an absent optional tensor has no edge).
std::array<bool, 3> grads_wanted(AutogradContext* ctx, size_t activations, bool has_weight,
                                 bool has_bias) {
  bool activation = false;
  for (size_t i = 0; i < activations; ++i) activation = activation || ctx->needs_input_grad(i);
  return {activation, has_weight && ctx->needs_input_grad(activations),
          has_bias && ctx->needs_input_grad(activations + (has_weight ? 1 : 0))};
}

// LayerNorm and RMSNorm: y = Norm(input). The most frequent call of all, so it records its own
// graph node, as PyTorch's generated LayerNormBackward0 does, rather than through a
// torch::autograd::Function, whose per-call boxing of arguments, saved_data map and output
// wrapping cost about as much as normalising a (1, 768) row (bench/torch_ops_small.py).
struct NormBackwardNode final : torch::autograd::Node {
  torch::autograd::SavedVariable input, weight, bias, mean, rstd;
  NormSpec spec;

  std::string name() const override { return "addnorm::NormBackward"; }

  // Under the node's mutex, as PyTorch's nodes do: threads may run backward through one graph.
  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* saved : {&input, &weight, &bias, &mean, &rstd}) saved->reset_data();
  }

  // Gradients for the next edges (input, weight, bias), through the *_backward operator, whose
  // own autograd kernel makes them differentiable when create_graph asks for it. Only those an
  // edge needs are computed (its output_mask), as PyTorch's LayerNormBackward0 asks.
  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const at::Tensor x = input.unpack(), w = weight.unpack(), b = bias.unpack();
    switch (spec.kind) {
      case NormKind::rms_norm: {
        static const auto op =
            handle<decltype(ops::rms_norm_backward)>("addnorm::rms_norm_backward");
        auto [dx, dweight] =
            op.call(grads[0], x, spec.normalized_shape, optional(w), spec.eps,
                    spec.zero_centered_weight, optional(rstd.unpack()),
                    {task_should_compute_output(0), task_should_compute_output(1)});
        return {dx, dweight, at::Tensor()};
      }
      case NormKind::layer_norm: {
        static const auto op =
            handle<decltype(ops::layer_norm_backward)>("addnorm::layer_norm_backward");
        auto [dx, dweight, dbias] =
            op.call(grads[0], x, spec.normalized_shape, optional(w), optional(b), spec.eps,
                    optional(mean.unpack()), optional(rstd.unpack()),
                    {task_should_compute_output(0), task_should_compute_output(1),
                     task_should_compute_output(2)});
        return {dx, dweight, dbias};
      }
    }
    TORCH_CHECK(false, "addnorm: a norm kind with no backward");
  }
};

at::Tensor norm_with_graph(const at::Tensor& input, const OptionalTensor& weight,
                           const OptionalTensor& bias, NormSpec spec) {
  NormOutputs out;
  {
    at::AutoGradMode no_grad(false);
    out = norm_forward(input, weight, bias, spec, true);
  }
  auto node =
      std::shared_ptr<NormBackwardNode>(new NormBackwardNode(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(input, value(weight), value(bias)));
  node->input = torch::autograd::SavedVariable(input, false);
  node->weight = torch::autograd::SavedVariable(value(weight), false);
  node->bias = torch::autograd::SavedVariable(value(bias), false);
  node->mean = torch::autograd::SavedVariable(out.mean, false);
  node->rstd = torch::autograd::SavedVariable(out.rstd, false);
  node->spec = std::move(spec);
  torch::autograd::set_history(out.y, node);
  return out.y;
}

// Pre-norm: (h, y) = (x + r, Norm(x + r)).
struct AddNormPreFunction : torch::autograd::Function<AddNormPreFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& r,
                               const OptionalTensor& weight, const OptionalTensor& bias,
                               const NormSpec& spec) {
    PreNormOutputs out = add_norm_pre_forward(x, r, weight, bias, spec, true);
    ctx->save_for_backward({out.h, value(weight), value(bias), out.mean, out.rstd});
    save_spec(ctx, spec);
    return {out.h, out.y};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op =
        handle<decltype(ops::add_norm_pre_backward)>("addnorm::add_norm_pre_backward");
    const variable_list saved = ctx->get_saved_variables();
    const NormSpec spec = load_spec(ctx);
    const auto wanted = grads_wanted(ctx, 2, saved[1].defined(), saved[2].defined());  // x, r
    auto [dh, dweight, dbias] =
        op.call(grads[1], optional(grads[0]), saved[0], spec.normalized_shape, optional(saved[1]),
                optional(saved[2]), spec.eps, norm_name(spec), spec.zero_centered_weight,
                optional(saved[3]), optional(saved[4]), wanted);
    // dx = dr = dh; each gets its own tensor so that accumulating into one never changes the
    // other.
    const bool both = ctx->needs_input_grad(0) && ctx->needs_input_grad(1);
    return {dh, both ? dh.clone() : dh, dweight, dbias, at::Tensor()};
  }
};

// Post-norm: y = Norm(x + Dropout(s)).
struct AddNormPostFunction : torch::autograd::Function<AddNormPostFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& s,
                            const OptionalTensor& weight, const OptionalTensor& bias,
                            const NormSpec& spec, const DropoutSpec& dropout) {
    NormOutputs out = add_norm_post_forward(x, s, weight, bias, spec, dropout, true);
    ctx->save_for_backward({x, s, value(weight), value(bias), out.mean, out.rstd});
    save_spec(ctx, spec);
    save_dropout(ctx, dropout);
    return out.y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op =
        handle<decltype(ops::add_norm_post_backward)>("addnorm::add_norm_post_backward");
    const variable_list saved = ctx->get_saved_variables();
    const NormSpec spec = load_spec(ctx);
    const DropoutSpec dropout = load_dropout(ctx);
    const auto parameters = grads_wanted(ctx, 2, saved[2].defined(), saved[3].defined());  // x, s
    auto [dx, ds, dweight, dbias] =
        op.call(grads[0], saved[0], saved[1], spec.normalized_shape, optional(saved[2]),
                optional(saved[3]), spec.eps, norm_name(spec), spec.zero_centered_weight, dropout.p,
                dropout.seed, dropout.offset, optional(saved[4]), optional(saved[5]),
                {ctx->needs_input_grad(0), ctx->needs_input_grad(1), parameters[1], parameters[2]});
    return {dx, ds, dweight, dbias, at::Tensor(), at::Tensor()};
  }
};

struct BatchNormFunction : torch::autograd::Function<BatchNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const OptionalTensor& weight, const OptionalTensor& bias,
                            const OptionalTensor& running_mean, const OptionalTensor& running_var,
                            const BatchNormSpec& spec) {
    // Inference's backward needs the statistics this forward used; a later training step may
    // change the buffers before it runs, so it keeps a copy.
    at::Tensor mean, var;
    if (!spec.training && running_mean.has_value()) {
      mean = running_mean->clone();
      var = value(running_var).clone();
    }
    at::Tensor y = batch_norm_forward(input, weight, bias, running_mean, running_var, spec);
    ctx->save_for_backward({input, value(weight), value(bias), mean, var});
    ctx->saved_data["training"] = spec.training;
    ctx->saved_data["eps"] = spec.eps;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op =
        handle<decltype(ops::batch_norm_backward)>("addnorm::batch_norm_backward");
    const variable_list saved = ctx->get_saved_variables();
    // A frozen weight in eval mode: no dweight, and the kernel then does not read x.
    auto [dx, dweight, dbias] = op.call(
        grads[0], saved[0], optional(saved[1]), optional(saved[2]), optional(saved[3]),
        optional(saved[4]), ctx->saved_data["training"].toBool(), ctx->saved_data["eps"].toDouble(),
        grads_wanted(ctx, 1, saved[1].defined(), saved[2].defined()));
    return {dx, dweight, dbias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct GroupNormFunction : torch::autograd::Function<GroupNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const OptionalTensor& weight, const OptionalTensor& bias,
                            const GroupNormSpec& spec) {
    at::Tensor y = group_norm_forward(input, weight, bias, spec, false).y;
    ctx->save_for_backward({input, value(weight), value(bias)});
    ctx->saved_data["num_groups"] = spec.num_groups;
    ctx->saved_data["eps"] = spec.eps;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op =
        handle<decltype(ops::group_norm_backward)>("addnorm::group_norm_backward");
    const variable_list saved = ctx->get_saved_variables();
    auto [dx, dweight, dbias] =
        op.call(grads[0], saved[0], ctx->saved_data["num_groups"].toInt(), optional(saved[1]),
                optional(saved[2]), ctx->saved_data["eps"].toDouble());
    return {dx, dweight, dbias, at::Tensor()};
  }
};

struct DropoutFunction : torch::autograd::Function<DropoutFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            const DropoutSpec& spec) {
    save_dropout(ctx, spec);
    return dropout_forward(input, spec);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto op = handle<decltype(ops::dropout)>("addnorm::dropout");
    const DropoutSpec spec = load_dropout(ctx);
    return {op.call(grads[0], spec.p, spec.seed, spec.offset), at::Tensor()};
  }
};

// ---------------------------------------------------------------------------------------------
// Autograd kernels: without a graph to record (no_grad, or no input requiring a gradient) the
// kernel runs directly, which keeps small calls cheap.

at::Tensor layer_norm_autograd(const at::Tensor& input, at::IntArrayRef normalized_shape,
                               const OptionalTensor& weight, const OptionalTensor& bias,
                               double eps) {
  const NormSpec spec{NormKind::layer_norm, normalized_shape.vec(), eps, false};
  if (composite::needed({input, weight, bias})) return composite::norm(input, weight, bias, spec);
  if (!records_graph(input, weight, bias)) return norm_forward(input, weight, bias, spec, false).y;
  return norm_with_graph(input, weight, bias, spec);
}

at::Tensor rms_norm_autograd(const at::Tensor& input, at::IntArrayRef normalized_shape,
                             const OptionalTensor& weight, c10::optional<double> eps,
                             bool zero_centered_weight) {
  const NormSpec spec{NormKind::rms_norm, normalized_shape.vec(),
                      eps_or_default(eps, NormKind::rms_norm, input), zero_centered_weight};
  if (composite::needed({input, weight})) return composite::norm(input, weight, {}, spec);
  if (!records_graph(input, weight)) return norm_forward(input, weight, {}, spec, false).y;
  return norm_with_graph(input, weight, OptionalTensor(), spec);
}

ops::Grads2 add_norm_pre_autograd(const at::Tensor& x, const at::Tensor& r,
                                  at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                                  const OptionalTensor& bias, c10::optional<double> eps,
                                  c10::string_view norm, bool zero_centered_weight) {
  const NormKind kind = norm_kind(norm);
  const NormSpec spec{kind, normalized_shape.vec(), eps_or_default(eps, kind, x),
                      zero_centered_weight};
  if (composite::needed({x, r, weight, bias})) {
    return composite::add_norm_pre(x, r, weight, bias, spec);
  }
  if (!records_graph(x, r, weight, bias)) {
    PreNormOutputs out = add_norm_pre_forward(x, r, weight, bias, spec, false);
    return {out.h, out.y};
  }
  variable_list out = AddNormPreFunction::apply(x, r, weight, bias, spec);
  return {out[0], out[1]};
}

at::Tensor add_norm_post_autograd(const at::Tensor& x, const at::Tensor& s,
                                  at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                                  const OptionalTensor& bias, c10::optional<double> eps,
                                  c10::string_view norm, bool zero_centered_weight, double p,
                                  int64_t seed, int64_t offset) {
  const NormKind kind = norm_kind(norm);
  const NormSpec spec{kind, normalized_shape.vec(), eps_or_default(eps, kind, x),
                      zero_centered_weight};
  const DropoutSpec dropout{p, seed, offset};
  if (composite::needed({x, s, weight, bias})) {
    return composite::add_norm_post(x, s, weight, bias, spec, dropout);
  }
  if (!records_graph(x, s, weight, bias)) {
    return add_norm_post_forward(x, s, weight, bias, spec, dropout, false).y;
  }
  return AddNormPostFunction::apply(x, s, weight, bias, spec, dropout);
}

at::Tensor batch_norm_autograd(const at::Tensor& input, const OptionalTensor& weight,
                               const OptionalTensor& bias, const OptionalTensor& running_mean,
                               const OptionalTensor& running_var, bool training, double momentum,
                               double eps) {
  const BatchNormSpec spec{training, momentum, eps};
  if (composite::needed({input, weight, bias})) {
    // PyTorch's own op, which updates the running statistics as addnorm's kernel does.
    return at::batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                          false);
  }
  if (!records_graph(input, weight, bias)) {
    return batch_norm_forward(input, weight, bias, running_mean, running_var, spec);
  }
  return BatchNormFunction::apply(input, weight, bias, running_mean, running_var, spec);
}

at::Tensor group_norm_autograd(const at::Tensor& input, int64_t num_groups,
                               const OptionalTensor& weight, const OptionalTensor& bias,
                               double eps) {
  const GroupNormSpec spec{num_groups, eps};
  if (composite::needed({input, weight, bias})) {
    return at::group_norm(input, num_groups, weight, bias, eps, false);
  }
  if (!records_graph(input, weight, bias)) {
    return group_norm_forward(input, weight, bias, spec, false).y;
  }
  return GroupNormFunction::apply(input, weight, bias, spec);
}

at::Tensor dropout_autograd(const at::Tensor& input, double p, int64_t seed, int64_t offset) {
  const DropoutSpec spec{p, seed, offset};
  if (composite::needed({input})) return composite::dropout(input, spec);
  if (!records_graph(input)) return dropout_forward(input, spec);
  return DropoutFunction::apply(input, spec);
}

// ---------------------------------------------------------------------------------------------
// Autograd kernels of the backward operators: a differentiable result (see the top of this
// file) from the composite forms, else addnorm's backward kernel below autograd.

template <class... Tensors>
bool differentiable_result(const Tensors&... tensors) {
  return records_graph(tensors...) || composite::needed({OptionalTensor(tensors)...});
}

template <class Signature, class... Args>
auto below_autograd(const char* name, Args&&... args) {
  at::AutoDispatchBelowADInplaceOrView guard;
  return handle<Signature>(name).call(std::forward<Args>(args)...);
}

ops::Grads3 layer_norm_backward_autograd(const at::Tensor& grad_y, const at::Tensor& input,
                                         at::IntArrayRef normalized_shape,
                                         const OptionalTensor& weight, const OptionalTensor& bias,
                                         double eps, const OptionalTensor& mean,
                                         const OptionalTensor& rstd,
                                         std::array<bool, 3> output_mask) {
  if (differentiable_result(grad_y, input, value(weight), value(bias))) {
    const NormSpec spec{NormKind::layer_norm, normalized_shape.vec(), eps, false};
    check_saved_statistics(mean, rstd, input, spec);  // the composite form recomputes them
    auto g = composite::norm_backward(grad_y, input, weight, bias, spec);
    return {masked(g[0], output_mask[0]), masked(g[1], output_mask[1]),
            masked(g[2], output_mask[2])};
  }
  return below_autograd<decltype(ops::layer_norm_backward)>("addnorm::layer_norm_backward", grad_y,
                                                            input, normalized_shape, weight, bias,
                                                            eps, mean, rstd, output_mask);
}

ops::Grads2 rms_norm_backward_autograd(const at::Tensor& grad_y, const at::Tensor& input,
                                       at::IntArrayRef normalized_shape,
                                       const OptionalTensor& weight, double eps,
                                       bool zero_centered_weight, const OptionalTensor& rstd,
                                       std::array<bool, 2> output_mask) {
  if (differentiable_result(grad_y, input, value(weight))) {
    const NormSpec spec{NormKind::rms_norm, normalized_shape.vec(), eps, zero_centered_weight};
    check_saved_statistics({}, rstd, input, spec);  // the composite form recomputes it
    auto g = composite::norm_backward(grad_y, input, weight, {}, spec);
    return {masked(g[0], output_mask[0]), masked(g[1], output_mask[1])};
  }
  return below_autograd<decltype(ops::rms_norm_backward)>("addnorm::rms_norm_backward", grad_y,
                                                          input, normalized_shape, weight, eps,
                                                          zero_centered_weight, rstd, output_mask);
}

ops::Grads3 add_norm_pre_backward_autograd(const at::Tensor& grad_y, const OptionalTensor& grad_h,
                                           const at::Tensor& h, at::IntArrayRef normalized_shape,
                                           const OptionalTensor& weight, const OptionalTensor& bias,
                                           double eps, c10::string_view norm,
                                           bool zero_centered_weight, const OptionalTensor& mean,
                                           const OptionalTensor& rstd,
                                           std::array<bool, 3> output_mask) {
  if (differentiable_result(grad_y, value(grad_h), h, value(weight), value(bias))) {
    const NormSpec spec{norm_kind(norm), normalized_shape.vec(), eps, zero_centered_weight};
    check_saved_statistics(mean, rstd, h, spec);  // the composite form recomputes them
    auto g = composite::add_norm_pre_backward(grad_y, grad_h, h, weight, bias, spec);
    return {masked(g[0], output_mask[0]), masked(g[1], output_mask[1]),
            masked(g[2], output_mask[2])};
  }
  return below_autograd<decltype(ops::add_norm_pre_backward)>(
      "addnorm::add_norm_pre_backward", grad_y, grad_h, h, normalized_shape, weight, bias, eps,
      norm, zero_centered_weight, mean, rstd, output_mask);
}

ops::Grads4 add_norm_post_backward_autograd(const at::Tensor& grad_y, const at::Tensor& x,
                                            const at::Tensor& s, at::IntArrayRef normalized_shape,
                                            const OptionalTensor& weight,
                                            const OptionalTensor& bias, double eps,
                                            c10::string_view norm, bool zero_centered_weight,
                                            double p, int64_t seed, int64_t offset,
                                            const OptionalTensor& mean, const OptionalTensor& rstd,
                                            std::array<bool, 4> output_mask) {
  if (differentiable_result(grad_y, x, s, value(weight), value(bias))) {
    const NormSpec spec{norm_kind(norm), normalized_shape.vec(), eps, zero_centered_weight};
    check_saved_statistics(mean, rstd, x, spec);  // the composite form recomputes them
    auto g = composite::add_norm_post_backward(grad_y, x, s, weight, bias, spec,
                                               DropoutSpec{p, seed, offset});
    return {masked(g[0], output_mask[0]), masked(g[1], output_mask[1]),
            masked(g[2], output_mask[2]), masked(g[3], output_mask[3])};
  }
  return below_autograd<decltype(ops::add_norm_post_backward)>(
      "addnorm::add_norm_post_backward", grad_y, x, s, normalized_shape, weight, bias, eps, norm,
      zero_centered_weight, p, seed, offset, mean, rstd, output_mask);
}

ops::Grads3 batch_norm_backward_autograd(const at::Tensor& grad_y, const at::Tensor& input,
                                         const OptionalTensor& weight, const OptionalTensor& bias,
                                         const OptionalTensor& running_mean,
                                         const OptionalTensor& running_var, bool training,
                                         double eps, std::array<bool, 3> output_mask) {
  if (differentiable_result(grad_y, input, value(weight), value(bias))) {
    auto g = composite::batch_norm_backward(grad_y, input, weight, bias, running_mean, running_var,
                                            training, eps);
    return {masked(g[0], output_mask[0]), masked(g[1], output_mask[1]),
            masked(g[2], output_mask[2])};
  }
  return below_autograd<decltype(ops::batch_norm_backward)>(
      "addnorm::batch_norm_backward", grad_y, input, weight, bias, running_mean, running_var,
      training, eps, output_mask);
}

ops::Grads3 group_norm_backward_autograd(const at::Tensor& grad_y, const at::Tensor& input,
                                         int64_t num_groups, const OptionalTensor& weight,
                                         const OptionalTensor& bias, double eps) {
  if (differentiable_result(grad_y, input, value(weight), value(bias))) {
    auto g = composite::group_norm_backward(grad_y, input, num_groups, weight, bias, eps);
    return {g[0], g[1], g[2]};
  }
  return below_autograd<decltype(ops::group_norm_backward)>("addnorm::group_norm_backward", grad_y,
                                                            input, num_groups, weight, bias, eps);
}

// ---------------------------------------------------------------------------------------------
// AutocastCPU kernels of the fused operators: the two activations in their promoted dtype, then
// the operator again below autocast. The casts are above autograd, so each gradient returns in
// its own activation's dtype.

std::pair<at::Tensor, at::Tensor> promoted(const at::Tensor& x, const at::Tensor& r) {
  const auto common = at::promote_types(x.scalar_type(), r.scalar_type());
  return {x.to(common), r.to(common)};
}

ops::Grads2 add_norm_pre_autocast(const at::Tensor& x, const at::Tensor& r,
                                  at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                                  const OptionalTensor& bias, c10::optional<double> eps,
                                  c10::string_view norm, bool zero_centered_weight) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  static const auto op = handle<decltype(ops::add_norm_pre)>("addnorm::add_norm_pre");
  const auto [common_x, common_r] = promoted(x, r);
  return op.call(common_x, common_r, normalized_shape, weight, bias, eps, norm,
                 zero_centered_weight);
}

at::Tensor add_norm_post_autocast(const at::Tensor& x, const at::Tensor& s,
                                  at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                                  const OptionalTensor& bias, c10::optional<double> eps,
                                  c10::string_view norm, bool zero_centered_weight, double p,
                                  int64_t seed, int64_t offset) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  static const auto op = handle<decltype(ops::add_norm_post)>("addnorm::add_norm_post");
  const auto [common_x, common_s] = promoted(x, s);
  return op.call(common_x, common_s, normalized_shape, weight, bias, eps, norm,
                 zero_centered_weight, p, seed, offset);
}

}  // namespace

}  // namespace addnorm::torch_ops

namespace addnorm::torch_ops {
namespace {

// The same kernels serve autograd and functorch's vmap: a batched tensor is seen by them and
// sent to the composite forms, whose ATen ops have functorch's batching rules (instead of its
// slow per-example loop).
void register_differentiable_kernels(torch::Library& m) {
  m.impl("layer_norm", layer_norm_autograd);
  m.impl("rms_norm", rms_norm_autograd);
  m.impl("add_norm_pre", add_norm_pre_autograd);
  m.impl("add_norm_post", add_norm_post_autograd);
  m.impl("batch_norm", batch_norm_autograd);
  m.impl("group_norm", group_norm_autograd);
  m.impl("dropout", dropout_autograd);
  m.impl("layer_norm_backward", layer_norm_backward_autograd);
  m.impl("rms_norm_backward", rms_norm_backward_autograd);
  m.impl("add_norm_pre_backward", add_norm_pre_backward_autograd);
  m.impl("add_norm_post_backward", add_norm_post_backward_autograd);
  m.impl("batch_norm_backward", batch_norm_backward_autograd);
  m.impl("group_norm_backward", group_norm_backward_autograd);
}

}  // namespace
}  // namespace addnorm::torch_ops

TORCH_LIBRARY_IMPL(addnorm, Autograd, m) {
  addnorm::torch_ops::register_differentiable_kernels(m);
}

TORCH_LIBRARY_IMPL(addnorm, FuncTorchBatched, m) {
  addnorm::torch_ops::register_differentiable_kernels(m);
}

TORCH_LIBRARY_IMPL(addnorm, AutocastCPU, m) {
  namespace torch_ops = addnorm::torch_ops;
  m.impl("add_norm_pre", torch_ops::add_norm_pre_autocast);
  m.impl("add_norm_post", torch_ops::add_norm_post_autocast);
}
