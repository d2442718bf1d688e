// The Add & Norm operations: residual add, LayerNorm, RMSNorm, BatchNorm, dropout and the fused
// pre-norm and post-norm Add&Norm, each forward and backward. The same ops on float64 views, with
// the same arguments and checks, are in addnorm/float64.hpp.
//
// Storage: the norms and the fused Add & Norm take each tensor and parameter as a view of any
// storage type (AnyConstView, AnyMutableView: float32, bfloat16 or float16, addnorm/dtype.hpp).
// A call's tensors form two groups of one type each, any two types: the residual stream (x and
// h; in a backward x or h, dh_next and the gradient written to them) and the branch (r and y;
// dy): a float32 residual stream beside bfloat16 activations, say. A gradient is stored as its
// tensor; post-norm takes x, s, y and each gradient in any type; gamma and beta may each be of
// any type. A call outside these rules is refused (Error names the tensor). A float32 view
// converts to them implicitly. Computation is float32 with float64 reductions whatever the
// storage; each output is rounded once to its storage type. Statistics (mean, rstd) and the
// parameters' gradients are float32. GroupNorm's, BatchNorm's and dropout's rules are at their
// ops.
//
// Conventions shared by every function here:
// - Tensors are C-contiguous views. A "row" is one slice over the normalised (trailing) dims;
//   LayerNorm and RMSNorm treat x as [rows, dim], dim = product of normalized_shape.
// - Arguments are validated before any memory is written. A bad argument throws addnorm::Error
//   whose message names it and says what was expected; outputs are then left untouched.
// - Outputs may be exactly the memory of the input they replace (y may be x, h may be x or r,
//   dx may be dy or x, ds may be s; docs/numerics.md lists them all) but must not otherwise
//   overlap any other argument.
// - A tensor may have no elements (a dimension of 0: an empty batch, as PyTorch allows); its
//   data may then be null. Nothing is read; dgamma and dbeta are 0 (sums over nothing),
//   statistics over no elements (mean, rstd) are NaN, and running statistics keep their values
//   (src/ops/empty_batch.hpp).
// - Results are within a few ulp of a float64 computation on the same float32 inputs;
//   docs/numerics.md states the contract and the policy for constant, NaN and Inf rows.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "addnorm/dtype.hpp"
#include "addnorm/error.hpp"
#include "addnorm/norm_kind.hpp"
#include "addnorm/tensor.hpp"
#include "addnorm/visibility.hpp"

