// The checks of every public op, written once for both element types: the float32 ops (ops.hpp,
// run by the fast kernels) and the float64 ops (float64.hpp, run by the reference kernels) call
// the same function before they touch memory, so both refuse exactly the same arguments with
// the same messages. Each returns the layout the kernels need.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "addnorm/error.hpp"
#include "addnorm/ops.hpp"
#include "ops/reference/batch_norm.hpp"
#include "ops/reference/group_norm.hpp"
#include "ops/validate.hpp"

namespace addnorm::detail {

template <class T>
using Const = TensorView<const T>;
template <class T>
using Mutable = TensorView<T>;
template <class T>
using MaybeConst = std::optional<TensorView<const T>>;

// ---- residual add and dropout --------------------------------------------------------------

template <class T>
int64_t check_add(const NormConst<T>& x, const NormConst<T>& r, const NormMutable<T>& out) {
  const int64_t count = check_tensor("x", x);
  check_shape("r", r, x.shape);
  check_shape("out", out, x.shape);
  if constexpr (std::is_same_v<T, float>) {
    check_same_storage("out", out, "x", x, "x and out are the residual stream: one storage type");
  }
  check_disjoint({region("out", out)}, {region("x", x), region("r", r)},
                 {{"out", "x"}, {"out", "r"}});
  return count;
}

// p in [0, 1) and offset + count within 64 bits (the stream's element index must not wrap).
template <class T>
void check_dropout(const BasicDropoutOptions<T>& options, int64_t count) {
  check_dropout_p(options.p);
  if (options.offset > UINT64_MAX - static_cast<uint64_t>(count)) {
    throw Error(ErrorKind::value, "offset",
                "is " + std::to_string(options.offset) + " for " + std::to_string(count) +
                    " elements, expected offset + element count to fit in 64 bits");
  }
}

// dropout (input "x", output "y") and its backward (input "dy", output "dx"): the output of the
// input's storage type.
template <class T>
int64_t check_dropout_op(const char* input_name, const NormConst<T>& input, const char* output_name,
                         const NormMutable<T>& output, const BasicDropoutOptions<T>& options) {
  const int64_t count = check_tensor(input_name, input);
  check_shape(output_name, output, input.shape);
  if constexpr (std::is_same_v<T, float>) {
    check_same_storage(output_name, output, input_name, input, "dropout keeps the storage type");
  }
  check_dropout(options, count);
  check_disjoint({region(output_name, output)}, {region(input_name, input)},
                 {{output_name, input_name}});
  return count;
}

// ---- the norm's description ----------------------------------------------------------------

// A NormKind norm_traits names: one cast from an integer out of the enum's range is refused
// rather than run as whichever kind its traits' defaults resemble.
inline void check_norm_kind(NormKind kind) {
  if (*norm_traits(kind).name == '\0') {
    throw Error(ErrorKind::value, "norm",
                "is NormKind(" + std::to_string(static_cast<int>(kind)) +
                    "), expected layer_norm or rms_norm");
  }
}

// The kind a plain op runs: its own, which options.norm may repeat but not contradict.
template <class T>
NormKind plain_kind(const BasicNormOptions<T>& options, NormKind op_kind) {
  if (options.norm) check_norm_kind(*options.norm);
  if (options.norm && *options.norm != op_kind) {
    throw Error(ErrorKind::value, "norm",
                std::string("is ") + norm_traits(*options.norm).name + ", expected " +
                    norm_traits(op_kind).name + " (the op's own) or none");
  }
  return op_kind;
}
// The kind a fused op runs: options.norm, LayerNorm when absent.
template <class T>
NormKind fused_kind(const BasicNormOptions<T>& options) {
  return kind_of(options, NormKind::layer_norm);
}

// The description against the kind it runs: gamma and beta of the normalised shape, no field
// the kind has no use for, eps.
template <class T>
void check_norm_options(const BasicNormOptions<T>& options, NormKind kind,
                        const Shape& normalized_shape) {
  check_norm_kind(kind);
  check_affine(options.gamma, options.beta, normalized_shape);
  const NormTraits traits = norm_traits(kind);
  if (!traits.has_shift && options.beta) {
    throw Error(ErrorKind::value, "beta",
                std::string("was given for ") + traits.name + ", expected none (it has no shift)");
  }
  if (traits.centres && options.zero_centered_gamma) {
    throw Error(ErrorKind::value, "zero_centered_gamma",
                std::string("was set for ") + traits.name + ", expected it only with rms_norm");
  }
  check_eps(eps_of(options, kind));
}

// The channel norms' description (GroupNorm, BatchNorm, named `op`): theirs is the centring
// kind, checked as LayerNorm's over the channels, gamma and beta of shape [C]; a field only
// another kind has is refused in the op's own name.
template <class T>
void check_channel_norm_options(const BasicNormOptions<T>& options, int64_t channels,
                                const char* op) {
  if (options.norm) check_norm_kind(*options.norm);
  if (options.norm && !norm_traits(*options.norm).centres) {
    throw Error(ErrorKind::value, "norm",
                std::string("is ") + norm_traits(*options.norm).name +
                    ", expected layer_norm or none: " + op + " centres, as LayerNorm does");
  }
  if (options.zero_centered_gamma) {
    throw Error(ErrorKind::value, "zero_centered_gamma",
                std::string("was set for ") + op + ", expected it only with rms_norm");
  }
  check_norm_options(options, NormKind::layer_norm, Shape{channels});
}
// The eps a channel norm runs with: the one given, or the centring kind's default.
template <class T>
T channel_eps(const BasicNormOptions<T>& options) {
  return eps_of(options, NormKind::layer_norm);
}

// The mean a call reads or writes: only a centring norm's.
template <class Stats>
auto norm_mean(const std::optional<Stats>& stats, NormKind kind) {
  return stats && norm_traits(kind).centres ? &stats->mean : nullptr;
}

// ---- LayerNorm and RMSNorm -----------------------------------------------------------------

// What every plain norm forward checks, in this order (an absent argument is a null pointer):
// the kind, x and its rows, y, the description, the per-row statistics asked for, and that no
// output overlaps an input, y over x excepted.
template <class T>
RowLayout check_norm_forward(NormKind op_kind, const NormConst<T>& x, const Shape& normalized_shape,
                             const NormMutable<T>& y, const BasicNormOptions<T>& options,
                             const Mutable<T>* mean, const Mutable<T>* rstd) {
  const NormKind kind = plain_kind(options, op_kind);
  check_tensor("x", x);
  const RowLayout layout = row_layout(x.shape, normalized_shape);
  check_shape("y", y, x.shape);
  check_norm_options(options, kind, normalized_shape);
  if (mean) check_count("mean", *mean, layout.rows, "per row");
  if (rstd) check_count("rstd", *rstd, layout.rows, "per row");
  check_disjoint({region("y", y), region("mean", mean), region("rstd", rstd)},
                 {region("x", x), region("gamma", options.gamma), region("beta", options.beta)},
                 {{"y", "x"}});
  return layout;
}

// The same for a plain norm backward: the kind, x and its rows, dy, dx, the description, dgamma
// and dbeta against their parameters, the saved statistics given, and no output over an input
// but dx over dy or x.
template <class T>
RowLayout check_norm_backward(NormKind op_kind, const NormConst<T>& dy, const NormConst<T>& x,
                              const Shape& normalized_shape, const NormMutable<T>& dx,
                              const std::optional<Mutable<T>>& dgamma,
                              const std::optional<Mutable<T>>& dbeta,
                              const BasicNormOptions<T>& options, const Const<T>* mean,
                              const Const<T>* rstd) {
  const NormKind kind = plain_kind(options, op_kind);
  check_tensor("x", x);
  const RowLayout layout = row_layout(x.shape, normalized_shape);
  check_shape("dy", dy, x.shape);
  check_shape("dx", dx, x.shape);
  if constexpr (std::is_same_v<T, float>) {
    check_same_storage("dx", dx, "x", x, "a gradient is stored as its tensor");
  }
  check_norm_options(options, kind, normalized_shape);
  check_parameter_grad("dgamma", dgamma, "gamma", options.gamma, normalized_shape);
  check_parameter_grad("dbeta", dbeta, "beta", options.beta, normalized_shape);
  if (mean) check_count("mean", *mean, layout.rows, "per row");
  if (rstd) check_count("rstd", *rstd, layout.rows, "per row");
  check_disjoint({region("dx", dx), region("dgamma", dgamma), region("dbeta", dbeta)},
                 {region("dy", dy), region("x", x), region("gamma", options.gamma),
                  region("beta", options.beta), region("mean", mean), region("rstd", rstd)},
                 {{"dx", "dy"}, {"dx", "x"}});
  return layout;
}

template <class T>
RowLayout check_layer_norm(const NormConst<T>& x, const Shape& normalized_shape,
                           const NormMutable<T>& y, const BasicNormOptions<T>& options,
                           const std::optional<BasicNormStats<T>>& stats) {
  return check_norm_forward<T>(NormKind::layer_norm, x, normalized_shape, y, options,
                               stats ? &stats->mean : nullptr, stats ? &stats->rstd : nullptr);
}

template <class T>
RowLayout check_layer_norm_backward(const NormConst<T>& dy, const NormConst<T>& x,
                                    const Shape& normalized_shape,
                                    const BasicLayerNormGrads<T>& grads,
                                    const BasicNormOptions<T>& options,
                                    const std::optional<BasicSavedStats<T>>& saved) {
  return check_norm_backward<T>(NormKind::layer_norm, dy, x, normalized_shape, grads.dx,
                                grads.dgamma, grads.dbeta, options, saved ? &saved->mean : nullptr,
                                saved ? &saved->rstd : nullptr);
}

template <class T>
RowLayout check_rms_norm(const NormConst<T>& x, const Shape& normalized_shape,
                         const NormMutable<T>& y, const BasicNormOptions<T>& options,
                         const std::optional<Mutable<T>>& rstd) {
  return check_norm_forward<T>(NormKind::rms_norm, x, normalized_shape, y, options, nullptr,
                               rstd ? &*rstd : nullptr);
}

template <class T>
RowLayout check_rms_norm_backward(const NormConst<T>& dy, const NormConst<T>& x,
                                  const Shape& normalized_shape, const BasicRmsNormGrads<T>& grads,
                                  const BasicNormOptions<T>& options,
                                  const MaybeConst<T>& saved_rstd) {
  return check_norm_backward<T>(NormKind::rms_norm, dy, x, normalized_shape, grads.dx, grads.dgamma,
                                std::optional<Mutable<T>>{}, options, nullptr,
                                saved_rstd ? &*saved_rstd : nullptr);
}

// ---- GroupNorm -----------------------------------------------------------------------------

// x is (N, C, *) with channels on axis 1, and num_groups divides C.
template <class View, class T>
reference::GroupLayout group_layout(const View& x, const BasicGroupNormOptions<T>& options) {
  check_tensor("x", x);
  const int rank = x.shape.rank();
  const bool last = options.channels_last;
  if (rank < 2) {
    throw Error(ErrorKind::shape, "x",
                "has shape " + x.shape.to_string() +
                    (last ? ", expected (N, *, C) with channels on the last axis (channels_last)"
                          : ", expected (N, C, *) with channels on axis 1"));
  }
  const int64_t channels = x.shape[last ? rank - 1 : 1];
  if (options.num_groups < 1 || channels % options.num_groups != 0) {
    throw Error(ErrorKind::value, "num_groups",
                "is " + std::to_string(options.num_groups) + ", expected a divisor of the " +
                    std::to_string(channels) + " channels of x (" +
                    (last ? "the last axis" : "axis 1") + " of " + x.shape.to_string() + ")");
  }
  const int64_t spatial = last ? x.shape.product(1, rank - 1) : x.shape.product(2, rank);
  return {x.shape[0], channels, options.num_groups, spatial};
}

template <class T>
reference::GroupLayout check_group_norm(const NormConst<T>& x, const NormMutable<T>& y,
                                        const BasicGroupNormOptions<T>& options,
                                        const std::optional<BasicNormStats<T>>& stats) {
  const reference::GroupLayout layout = group_layout(x, options);
  check_shape("y", y, x.shape);
  check_channel_norm_options(options, layout.channels, "group_norm");
  if (stats) {
    check_shape("mean", stats->mean, Shape{layout.batch, layout.groups});
    check_shape("rstd", stats->rstd, Shape{layout.batch, layout.groups});
  }
  check_disjoint({region("y", y), region("mean", stats ? &stats->mean : nullptr),
                  region("rstd", stats ? &stats->rstd : nullptr)},
                 {region("x", x), region("gamma", options.gamma), region("beta", options.beta)},
                 {{"y", "x"}});
  return layout;
}

template <class T>
reference::GroupLayout check_group_norm_backward(const NormConst<T>& dy, const NormConst<T>& x,
                                                 const BasicGroupNormGrads<T>& grads,
                                                 const BasicGroupNormOptions<T>& options,
                                                 const std::optional<BasicSavedStats<T>>& saved) {
  const reference::GroupLayout layout = group_layout(x, options);
  check_shape("dy", dy, x.shape);
  check_shape("dx", grads.dx, x.shape);
  if constexpr (std::is_same_v<T, float>) {
    check_same_storage("dx", grads.dx, "x", x, "a gradient is stored as its tensor");
  }
  const Shape channels{layout.channels};
  check_channel_norm_options(options, layout.channels, "group_norm");
  check_parameter_grad("dgamma", grads.dgamma, "gamma", options.gamma, channels);
  check_parameter_grad("dbeta", grads.dbeta, "beta", options.beta, channels);
  if (saved) {
    check_shape("mean", saved->mean, Shape{layout.batch, layout.groups});
    check_shape("rstd", saved->rstd, Shape{layout.batch, layout.groups});
  }
  check_disjoint(
      {region("dx", grads.dx), region("dgamma", grads.dgamma), region("dbeta", grads.dbeta)},
      {region("dy", dy), region("x", x), region("gamma", options.gamma),
       region("beta", options.beta), region("mean", saved ? &saved->mean : nullptr),
       region("rstd", saved ? &saved->rstd : nullptr)},
      {{"dx", "dy"}, {"dx", "x"}});
  return layout;
}

// ---- BatchNorm -----------------------------------------------------------------------------

// x is (N, C, *) of rank 2 to 5 with channels on axis 1, seen as [N, C, L] with L the product of
// the trailing dims; or, channels last, (N, *, C), seen as [N * product(*), C, 1].
inline constexpr int kBatchNormMaxRank = 5;
template <class View>
reference::BatchLayout batch_layout(const View& x, bool channels_last) {
  check_tensor("x", x);
  const int rank = x.shape.rank();
  if (rank < 2 || rank > kBatchNormMaxRank) {
    throw Error(
        ErrorKind::shape, "x",
        "has shape " + x.shape.to_string() + ", expected rank 2 to 5: " +
            (channels_last ? "(N, *, C) with channels last" : "(N, C, *) with channels on axis 1"));
  }
  if (channels_last) return {x.shape.product(0, rank - 1), x.shape[rank - 1], 1};
  return {x.shape[0], x.shape[1], x.shape.product(2, rank)};
}

template <class T>
void check_batch_norm_options(const BasicBatchNormOptions<T>& options,
                              const reference::BatchLayout& layout,
                              const std::optional<BasicRunningStats<T>>& running) {
  const Shape channels{layout.channels};
  check_channel_norm_options(options, layout.channels, "batch_norm");
  check_momentum(options.momentum);
  switch (options.convention) {
    case MomentumConvention::pytorch:
    case MomentumConvention::onnx:
      break;
    default:
      throw Error(ErrorKind::value, "convention",
                  "is " + std::to_string(static_cast<int>(options.convention)) +
                      ", expected MomentumConvention::pytorch or onnx");
  }
  if (running) {
    check_shape("running_mean", running->mean, channels);
    check_shape("running_var", running->var, channels);
  } else if (!options.training) {
    throw Error(ErrorKind::value, "running_mean",
                "and running_var are absent, expected both in inference mode");
  }
  // PyTorch's rule: one value has no spread to learn from; none is an empty batch, allowed.
  if (options.training && layout.per_channel() == 1) {
    throw Error(ErrorKind::shape, "x",
                "has shape [" + std::to_string(layout.batch) + ", " +
                    std::to_string(layout.channels) + (layout.length > 1 ? ", ..." : "") +
                    "] with 1 value per channel, expected more than 1 in training mode");
  }
}

template <class T>
reference::BatchLayout check_batch_norm(const NormConst<T>& x, const NormMutable<T>& y,
                                        const BasicBatchNormOptions<T>& options,
                                        const std::optional<BasicRunningStats<T>>& running,
                                        const std::optional<BasicNormStats<T>>& batch_stats) {
  const reference::BatchLayout layout = batch_layout(x, options.channels_last);
  check_shape("y", y, x.shape);
  if constexpr (std::is_same_v<T, float>) {
    check_same_storage("y", y, "x", x, "BatchNorm's tensors share one storage type");
  }
  check_batch_norm_options(options, layout, running);
  if (batch_stats) {
    if (!options.training) {
      throw Error(ErrorKind::value, "batch_stats",
                  "was requested in inference mode, expected it only in training");
    }
    check_shape("batch mean", batch_stats->mean, Shape{layout.channels});
    check_shape("batch rstd", batch_stats->rstd, Shape{layout.channels});
  }
  // The running statistics are outputs (updated in place): neither may overlap the other.
  check_disjoint({region("y", y), region("running_mean", running ? &running->mean : nullptr),
                  region("running_var", running ? &running->var : nullptr),
                  region("batch mean", batch_stats ? &batch_stats->mean : nullptr),
                  region("batch rstd", batch_stats ? &batch_stats->rstd : nullptr)},
                 {region("x", x), region("gamma", options.gamma), region("beta", options.beta)},
                 {{"y", "x"}});
  return layout;
}

template <class T>
reference::BatchLayout check_batch_norm_backward(
    const NormConst<T>& dy, const NormConst<T>& x, const BasicBatchNormGrads<T>& grads,
    const BasicBatchNormOptions<T>& options, const std::optional<BasicRunningStats<T>>& running) {
  const reference::BatchLayout layout = batch_layout(x, options.channels_last);
  check_shape("dy", dy, x.shape);
  check_shape("dx", grads.dx, x.shape);
  if constexpr (std::is_same_v<T, float>) {
    check_same_storage("dy", dy, "x", x, "BatchNorm's tensors share one storage type");
    check_same_storage("dx", grads.dx, "x", x, "a gradient is stored as its tensor");
  }
  check_batch_norm_options(options, layout, running);
  const Shape channels{layout.channels};
  check_parameter_grad("dgamma", grads.dgamma, "gamma", options.gamma, channels);
  check_parameter_grad("dbeta", grads.dbeta, "beta", options.beta, channels);
  check_disjoint(
      {region("dx", grads.dx), region("dgamma", grads.dgamma), region("dbeta", grads.dbeta)},
      {region("dy", dy), region("x", x), region("gamma", options.gamma),
       region("running_mean", running ? &running->mean : nullptr),
       region("running_var", running ? &running->var : nullptr)},
      {{"dx", "dy"}, {"dx", "x"}});
  return layout;
}

// ---- fused Add & Norm ----------------------------------------------------------------------

// The norm's options, and x (named x_name) against `other` of the same shape.
template <class T>
RowLayout check_add_norm(const char* x_name, const NormConst<T>& x, const char* other_name,
                         const NormConst<T>& other, const Shape& normalized_shape,
                         const BasicNormOptions<T>& options) {
  check_tensor(x_name, x);
  const RowLayout layout = row_layout(x.shape, normalized_shape, x_name);
  check_shape(other_name, other, x.shape);
  check_norm_options(options, fused_kind(options), normalized_shape);
  return layout;
}

// Statistics of a fused forward (written) or backward (read): rstd always, a mean when the
// norm centres.
template <class Stats, class T>
void check_add_norm_stats(const std::optional<Stats>& stats, const BasicNormOptions<T>& options,
                          int64_t rows) {
  if (!stats) return;
  if (norm_traits(fused_kind(options)).centres) check_count("mean", stats->mean, rows, "per row");
  check_count("rstd", stats->rstd, rows, "per row");
}

template <class T>
void check_add_norm_grads(const std::optional<Mutable<T>>& dgamma,
                          const std::optional<Mutable<T>>& dbeta,
                          const BasicNormOptions<T>& options, const Shape& normalized_shape) {
  check_parameter_grad("dgamma", dgamma, "gamma", options.gamma, normalized_shape);
  check_parameter_grad("dbeta", dbeta, "beta", options.beta, normalized_shape);
}

template <class T>
RowLayout check_add_norm_pre(const NormConst<T>& x, const NormConst<T>& r,
                             const Shape& normalized_shape, const NormMutable<T>& h,
                             const NormMutable<T>& y, const BasicNormOptions<T>& options,
                             const std::optional<BasicNormStats<T>>& stats) {
  const RowLayout layout = check_add_norm("x", x, "r", r, normalized_shape, options);
  check_shape("h", h, x.shape);
  check_shape("y", y, x.shape);
  if constexpr (std::is_same_v<T, float>) {
    check_same_storage("h", h, "x", x, "x and h are the residual stream: one storage type");
    check_same_storage("y", y, "r", r, "r and y are the branch: one storage type");
  }
  check_add_norm_stats(stats, options, layout.rows);
  check_disjoint(
      {region("h", h), region("y", y), region("mean", norm_mean(stats, fused_kind(options))),
       region("rstd", stats ? &stats->rstd : nullptr)},
      {region("x", x), region("r", r), region("gamma", options.gamma),
       region("beta", options.beta)},
      {{"h", "x"}, {"h", "r"}});
  return layout;
}

template <class T>
RowLayout check_add_norm_pre_backward(const NormConst<T>& dy,
                                      const std::optional<NormConst<T>>& dh_next,
                                      const NormConst<T>& h, const Shape& normalized_shape,
                                      const BasicAddNormPreGrads<T>& grads,
                                      const BasicNormOptions<T>& options,
                                      const std::optional<BasicSavedStats<T>>& saved) {
  const RowLayout layout = check_add_norm("h", h, "dy", dy, normalized_shape, options);
  if (dh_next) check_shape("dh_next", *dh_next, h.shape);
  check_shape("dh", grads.dh, h.shape);
  if constexpr (std::is_same_v<T, float>) {
    const char* group = "h, dh_next and dh are the residual stream: one storage type";
    if (dh_next) check_same_storage("dh_next", *dh_next, "h", h, group);
    check_same_storage("dh", grads.dh, "h", h, group);
  }
  check_add_norm_grads(grads.dgamma, grads.dbeta, options, normalized_shape);
  check_add_norm_stats(saved, options, layout.rows);
  check_disjoint(
      {region("dh", grads.dh), region("dgamma", grads.dgamma), region("dbeta", grads.dbeta)},
      {region("dy", dy), region("dh_next", dh_next), region("h", h), region("gamma", options.gamma),
       region("beta", options.beta), region("mean", norm_mean(saved, fused_kind(options))),
       region("rstd", saved ? &saved->rstd : nullptr)},
      {{"dh", "dy"}, {"dh", "dh_next"}, {"dh", "h"}});
  return layout;
}

template <class T>
RowLayout check_add_norm_post(const NormConst<T>& x, const NormConst<T>& s,
                              const Shape& normalized_shape, const NormMutable<T>& y,
                              const BasicNormOptions<T>& options,
                              const BasicDropoutOptions<T>& dropout,
                              const std::optional<BasicNormStats<T>>& stats) {
  const RowLayout layout = check_add_norm("x", x, "s", s, normalized_shape, options);
  check_shape("y", y, x.shape);
  check_dropout(dropout, layout.rows * layout.dim);
  check_add_norm_stats(stats, options, layout.rows);
  check_disjoint({region("y", y), region("mean", norm_mean(stats, fused_kind(options))),
                  region("rstd", stats ? &stats->rstd : nullptr)},
                 {region("x", x), region("s", s), region("gamma", options.gamma),
                  region("beta", options.beta)},
                 {{"y", "x"}, {"y", "s"}});
  return layout;
}

template <class T>
RowLayout check_add_norm_post_backward(const NormConst<T>& dy, const NormConst<T>& x,
                                       const NormConst<T>& s, const Shape& normalized_shape,
                                       const BasicAddNormPostGrads<T>& grads,
                                       const BasicNormOptions<T>& options,
                                       const BasicDropoutOptions<T>& dropout,
                                       const std::optional<BasicSavedStats<T>>& saved) {
  const RowLayout layout = check_add_norm("x", x, "s", s, normalized_shape, options);
  check_shape("dy", dy, x.shape);
  check_shape("dx", grads.dx, x.shape);
  check_shape("ds", grads.ds, x.shape);
  check_dropout(dropout, layout.rows * layout.dim);
  check_add_norm_grads(grads.dgamma, grads.dbeta, options, normalized_shape);
  check_add_norm_stats(saved, options, layout.rows);
  check_disjoint(
      {region("dx", grads.dx), region("ds", grads.ds), region("dgamma", grads.dgamma),
       region("dbeta", grads.dbeta)},
      {region("dy", dy), region("x", x), region("s", s), region("gamma", options.gamma),
       region("beta", options.beta), region("mean", norm_mean(saved, fused_kind(options))),
       region("rstd", saved ? &saved->rstd : nullptr)},
      {{"dx", "dy"}, {"dx", "x"}, {"ds", "s"}});
  return layout;
}

}  // namespace addnorm::detail
