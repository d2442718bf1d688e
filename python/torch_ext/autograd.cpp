// The operators' Autograd and AutocastCPU kernels.
//
// Autograd: each forward op records a graph node that saves what its backward needs (the inputs
// and the float32 statistics) and calls the matching *_backward operator, a node of its own
// (GraphNode below, as PyTorch's generated nodes are written).
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
// float32 out; bfloat16 in, bfloat16 out. addnorm follows that: every operator falls through
// autocast. The fused ones add as `x + r` does in any mode (as_addends): in the promoted dtype
// of their two activations, so a float32 residual stream plus a bfloat16 sublayer output stays
// float32.
#include <algorithm>
#include <array>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>

#include "composite.hpp"
#include "kernels.hpp"
#include "operators.hpp"

namespace addnorm::torch_ops {

namespace {

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

const char* norm_name(const NormSpec& spec) {
  return norm_traits(spec.kind).name;
}

// A node of the graph an addnorm forward records, written as PyTorch's generated nodes are
// (NativeLayerNormBackward0 and the like) rather than as a torch::autograd::Function, for two
// reasons: a Function's per-call boxing of arguments, saved_data map and output wrapping cost
// about as much as normalising a (1, 768) row (bench/torch_ops_small.py); and a Function's node
// is named after its C++ template, so a tensor printed `grad_fn=<GroupNormFunction>>`, where
// these print `grad_fn=<GroupNormBackward>` as PyTorch's own print theirs.
// A node saves the tensors its backward needs, has one edge per differentiable input (an absent
// weight or bias has an edge no gradient flows to) and calls the matching *_backward operator,
// whose own autograd kernel makes the result differentiable when create_graph asks for it. It
// asks the operator only for the gradients some edge needs (output_mask), as PyTorch's do.
class GraphNode : public torch::autograd::Node {
 public:
  std::string name() const override { return name_; }

  // Under the node's mutex, as PyTorch's nodes do: threads may run backward through one graph.
  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& tensor : saved_) tensor.reset_data();
  }

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto defined = [](const at::Tensor& grad) { return grad.defined(); };
    if (std::none_of(grads.begin(), grads.end(), defined)) return variable_list(num_outputs());
    return backward(grads, Saved{this});
  }

  // The tensors the backward reads, in the order it reads them. A tensor this node produced is
  // saved as an output (is_output), after it is given its history, so that it does not hold
  // its own grad_fn alive.
  void save(std::initializer_list<at::Tensor> tensors, bool outputs = false) {
    for (const auto& tensor : tensors) saved_.emplace_back(tensor, outputs);
  }

 protected:
  // The saved tensors as save() listed them, each unpacked (its version checked) where the
  // backward reads it, as PyTorch's nodes unpack theirs: a path that reads none, such as the
  // pre-norm's gradient of h alone, does not refuse a tensor changed in place since.
  class Saved {
   public:
    explicit Saved(GraphNode* node) : node_(node) {}
    at::Tensor operator[](size_t i) const {
      return node_->saved_[i].unpack(node_->shared_from_this());
    }

   private:
    GraphNode* node_;
  };

  explicit GraphNode(std::string node_name) : name_(std::move(node_name)) {}
  // grads: one per output of the forward, at least one defined.
  virtual variable_list backward(const variable_list& grads, const Saved& saved) = 0;
  // Whether the graph needs the gradient of input `edge`.
  bool wanted(size_t edge) const { return task_should_compute_output(edge); }

 private:
  std::string name_;
  std::vector<torch::autograd::SavedVariable> saved_;
};

// A node of type NodeType (constructed from `args`) with edges to `inputs`, in the order its
// backward returns their gradients.
template <class NodeType, class... Args>
std::shared_ptr<NodeType> graph_node(std::initializer_list<at::Tensor> inputs, Args&&... args) {
  auto node = std::shared_ptr<NodeType>(new NodeType(std::forward<Args>(args)...),
                                        torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(variable_list(inputs)));
  return node;
}

