// The Add & Norm operations: residual add, LayerNorm, RMSNorm, BatchNorm, dropout and the fused
// pre-norm and post-norm Add&Norm, each forward and backward, on float32 views.
//
// Conventions shared by every function here:
// - Tensors are C-contiguous views. A "row" is one slice over the normalised (trailing) dims;
//   LayerNorm and RMSNorm treat x as [rows, dim], dim = product of normalized_shape.
// - Arguments are validated before any memory is written. A bad argument throws addnorm::Error
//   whose message names it and says what was expected; outputs are then left untouched.
// - Outputs may be exactly the memory of the input they replace (y may be x, h may be x or r,
//   dx may be dy or x, ds may be s; docs/numerics.md lists them all) but must not otherwise
//   overlap any other argument.
// - Results are within a few ulp of a float64 computation on the same float32 inputs;
//   docs/numerics.md states the contract and the policy for constant, NaN and Inf rows.
#pragma once

#include <cstdint>
#include <optional>

#include "addnorm/error.hpp"
#include "addnorm/tensor.hpp"

namespace addnorm {

// ---------------------------------------------------------------------------------------------
// Residual add: out = x + r (same shape). out may be x or r.
void add(ConstView x, ConstView r, MutableView out);

// ---------------------------------------------------------------------------------------------
// Per-row statistics saved by a forward for its backward: shape = the leading (row) dims of x.
struct NormStats {
  MutableView mean;  // LayerNorm only; ignored (may be empty) for RMSNorm
  MutableView rstd;  // 1 / sqrt(variance + eps), or 1 / sqrt(mean(x^2) + eps) for RMSNorm
};
struct SavedStats {
  ConstView mean;
  ConstView rstd;
};

// LayerNorm over the trailing dims named by normalized_shape (PyTorch's rule: they must equal
// x's trailing dims). y = (x - mean) / sqrt(var + eps) * gamma + beta, population variance.
struct LayerNormOptions {
  OptionalConst gamma;  // shape normalized_shape, or absent (scale 1)
  OptionalConst beta;   // shape normalized_shape, or absent (shift 0)
  float eps = 1e-5f;    // >= 0 and finite; added to the variance inside the square root
};
void layer_norm(ConstView x, const Shape& normalized_shape, MutableView y,
                const LayerNormOptions& options = {}, std::optional<NormStats> stats = {});

// Gradients of layer_norm. dgamma/dbeta may only be asked for when gamma/beta exist (dbeta
// also when beta is absent but gamma is given is refused: it would be a gradient of nothing).
struct LayerNormGrads {
  MutableView dx;
  OptionalMutable dgamma;
  OptionalMutable dbeta;
};
// `saved` (from the forward) lets the backward skip the variance pass; without it the
// statistics are recomputed from x. Either way the result is the same to within rounding.
void layer_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                         const LayerNormGrads& grads, const LayerNormOptions& options = {},
                         std::optional<SavedStats> saved = {});

// ONNX's axis form: the normalized_shape that normalises x from `axis` (may be negative) on.
Shape normalized_shape_from_axis(const Shape& x_shape, int64_t axis);

// ---------------------------------------------------------------------------------------------
// RMSNorm: y = x / sqrt(mean(x^2) + eps) * gamma, or * (1 + gamma) with zero_centered_gamma.
struct RmsNormOptions {
  OptionalConst gamma;               // shape normalized_shape, or absent (scale 1)
  bool zero_centered_gamma = false;  // scale by (1 + gamma), so gamma = 0 is the identity
  float eps = 1e-6f;                 // the seed page's RMSNorm default
};
void rms_norm(ConstView x, const Shape& normalized_shape, MutableView y,
              const RmsNormOptions& options = {}, OptionalMutable rstd = {});

struct RmsNormGrads {
  MutableView dx;
  OptionalMutable dgamma;
};
void rms_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                       const RmsNormGrads& grads, const RmsNormOptions& options = {},
                       OptionalConst saved_rstd = {});

// ---------------------------------------------------------------------------------------------
// BatchNorm over channel axis 1 of x shaped (N, C) or (N, C, L).
enum class MomentumConvention {
  // PyTorch: running = (1 - momentum) * running + momentum * batch; running_var is unbiased.
  pytorch,
  // ONNX: running = momentum * running + (1 - momentum) * batch; running_var is biased.
  onnx,
};

