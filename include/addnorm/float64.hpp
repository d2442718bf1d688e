// The ops of ops.hpp on float64 views: the same functions, argument structs (instantiated for
// double), checks, error messages and aliasing rules, computed by the reference kernels (float64
// data accumulated in 80-bit long double, every output rounded once). For callers who want
// float64 end to end: gradient checks, the Python module's and the PyTorch extension's float64
// paths. Not tuned for speed: one thread, scalar code, and the post-norm ops allocate a row
// buffer.
//
// Differences from the float32 ops, all in the scalars' type:
// - eps, momentum and the dropout probability p are doubles.
// - Dropout: element i is kept iff its stream bits reach the threshold of p rounded to float32,
//   exactly as the float32 op decides (so both dtypes drop the same elements for the same seed
//   and offset), and a kept value is x / (1 - p) with p in full float64, rounded once.
#pragma once

#include <optional>

#include "addnorm/ops.hpp"
#include "addnorm/visibility.hpp"

ADDNORM_PUBLIC_BEGIN
namespace addnorm::float64 {

using ConstView = TensorView<const double>;
using MutableView = TensorView<double>;
using OptionalConst = std::optional<ConstView>;
using OptionalMutable = std::optional<MutableView>;

using NormStats = BasicNormStats<double>;
using SavedStats = BasicSavedStats<double>;
using NormOptions = BasicNormOptions<double>;
using LayerNormGrads = BasicLayerNormGrads<double>;
using RmsNormGrads = BasicRmsNormGrads<double>;
using NormGrads = BasicNormGrads<double>;
using GroupNormOptions = BasicGroupNormOptions<double>;
using GroupNormGrads = BasicGroupNormGrads<double>;
using BatchNormOptions = BasicBatchNormOptions<double>;
using RunningStats = BasicRunningStats<double>;
using BatchNormGrads = BasicBatchNormGrads<double>;
using DropoutOptions = BasicDropoutOptions<double>;
using AddNormPreGrads = BasicAddNormPreGrads<double>;
using AddNormPostGrads = BasicAddNormPostGrads<double>;

void add(ConstView x, ConstView r, MutableView out);

void layer_norm(ConstView x, const Shape& normalized_shape, MutableView y,
                const NormOptions& options = {}, std::optional<NormStats> stats = {});
void layer_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                         const LayerNormGrads& grads, const NormOptions& options = {},
                         std::optional<SavedStats> saved = {});

void rms_norm(ConstView x, const Shape& normalized_shape, MutableView y,
              const NormOptions& options = {}, OptionalMutable rstd = {});
void rms_norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape,
                       const RmsNormGrads& grads, const NormOptions& options = {},
                       OptionalConst saved_rstd = {});

void norm(ConstView x, const Shape& normalized_shape, MutableView y,
          const NormOptions& options = {}, std::optional<NormStats> stats = {});
void norm_backward(ConstView dy, ConstView x, const Shape& normalized_shape, const NormGrads& grads,
                   const NormOptions& options = {}, std::optional<SavedStats> saved = {});

void group_norm(ConstView x, MutableView y, const GroupNormOptions& options,
                std::optional<NormStats> stats = {});
void group_norm_backward(ConstView dy, ConstView x, const GroupNormGrads& grads,
                         const GroupNormOptions& options, std::optional<SavedStats> saved = {});

void batch_norm(ConstView x, MutableView y, const BatchNormOptions& options = {},
                std::optional<RunningStats> running = {},
                std::optional<NormStats> batch_stats = {});
void batch_norm_backward(ConstView dy, ConstView x, const BatchNormGrads& grads,
                         const BatchNormOptions& options = {},
                         std::optional<RunningStats> running = {});

void dropout(ConstView x, MutableView y, const DropoutOptions& options);
void dropout_backward(ConstView dy, MutableView dx, const DropoutOptions& options);

void add_norm_pre(ConstView x, ConstView r, const Shape& normalized_shape, MutableView h,
                  MutableView y, const NormOptions& options = {},
                  std::optional<NormStats> stats = {});
void add_norm_pre_backward(ConstView dy, OptionalConst dh_next, ConstView h,
                           const Shape& normalized_shape, const AddNormPreGrads& grads,
                           const NormOptions& options = {}, std::optional<SavedStats> saved = {});
void add_norm_post(ConstView x, ConstView s, const Shape& normalized_shape, MutableView y,
                   const NormOptions& options = {}, const DropoutOptions& dropout = {},
                   std::optional<NormStats> stats = {});
void add_norm_post_backward(ConstView dy, ConstView x, ConstView s, const Shape& normalized_shape,
                            const AddNormPostGrads& grads, const NormOptions& options = {},
                            const DropoutOptions& dropout = {},
                            std::optional<SavedStats> saved = {});

}  // namespace addnorm::float64
ADDNORM_PUBLIC_END