// The tensor `forward` computes, recorded: forward runs without recording (the node stands for
// it) and returns its output and the tensors the node saves; the output's grad_fn is a NodeType
// (made from `args`) with edges to `inputs`.
template <class NodeType, class Forward, class... Args>
at::Tensor with_graph(std::initializer_list<at::Tensor> inputs, const Forward& forward,
                      Args&&... args) {
  std::pair<at::Tensor, variable_list> out;
  {
    at::AutoGradMode no_grad(false);
    out = forward();
  }
  auto node = graph_node<NodeType>(inputs, std::forward<Args>(args)...);
  for (const auto& tensor : out.second) node->save({tensor});
  torch::autograd::set_history(out.first, node);
  return out.first;
}

// LayerNorm and RMSNorm: y = Norm(input); edges input, weight, bias. The most frequent call of
// all. Saved: input, weight, bias, mean, rstd.
struct NormBackwardNode final : GraphNode {
  NormSpec spec;
  explicit NormBackwardNode(NormSpec norm_spec)
      : GraphNode(norm_spec.kind == NormKind::rms_norm ? "addnorm::RmsNormBackward"
                                                       : "addnorm::LayerNormBackward"),
        spec(std::move(norm_spec)) {}

  variable_list backward(const variable_list& grads, const Saved& saved) override {
    const at::Tensor &x = saved[0], &w = saved[1], &b = saved[2], &mean = saved[3],
                     &rstd = saved[4];
    switch (spec.kind) {
      case NormKind::rms_norm: {
        static const auto op =
            handle<decltype(ops::rms_norm_backward)>("addnorm::rms_norm_backward");
        auto [dx, dweight] =
            op.call(grads[0], x, spec.normalized_shape, optional(w), spec.eps,
                    spec.zero_centered_weight, optional(rstd), {wanted(0), wanted(1)});
        return {dx, dweight, at::Tensor()};
      }
      case NormKind::layer_norm: {
        static const auto op =
            handle<decltype(ops::layer_norm_backward)>("addnorm::layer_norm_backward");
        auto [dx, dweight, dbias] =
            op.call(grads[0], x, spec.normalized_shape, optional(w), optional(b), spec.eps,
                    optional(mean), optional(rstd), {wanted(0), wanted(1), wanted(2)});
        return {dx, dweight, dbias};
      }
    }
    TORCH_CHECK(false, "addnorm: a norm kind with no backward");
  }
};

at::Tensor norm_with_graph(const at::Tensor& input, const OptionalTensor& weight,
                           const OptionalTensor& bias, NormSpec spec) {
  const auto forward = [&]() -> std::pair<at::Tensor, variable_list> {
    NormOutputs out = norm_forward(input, weight, bias, spec, true);
    return {out.y, {input, value(weight), value(bias), out.mean, out.rstd}};
  };
  return with_graph<NormBackwardNode>({input, value(weight), value(bias)}, forward,
                                      std::move(spec));
}

// Pre-norm: (h, y) = (x + r, Norm(x + r)); edges x, r, weight, bias. Saved: weight, bias, mean,
// rstd, then h (an output).
struct AddNormPreBackwardNode final : GraphNode {
  NormSpec spec;
  explicit AddNormPreBackwardNode(NormSpec norm_spec)
      : GraphNode("addnorm::AddNormPreBackward"), spec(std::move(norm_spec)) {}

  variable_list backward(const variable_list& grads, const Saved& saved) override {
    static const auto op =
        handle<decltype(ops::add_norm_pre_backward)>("addnorm::add_norm_pre_backward");
    // dx = dr = dh; each gets its own tensor so that accumulating into one never changes the
    // other.
    const auto to_x_and_r = [&](const at::Tensor& dh) {
      return std::pair{dh, wanted(0) && wanted(1) ? dh.clone() : dh};
    };
    if (!grads[1].defined()) {
      // Only h's gradient arrived (y unused): dh is dh_next, and the parameters, reached only
      // through y, get none, as through PyTorch's x + r (which saves nothing to check).
      const auto [dx, dr] = to_x_and_r(grads[0]);
      return {dx, dr, at::Tensor(), at::Tensor()};
    }
    const at::Tensor &w = saved[0], &b = saved[1], &mean = saved[2], &rstd = saved[3],
                     &h = saved[4];
    auto [dh, dweight, dbias] =
        op.call(grads[1], optional(grads[0]), h, spec.normalized_shape, optional(w), optional(b),
                spec.eps, norm_name(spec), spec.zero_centered_weight, optional(mean),
                optional(rstd), {wanted(0) || wanted(1), wanted(2), wanted(3)});
    const auto [dx, dr] = to_x_and_r(dh);
    return {dx, dr, dweight, dbias};
  }
};