ADDNORM_PUBLIC_BEGIN
namespace addnorm {

// A number a face received as a double (a Python float, the C ABI's and the command line's
// double) in the element type T of the call it configures: eps, momentum, p. A finite value
// beyond float32's range is refused with Error naming it, before any conversion (converting it
// would be undefined behaviour); NaN and infinity pass through, for the op's own check to name.
float narrow_to_float(const char* name, double value);
// The limit as the errors state it: float32's largest value written exactly enough that a number
// just beyond it (3.4028235e38 as typed) does not read as within it.
inline constexpr const char* kFloat32RangeLimit = "at most 3.4028234663852886e38 in magnitude";
// A dropout probability a face received as a double, checked by the one rule of every element
// type before any conversion: in [0, 1), and below 1 after rounding to float32 (the mask is drawn
// at float32's precision). Throws Error naming p otherwise.
double checked_dropout_p(double p);
template <class T>
T dropout_p_as(double p) {
  return static_cast<T>(checked_dropout_p(p));
}
template <class T>
T argument_as(const char* name, double value) {
  if constexpr (std::is_same_v<T, float>) {
    return narrow_to_float(name, value);
  } else {
    return static_cast<T>(value);
  }
}
// eps and momentum as a face received them, checked by the ops' rules (each finite, of either
// sign, as PyTorch and ONNX take them) on the double itself before the conversion to T: every
// face calls these instead of checking them itself.
double checked_eps(double eps);
double checked_momentum(double momentum);
template <class T>
T eps_as(double eps) {
  return argument_as<T>("eps", checked_eps(eps));
}
template <class T>
T momentum_as(double momentum) {
  return argument_as<T>("momentum", checked_momentum(momentum));
}

// The views the norms take for element type T: of any storage type for the float32 ops (T =
// float), float64 views for the float64 ops (T = double).
template <class T>
struct NormViews {
  using Const = TensorView<const T>;
  using Mutable = TensorView<T>;
};
template <>
struct NormViews<float> {
  using Const = AnyConstView;
  using Mutable = AnyMutableView;
};
template <class T>
using NormConst = typename NormViews<T>::Const;
template <class T>
using NormMutable = typename NormViews<T>::Mutable;

// ---------------------------------------------------------------------------------------------
// Residual add: out = x + r (same shape), each sum rounded once to out's storage type. x and out
// are the residual stream (one storage type), r the branch (any): the pre-norm's h = x + r, bit
// for bit. out may be x or r (r only when of out's type).
void add(AnyConstView x, AnyConstView r, AnyMutableView out);

// ---------------------------------------------------------------------------------------------
// One description of a row norm, taken by the plain ops (layer_norm, rms_norm) and the fused
// Add & Norm ops alike, on every face: which norm, its affine parameters and eps. What a field
// means for each kind comes from norm_traits; the checks refuse a field the kind has no use for.
template <class T>
struct BasicNormOptions {
  // Which norm. Absent: the op's own; layer_norm and rms_norm refuse another kind, the fused ops
  // run LayerNorm.
  std::optional<NormKind> norm = std::nullopt;
  std::optional<NormConst<T>> gamma = std::nullopt;  // shape normalized_shape; absent: scale 1
  std::optional<NormConst<T>> beta = std::nullopt;   // a shifting kind's only; absent: shift 0
  bool zero_centered_gamma = false;  // a kind that does not centre (RMSNorm): scale by 1 + gamma
  // Finite, added under the square root (a negative eps is taken, as PyTorch takes it: a row
  // whose variance + eps is negative gets NaN). Absent: norm_traits(kind).default_eps, so a
  // fused op's default is the plain op's.
  std::optional<T> eps = std::nullopt;
};
using NormOptions = BasicNormOptions<float>;
// The kind a call runs: options.norm, or `op_kind` (the op's own) when absent.
template <class T>
constexpr NormKind kind_of(const BasicNormOptions<T>& options, NormKind op_kind) {
  return options.norm.value_or(op_kind);
}
// The eps a call runs with: the one given, or the default of the kind it runs.
template <class T>
T eps_of(const BasicNormOptions<T>& options, NormKind op_kind) {
  return options.eps ? *options.eps : T(norm_traits(kind_of(options, op_kind)).default_eps);
}

// ---------------------------------------------------------------------------------------------
// Per-row statistics saved by a forward for its backward: shape = the leading (row) dims of x.
// Each argument struct below is a template over the element type T, so that the float64 ops
// (addnorm/float64.hpp) take the same fields; the names without "Basic" are the float32 ones.
template <class T>
struct BasicNormStats {
  TensorView<T> mean;  // LayerNorm only; ignored (may be empty) for RMSNorm
  TensorView<T> rstd;  // 1 / sqrt(variance + eps), or 1 / sqrt(mean(x^2) + eps) for RMSNorm
};
template <class T>
struct BasicSavedStats {
  TensorView<const T> mean;
  TensorView<const T> rstd;
};
using NormStats = BasicNormStats<float>;
using SavedStats = BasicSavedStats<float>;

// LayerNorm over the trailing dims named by normalized_shape (PyTorch's rule: they must equal
// x's trailing dims). y = (x - mean) / sqrt(var + eps) * gamma + beta, population variance.
// options.norm, when set, must be layer_norm.
void layer_norm(AnyConstView x, const Shape& normalized_shape, AnyMutableView y,
                const NormOptions& options = {}, std::optional<NormStats> stats = {});

// Gradients of layer_norm. dgamma/dbeta may only be asked for when gamma/beta exist (dbeta
// also when beta is absent but gamma is given is refused: it would be a gradient of nothing).
template <class T>
struct BasicLayerNormGrads {
  NormMutable<T> dx;
  std::optional<TensorView<T>> dgamma;
  std::optional<TensorView<T>> dbeta;
};
using LayerNormGrads = BasicLayerNormGrads<float>;
// `saved` (from the forward) lets the backward skip the variance pass; without it the
// statistics are recomputed from x. Either way the result is the same to within rounding.
void layer_norm_backward(AnyConstView dy, AnyConstView x, const Shape& normalized_shape,
                         const LayerNormGrads& grads, const NormOptions& options = {},
                         std::optional<SavedStats> saved = {});

// ONNX's axis form: the normalized_shape that normalises x from `axis` (may be negative) on.
Shape normalized_shape_from_axis(const Shape& x_shape, int64_t axis);

// ---------------------------------------------------------------------------------------------
// RMSNorm: y = x / sqrt(mean(x^2) + eps) * gamma, or * (1 + gamma) with zero_centered_gamma.
// options.norm, when set, must be rms_norm; beta is refused (RMSNorm has no shift).
void rms_norm(AnyConstView x, const Shape& normalized_shape, AnyMutableView y,
              const NormOptions& options = {}, OptionalMutable rstd = {});

template <class T>
struct BasicRmsNormGrads {
  NormMutable<T> dx;
  std::optional<TensorView<T>> dgamma;
};
using RmsNormGrads = BasicRmsNormGrads<float>;
void rms_norm_backward(AnyConstView dy, AnyConstView x, const Shape& normalized_shape,
                       const RmsNormGrads& grads, const NormOptions& options = {},
                       OptionalConst saved_rstd = {});

// ---------------------------------------------------------------------------------------------
// Any row norm through one entry point: the kind options.norm names (LayerNorm when absent), with
// the same checks and the same bits as layer_norm or rms_norm, so that a caller holding a
// NormOptions needs no switch over NormKind of its own. stats->mean and saved->mean are read or
// written for a centring kind only (otherwise ignored; they may be empty); dbeta is refused for
// a kind without a shift, as beta is.
void norm(AnyConstView x, const Shape& normalized_shape, AnyMutableView y,
          const NormOptions& options = {}, std::optional<NormStats> stats = {});
template <class T>
using BasicNormGrads = BasicLayerNormGrads<T>;  // dx, and dgamma and dbeta where the kind has them
using NormGrads = BasicNormGrads<float>;
void norm_backward(AnyConstView dy, AnyConstView x, const Shape& normalized_shape,
                   const NormGrads& grads, const NormOptions& options = {},
                   std::optional<SavedStats> saved = {});

// ---------------------------------------------------------------------------------------------
// GroupNorm over x shaped (N, C, *) (PyTorch's nn.GroupNorm; ONNX GroupNormalization-21): the C
// channels form num_groups groups of C / num_groups consecutive channels, and each sample's group
// is normalised over its channels and all their positions, as a LayerNorm row would be; gamma
// and beta then scale and shift each channel. InstanceNorm is num_groups = C.
// y = (x - mean_ng) / sqrt(var_ng + eps) * gamma_c + beta_c, population variance.
// The options are the one norm description (NormOptions: gamma and beta, of shape [C] here, and
// eps, absent for the default) and the number of groups. GroupNorm centres: norm is absent or
// layer_norm, and zero_centered_gamma is refused as for LayerNorm.
template <class T>
struct BasicGroupNormOptions : BasicNormOptions<T> {
  int64_t num_groups = 1;  // >= 1, dividing C
  // Channels on x's last axis instead of axis 1, as BatchNormOptions::channels_last: x, y (dy
  // and dx) shaped (N, *, C), the order a PyTorch channels_last or channels_last_3d tensor is
  // stored in; a group is then a band of C / num_groups consecutive channels of every position.
  // mean and rstd are [N, num_groups] either way. The float32-computed forward and backward with
  // their tensors of one storage type and samples of at least 2048 values (positions x C) read
  // and write that order directly; the other calls run the channels-first kernels between copies.
  bool channels_last = false;
};
using GroupNormOptions = BasicGroupNormOptions<float>;
// `stats`, when given, receives the mean and rstd of each (sample, group): shape [N, num_groups].
void group_norm(AnyConstView x, AnyMutableView y, const GroupNormOptions& options,
                std::optional<NormStats> stats = {});

template <class T>
struct BasicGroupNormGrads {
  NormMutable<T> dx;
  std::optional<TensorView<T>> dgamma = std::nullopt;  // shape [C]
  std::optional<TensorView<T>> dbeta = std::nullopt;   // shape [C]
};
using GroupNormGrads = BasicGroupNormGrads<float>;
// The statistics are recomputed from x (exactly, as the forward did); `saved`, when given, is
// checked for shape [N, num_groups] and otherwise not needed. dgamma/dbeta are summed over
// samples in a fixed order: bitwise identical for any thread count.
void group_norm_backward(AnyConstView dy, AnyConstView x, const GroupNormGrads& grads,
                         const GroupNormOptions& options, std::optional<SavedStats> saved = {});

// ---------------------------------------------------------------------------------------------
// BatchNorm over the channels of x shaped (N, C, *), rank 2 to 5: channel axis 1, PyTorch's
// layout, or with channels_last the last axis, (N, *, C), as a channels-last tensor is stored.
// x, y, dy and dx are of one storage type, any of them (the float32 ops compute in float32 with
// float64 statistics and round each output once); gamma and beta of any; the running and saved
// statistics and dgamma/dbeta are float32, as mixed-precision training keeps them.
enum class MomentumConvention {
  // PyTorch: running = (1 - momentum) * running + momentum * batch; running_var is unbiased.
  pytorch,
  // ONNX: running = momentum * running + (1 - momentum) * batch; running_var is biased.
  onnx,
};

// The one norm description (NormOptions: gamma and beta of shape [C], eps; BatchNorm centres, as
// GroupNorm does) and what only BatchNorm has.
template <class T>
struct BasicBatchNormOptions : BasicNormOptions<T> {
  bool training = true;
  T momentum = T(0.1);  // finite (usually in [0, 1]); PyTorch's default (ONNX's default is 0.9)
  MomentumConvention convention = MomentumConvention::pytorch;
  bool channels_last = false;  // channels on x's last axis instead of axis 1
};
using BatchNormOptions = BasicBatchNormOptions<float>;
// Running statistics (shape [C]). In training mode they are optional and updated in place; in
// inference mode they are required and used to normalise. mean and var must be separate memory.
template <class T>
struct BasicRunningStats {
  TensorView<T> mean;
  TensorView<T> var;
};
using RunningStats = BasicRunningStats<float>;
// `batch_stats`, when given in training mode, receives the batch mean and rstd per channel.
void batch_norm(AnyConstView x, AnyMutableView y, const BatchNormOptions& options = {},
                std::optional<RunningStats> running = {},
                std::optional<NormStats> batch_stats = {});

template <class T>
struct BasicBatchNormGrads {
  NormMutable<T> dx;
  std::optional<TensorView<T>> dgamma;
  std::optional<TensorView<T>> dbeta;
};
using BatchNormGrads = BasicBatchNormGrads<float>;
// Training mode: the gradient through the batch statistics (recomputed from x). Inference mode:
// the running statistics are constants, so `running` is required and only scales dy.
void batch_norm_backward(AnyConstView dy, AnyConstView x, const BatchNormGrads& grads,
                         const BatchNormOptions& options = {},
                         std::optional<RunningStats> running = {});

// ---------------------------------------------------------------------------------------------
// Dropout. Masks come from a counter-based generator keyed by (seed, offset): element i of a
// tensor is kept iff philox_uniform(seed, offset + i) >= p, so a mask never depends on the
// thread count and is regenerated in the backward rather than stored.
template <class T>
struct BasicDropoutOptions {
  T p = 0;  // drop probability in [0, 1); kept values are scaled by 1 / (1 - p)
  uint64_t seed = 0;
  uint64_t offset = 0;  // element offset into the seed's stream, for many tensors per step;
                        // offset + element count must fit in 64 bits
};
using DropoutOptions = BasicDropoutOptions<float>;
// x and y (dy and dx) share one storage type, any of them: each output is the float32 op's value
// rounded once.
void dropout(AnyConstView x, AnyMutableView y, const DropoutOptions& options);
void dropout_backward(AnyConstView dy, AnyMutableView dx, const DropoutOptions& options);
// Writes the keep mask (1 kept, 0 dropped) for a tensor of the given shape, for callers who
// want to store or inspect it.
void dropout_mask(TensorView<uint8_t> mask, const DropoutOptions& options);

// ---------------------------------------------------------------------------------------------
// Fused Add & Norm.

// The fused ops take the same NormOptions as the plain ones; an absent options.norm is LayerNorm.
// Pre-norm (GPT-2): h = x + r and y = Norm(h) in one pass. h is what the next residual adds to;
// y is what the next sub-layer reads. h may be x or r.
void add_norm_pre(AnyConstView x, AnyConstView r, const Shape& normalized_shape, AnyMutableView h,
                  AnyMutableView y, const NormOptions& options = {},
                  std::optional<NormStats> stats = {});

// Backward of add_norm_pre. h's gradient arrives from two places: dh_next from the next
// residual (optional: absent means zero) and dy through the norm. Because h = x + r, the
// gradient of x and of r are both dh = dh_next + Norm'(dy); it is written once, to dh.
template <class T>
struct BasicAddNormPreGrads {
  NormMutable<T> dh;  // = dx = dr
  std::optional<TensorView<T>> dgamma;
  std::optional<TensorView<T>> dbeta;
};
using AddNormPreGrads = BasicAddNormPreGrads<float>;
void add_norm_pre_backward(AnyConstView dy, std::optional<AnyConstView> dh_next, AnyConstView h,
                           const Shape& normalized_shape, const AddNormPreGrads& grads,
                           const NormOptions& options = {}, std::optional<SavedStats> saved = {});

// Post-norm (2017 paper): y = Norm(x + Dropout(s)), with dropout p on the sub-layer output s.
void add_norm_post(AnyConstView x, AnyConstView s, const Shape& normalized_shape, AnyMutableView y,
                   const NormOptions& options = {}, const DropoutOptions& dropout = {},
                   std::optional<NormStats> stats = {});

// Backward of add_norm_post: dx = Norm'(dy), ds = dx * mask / (1 - p), with the mask regenerated
// from the same DropoutOptions. x and s are the forward's inputs.
template <class T>
struct BasicAddNormPostGrads {
  NormMutable<T> dx;
  NormMutable<T> ds;
  std::optional<TensorView<T>> dgamma;
  std::optional<TensorView<T>> dbeta;
};
using AddNormPostGrads = BasicAddNormPostGrads<float>;
void add_norm_post_backward(AnyConstView dy, AnyConstView x, AnyConstView s,
                            const Shape& normalized_shape, const AddNormPostGrads& grads,
                            const NormOptions& options = {}, const DropoutOptions& dropout = {},
                            std::optional<SavedStats> saved = {});

// ---------------------------------------------------------------------------------------------
// GroupNormOptions and BatchNormOptions are NormOptions with fields of their own. Handed to a row
// norm they would lose those fields without a word, so the row norms refuse them at compile
// time: these deleted overloads match such an argument better than the base class does.
template <class Options, class T>
concept ExtendsNormOptions =
    std::derived_from<Options, BasicNormOptions<T>> && !std::same_as<Options, BasicNormOptions<T>>;
template <ExtendsNormOptions<float> O, class... Rest>
void layer_norm(AnyConstView, const Shape&, AnyMutableView, const O&, Rest&&...) = delete;
template <ExtendsNormOptions<float> O, class... Rest>
void layer_norm_backward(AnyConstView, AnyConstView, const Shape&, const LayerNormGrads&, const O&,
                         Rest&&...) = delete;
template <ExtendsNormOptions<float> O, class... Rest>
void rms_norm(AnyConstView, const Shape&, AnyMutableView, const O&, Rest&&...) = delete;
template <ExtendsNormOptions<float> O, class... Rest>
void rms_norm_backward(AnyConstView, AnyConstView, const Shape&, const RmsNormGrads&, const O&,
                       Rest&&...) = delete;
template <ExtendsNormOptions<float> O, class... Rest>
void norm(AnyConstView, const Shape&, AnyMutableView, const O&, Rest&&...) = delete;
template <ExtendsNormOptions<float> O, class... Rest>
void norm_backward(AnyConstView, AnyConstView, const Shape&, const NormGrads&, const O&,
                   Rest&&...) = delete;
template <ExtendsNormOptions<float> O, class... Rest>
void add_norm_pre(AnyConstView, AnyConstView, const Shape&, AnyMutableView, AnyMutableView,
                  const O&, Rest&&...) = delete;
template <ExtendsNormOptions<float> O, class... Rest>
void add_norm_pre_backward(AnyConstView, std::optional<AnyConstView>, AnyConstView, const Shape&,
                           const AddNormPreGrads&, const O&, Rest&&...) = delete;
template <ExtendsNormOptions<float> O, class... Rest>
void add_norm_post(AnyConstView, AnyConstView, const Shape&, AnyMutableView, const O&,
                   Rest&&...) = delete;
template <ExtendsNormOptions<float> O, class... Rest>
void add_norm_post_backward(AnyConstView, AnyConstView, AnyConstView, const Shape&,
                            const AddNormPostGrads&, const O&, Rest&&...) = delete;

}  // namespace addnorm
ADDNORM_PUBLIC_END
