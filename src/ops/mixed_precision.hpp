// The storage-generic norms behind the public ops (include/addnorm/ops.hpp, which validates
// first and calls these when any tensor of a call is not float32; src/ops/storage.hpp): LayerNorm,
// RMSNorm and the fused pre-norm Add & Norm on tensors stored as float32, bfloat16 or float16,
// each tensor independently. The one forward and backward engine (src/ops/cpu/) reads and writes
// the storage pairs a model uses directly (cpu::norm_pair_supported; docs/numerics.md); only
// exotic combinations (bfloat16 with float16, or tensors of one group stored differently) are
// staged through float32 blocks (mixed_precision.cpp says which). Statistics (mean, rstd) and
// parameter gradients are float32.
// Arguments are already validated (src/ops/op_checks.hpp): these functions check nothing.
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