struct BatchNormOptions {
  OptionalConst gamma;  // shape [C] or absent
  OptionalConst beta;   // shape [C] or absent
  bool training = true;
  float momentum = 0.1f;  // in [0, 1]; PyTorch's default (ONNX's default is 0.9)
  MomentumConvention convention = MomentumConvention::pytorch;
  float eps = 1e-5f;
};
// Running statistics (shape [C]). In training mode they are optional and updated in place; in
// inference mode they are required and used to normalise.
struct RunningStats {
  MutableView mean;
  MutableView var;
};
// `batch_stats`, when given in training mode, receives the batch mean and rstd per channel.
void batch_norm(ConstView x, MutableView y, const BatchNormOptions& options = {},
                std::optional<RunningStats> running = {},
                std::optional<NormStats> batch_stats = {});

struct BatchNormGrads {
  MutableView dx;
  OptionalMutable dgamma;
  OptionalMutable dbeta;
};
// Training mode: the gradient through the batch statistics (recomputed from x). Inference mode:
// the running statistics are constants, so `running` is required and only scales dy.
void batch_norm_backward(ConstView dy, ConstView x, const BatchNormGrads& grads,
                         const BatchNormOptions& options = {},
                         std::optional<RunningStats> running = {});

// ---------------------------------------------------------------------------------------------
// Dropout. Masks come from a counter-based generator keyed by (seed, offset): element i of a
// tensor is kept iff philox_uniform(seed, offset + i) >= p, so a mask never depends on the
// thread count and is regenerated in the backward rather than stored.
struct DropoutOptions {
  float p = 0.0f;         // drop probability in [0, 1); kept values are scaled by 1 / (1 - p)
  uint64_t seed = 0;
  uint64_t offset = 0;    // element offset into the seed's stream, for many tensors per step
};
void dropout(ConstView x, MutableView y, const DropoutOptions& options);
void dropout_backward(ConstView dy, MutableView dx, const DropoutOptions& options);
// Writes the keep mask (1 kept, 0 dropped) for a tensor of the given shape, for callers who
// want to store or inspect it.
void dropout_mask(TensorView<uint8_t> mask, const DropoutOptions& options);

// ---------------------------------------------------------------------------------------------
// Fused Add & Norm.
enum class NormKind { layer_norm, rms_norm };

struct AddNormOptions {
  NormKind norm = NormKind::layer_norm;
  OptionalConst gamma;
  OptionalConst beta;               // LayerNorm only
  bool zero_centered_gamma = false; // RMSNorm only
  float eps = 1e-5f;
};

// Pre-norm (GPT-2): h = x + r and y = Norm(h) in one pass. h is what the next residual adds to;
// y is what the next sub-layer reads. h may be x or r.
void add_norm_pre(ConstView x, ConstView r, const Shape& normalized_shape, MutableView h,
                  MutableView y, const AddNormOptions& options = {},
                  std::optional<NormStats> stats = {});

// Backward of add_norm_pre. h's gradient arrives from two places: dh_next from the next
// residual (optional: absent means zero) and dy through the norm. Because h = x + r, the
// gradient of x and of r are both dh = dh_next + Norm'(dy); it is written once, to dh.
struct AddNormPreGrads {
  MutableView dh;  // = dx = dr
  OptionalMutable dgamma;
  OptionalMutable dbeta;
};
void add_norm_pre_backward(ConstView dy, OptionalConst dh_next, ConstView h,
                           const Shape& normalized_shape, const AddNormPreGrads& grads,
                           const AddNormOptions& options = {},
                           std::optional<SavedStats> saved = {});

// Post-norm (2017 paper): y = Norm(x + Dropout(s)), with dropout p on the sub-layer output s.
void add_norm_post(ConstView x, ConstView s, const Shape& normalized_shape, MutableView y,
                   const AddNormOptions& options = {}, const DropoutOptions& dropout = {},
                   std::optional<NormStats> stats = {});

// Backward of add_norm_post: dx = Norm'(dy), ds = dx * mask / (1 - p), with the mask regenerated
// from the same DropoutOptions. x and s are the forward's inputs.
struct AddNormPostGrads {
  MutableView dx;
  MutableView ds;
  OptionalMutable dgamma;
  OptionalMutable dbeta;
};
void add_norm_post_backward(ConstView dy, ConstView x, ConstView s,
                            const Shape& normalized_shape, const AddNormPostGrads& grads,
                            const AddNormOptions& options = {},
                            const DropoutOptions& dropout = {},
                            std::optional<SavedStats> saved = {});

}  // namespace addnorm