std::pair<at::Tensor, at::Tensor> add_norm_pre_with_graph(const at::Tensor& x, const at::Tensor& r,
                                                          const OptionalTensor& weight,
                                                          const OptionalTensor& bias,
                                                          NormSpec spec) {
  PreNormOutputs out;
  {
    at::AutoGradMode no_grad(false);
    out = add_norm_pre_forward(x, r, weight, bias, spec, true);
  }
  auto node =
      graph_node<AddNormPreBackwardNode>({x, r, value(weight), value(bias)}, std::move(spec));
  node->save({value(weight), value(bias), out.mean, out.rstd});
  torch::autograd::set_history(variable_list{out.h, out.y}, node);
  node->save({out.h}, true);
  return {out.h, out.y};
}

// Post-norm: y = Norm(x + Dropout(s)); edges x, s, weight, bias. Saved: x, s, weight, bias,
// mean, rstd.
struct AddNormPostBackwardNode final : GraphNode {
  NormSpec spec;
  DropoutSpec dropout;
  AddNormPostBackwardNode(NormSpec norm_spec, const DropoutSpec& dropout_spec)
      : GraphNode("addnorm::AddNormPostBackward"),
        spec(std::move(norm_spec)),
        dropout(dropout_spec) {}

  variable_list backward(const variable_list& grads, const Saved& saved) override {
    static const auto op =
        handle<decltype(ops::add_norm_post_backward)>("addnorm::add_norm_post_backward");
    auto [dx, ds, dweight, dbias] =
        op.call(grads[0], saved[0], saved[1], spec.normalized_shape, optional(saved[2]),
                optional(saved[3]), spec.eps, norm_name(spec), spec.zero_centered_weight, dropout.p,
                dropout.seed, dropout.offset, optional(saved[4]), optional(saved[5]),
                {wanted(0), wanted(1), wanted(2), wanted(3)});
    return {dx, ds, dweight, dbias};
  }
};

at::Tensor add_norm_post_with_graph(const at::Tensor& x, const at::Tensor& s,
                                    const OptionalTensor& weight, const OptionalTensor& bias,
                                    NormSpec spec, const DropoutSpec& dropout) {
  const auto forward = [&]() -> std::pair<at::Tensor, variable_list> {
    NormOutputs out = add_norm_post_forward(x, s, weight, bias, spec, dropout, true);
    return {out.y, {x, s, value(weight), value(bias), out.mean, out.rstd}};
  };
  return with_graph<AddNormPostBackwardNode>({x, s, value(weight), value(bias)}, forward,
                                             std::move(spec), dropout);
}

// BatchNorm; edges input, weight, bias. Saved: input, weight, bias, and in inference mode the
// running statistics the forward used.
struct BatchNormBackwardNode final : GraphNode {
  BatchNormSpec spec;
  explicit BatchNormBackwardNode(const BatchNormSpec& batch_spec)
      : GraphNode("addnorm::BatchNormBackward"), spec(batch_spec) {}

  variable_list backward(const variable_list& grads, const Saved& saved) override {
    static const auto op =
        handle<decltype(ops::batch_norm_backward)>("addnorm::batch_norm_backward");
    // A frozen weight in eval mode: no dweight, and the kernel then does not read x.
    auto [dx, dweight, dbias] =
        op.call(grads[0], saved[0], optional(saved[1]), optional(saved[2]), optional(saved[3]),
                optional(saved[4]), spec.training, spec.eps, {wanted(0), wanted(1), wanted(2)});
    return {dx, dweight, dbias};
  }
};

