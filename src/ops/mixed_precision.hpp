// LayerNorm, RMSNorm and the fused pre-norm Add & Norm on tensors stored as float32, bfloat16 or
// float16, each tensor independently (include/addnorm/dtype.hpp): for example a float32
// residual stream with bfloat16 activations and float32 gamma. Computation is float32 with
// float64 reductions, as the float32 ops (ops.hpp); each output is rounded once more to its
// storage type. (A forward whose x and y share a 16-bit type runs a direct kernel whose sums
// are float32 within blocks of a row: docs/numerics.md.) Statistics (mean, rstd) and
// parameter gradients are always float32.
// Validation, aliasing and error rules are those of ops.hpp.
#pragma once

#include <optional>

#include "addnorm/dtype.hpp"
#include "addnorm/ops.hpp"

namespace addnorm {

struct MixedNormOptions {
  NormKind norm = NormKind::layer_norm;
  std::optional<AnyConstView> gamma;
  std::optional<AnyConstView> beta;   // LayerNorm only
  bool zero_centered_gamma = false;   // RMSNorm only
  float eps = 1e-5f;
};

// y = Norm(x). `stats` (float32) may be omitted: inference mode writes no statistics.
void norm_forward_mixed(AnyConstView x, const Shape& normalized_shape, AnyMutableView y,
                        const MixedNormOptions& options = {},
                        std::optional<NormStats> stats = {});

// Pre-norm: h = x + r (rounded to h's storage type) and y = Norm(h) in one pass.
void add_norm_pre_mixed(AnyConstView x, AnyConstView r, const Shape& normalized_shape,
                        AnyMutableView h, AnyMutableView y, const MixedNormOptions& options = {},
                        std::optional<NormStats> stats = {});

// dx = Norm'(dy) at x (+ dh_next, the residual stream's gradient, when given).
struct MixedNormGrads {
  AnyMutableView dx;
  OptionalMutable dgamma;  // float32
  OptionalMutable dbeta;   // float32
};
void norm_backward_mixed(AnyConstView dy, AnyConstView x, const Shape& normalized_shape,
                         const MixedNormGrads& grads, const MixedNormOptions& options = {},
                         std::optional<AnyConstView> dh_next = {},
                         OptionalConst saved_rstd = {});

}  // namespace addnorm