at::Tensor batch_norm_with_graph(const at::Tensor& input, const OptionalTensor& weight,
                                 const OptionalTensor& bias, const OptionalTensor& running_mean,
                                 const OptionalTensor& running_var, const BatchNormSpec& spec) {
  const auto forward = [&]() -> std::pair<at::Tensor, variable_list> {
    // Inference's backward needs the statistics this forward used; a later training step may
    // change the buffers before it runs, so it keeps a copy.
    at::Tensor mean, var;
    if (!spec.training && running_mean.has_value()) {
      mean = running_mean->clone();
      var = value(running_var).clone();
    }
    at::Tensor y = batch_norm_forward(input, weight, bias, running_mean, running_var, spec);
    return {y, {input, value(weight), value(bias), mean, var}};
  };
  return with_graph<BatchNormBackwardNode>({input, value(weight), value(bias)}, forward, spec);
}

// GroupNorm (and InstanceNorm with batch statistics); edges input, weight, bias. Saved: input,
// weight, bias.
struct GroupNormBackwardNode final : GraphNode {
  GroupNormSpec spec;
  explicit GroupNormBackwardNode(const GroupNormSpec& group_spec)
      : GraphNode("addnorm::GroupNormBackward"), spec(group_spec) {}

  variable_list backward(const variable_list& grads, const Saved& saved) override {
    static const auto op =
        handle<decltype(ops::group_norm_backward)>("addnorm::group_norm_backward");
    auto [dx, dweight, dbias] =
        op.call(grads[0], saved[0], spec.num_groups, optional(saved[1]), optional(saved[2]),
                spec.eps, {wanted(0), wanted(1), wanted(2)});
    return {dx, dweight, dbias};
  }
};

at::Tensor group_norm_with_graph(const at::Tensor& input, const OptionalTensor& weight,
                                 const OptionalTensor& bias, const GroupNormSpec& spec) {
  const auto forward = [&]() -> std::pair<at::Tensor, variable_list> {
    return {group_norm_forward(input, weight, bias, spec, false).y,
            {input, value(weight), value(bias)}};
  };
  return with_graph<GroupNormBackwardNode>({input, value(weight), value(bias)}, forward, spec);
}

// Dropout: linear with a fixed mask, so its backward is dropout itself; edge input.
struct DropoutBackwardNode final : GraphNode {
  DropoutSpec spec;
  explicit DropoutBackwardNode(const DropoutSpec& dropout_spec)
      : GraphNode("addnorm::DropoutBackward"), spec(dropout_spec) {}

  variable_list backward(const variable_list& grads, const Saved&) override {
    static const auto op = handle<decltype(ops::dropout)>("addnorm::dropout");
    return {op.call(grads[0], spec.p, spec.seed, spec.offset)};
  }
};

at::Tensor dropout_with_graph(const at::Tensor& input, const DropoutSpec& spec) {
  const auto forward = [&]() -> std::pair<at::Tensor, variable_list> {
    return {dropout_forward(input, spec), {}};
  };
  return with_graph<DropoutBackwardNode>({input}, forward, spec);
}

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

ops::Grads2 add_norm_pre_autograd(const at::Tensor& x_in, const at::Tensor& r_in,
                                  at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                                  const OptionalTensor& bias, c10::optional<double> eps,
                                  c10::string_view norm, bool zero_centered_weight) {
  const NormKind kind = norm_kind(norm);
  const auto [x, r] = as_addends(x_in, r_in, "r");
  const NormSpec spec{kind, normalized_shape.vec(), eps_or_default(eps, kind, x),
                      zero_centered_weight};
  if (composite::needed({x, r, weight, bias})) {
    return composite::add_norm_pre(x, r, weight, bias, spec);
  }
  if (!records_graph(x, r, weight, bias)) {
    PreNormOutputs out = add_norm_pre_forward(x, r, weight, bias, spec, false);
    return {out.h, out.y};
  }
  auto [h, y] = add_norm_pre_with_graph(x, r, weight, bias, spec);
  return {h, y};
}

at::Tensor add_norm_post_autograd(const at::Tensor& x_in, const at::Tensor& s_in,
                                  at::IntArrayRef normalized_shape, const OptionalTensor& weight,
                                  const OptionalTensor& bias, c10::optional<double> eps,
                                  c10::string_view norm, bool zero_centered_weight, double p,
                                  int64_t seed, int64_t offset) {
  const NormKind kind = norm_kind(norm);
  DropoutSpec dropout{p, seed, offset};
  const auto drop = [](const at::Tensor& branch, const DropoutSpec& spec) {
    static const auto op = handle<decltype(ops::dropout)>("addnorm::dropout");
    return op.call(branch, spec.p, spec.seed, spec.offset);  // recorded, as the user's would be
  };
  const auto [x, s] = as_addends(x_in, dropped_before_broadcast(s_in, x_in, dropout, drop), "s");
  const NormSpec spec{kind, normalized_shape.vec(), eps_or_default(eps, kind, x),
                      zero_centered_weight};
  if (composite::needed({x, s, weight, bias})) {
    return composite::add_norm_post(x, s, weight, bias, spec, dropout);
  }
  if (!records_graph(x, s, weight, bias)) {
    return add_norm_post_forward(x, s, weight, bias, spec, dropout, false).y;
  }
  return add_norm_post_with_graph(x, s, weight, bias, spec, dropout);
}

at::Tensor batch_norm_autograd(const at::Tensor& input, const OptionalTensor& weight,
                               const OptionalTensor& bias, const OptionalTensor& running_mean,
                               const OptionalTensor& running_var, bool training, double momentum,
                               double eps) {
  const BatchNormSpec spec{training, momentum, eps};
  // As PyTorch's autograd refuses it for native_batch_norm: the statistics are buffers, with no
  // gradient defined (in training they are also written in place).
  for (const auto& [name, stat] :
       {std::pair{"running_mean", &running_mean}, std::pair{"running_var", &running_var}}) {
    TORCH_CHECK(!(at::GradMode::is_enabled() && stat->has_value() && (*stat)->defined() &&
                  (*stat)->requires_grad()),
                "The function 'addnorm::batch_norm' is not differentiable with respect to "
                "argument '",
                name, "'. This input cannot have requires_grad True.");
  }
  if (composite::needed({input, weight, bias})) {
    // PyTorch's own op, which updates the running statistics as addnorm's kernel does.
    return at::batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                          false);
  }
  if (!records_graph(input, weight, bias)) {
    return batch_norm_forward(input, weight, bias, running_mean, running_var, spec);
  }
  return batch_norm_with_graph(input, weight, bias, running_mean, running_var, spec);
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
  return group_norm_with_graph(input, weight, bias, spec);
}

at::Tensor dropout_autograd(const at::Tensor& input, double p, int64_t seed, int64_t offset) {
  const DropoutSpec spec{p, seed, offset};
  if (composite::needed({input})) return composite::dropout(input, spec);
  if (!records_graph(input)) return dropout_forward(input, spec);
  return dropout_with_graph(input, spec);
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
                                         const OptionalTensor& bias, double eps,
                                         std::array<bool, 3> output_mask) {
  if (differentiable_result(grad_y, input, value(weight), value(bias))) {
    auto g = composite::group_norm_backward(grad_y, input, num_groups, weight, bias, eps);
    return {masked(g[0], output_mask[0]), masked(g[1], output_mask[1]),
            masked(g[2], output_mask[2])};
  }
  return below_autograd<decltype(ops::group_norm_backward)>(
      "addnorm::group_norm_backward", grad_y, input, num_groups, weight, bias, eps, output_mask);
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

// Meta tensors below autograd (inference mode, or a tracer's fake tensors): the same kernels,
// which send them to the composite forms.
TORCH_LIBRARY_IMPL(addnorm, Meta, m) {
  addnorm::torch_ops::register_differentiable_kernels(m);
}
