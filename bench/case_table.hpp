// The one table of norm cases (issue 32, item 4): what the tests check on every SIMD target
// against float64, for thread-count identity and by finite differences
// (tests/cpp/fast/case_table_test.cpp), and what the benchmark times with `--cases table`
// (bench/main.cpp). One list for every mode, the way ggml's test-backend-ops keeps one list for
// its test, perf and grad modes; a case added here is checked, and a row-norm case marked
// `timed` timed, without another edit (the benchmark times the row norms only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "addnorm/dtype.hpp"
#include "addnorm/norm_kind.hpp"

namespace addnorm::cases {

// Which op normalises what: a row norm over the trailing dim (layer_norm, rms_norm and the
// fused ops), GroupNorm over each sample's groups of channels of (N, C, L) (group_norm;
// InstanceNorm is one channel a group), or BatchNorm over each channel of (N, C, L) across the
// batch (batch_norm in training mode, or (N, L, C) with channels_last).
enum class NormOp { row_norm, group_norm, batch_norm };

// What, besides the norm, the call fuses: nothing (layer_norm, rms_norm), the pre-norm residual
// add (add_norm_pre: h = x + r, y = Norm(h)) or the post-norm one (add_norm_post:
// y = Norm(x + Dropout(s))).
enum class Fusion { none, pre_norm, post_norm };

// The rows' contents, each chosen to stress the numerics in one way.
enum class RowKind {
  ordinary,    // U(-2, 3)
  large_mean,  // 1e6 + U(-0.2, 0.3): the mean is 1e7 times the spread
  // 1e7 everywhere but the middle element of each run of `dim` (a row; GroupNorm's and
  // BatchNorm's (sample, channel) positions), one ulp above: the mean is 1e7 + k/n for k outliers
  // among n elements, so centred values of 1/n are 2^-30 of the mean at n = 1023, finer than a
  // float64 mean holds (its rounding alone would be n/64 float32 ulp of them).
  one_outlier,
  constant,  // every element 42.5: variance 0, eps alone
  tiny,      // U(-2, 3) * 1e-40: float32 denormals
  huge,      // U(-2, 3) * 1e38: squares overflow float32
  nan_row,   // ordinary, one NaN in the second row
};

struct NormCase {
  NormOp op = NormOp::row_norm;
  Fusion fusion = Fusion::none;  // row norms only
  NormKind norm = NormKind::layer_norm;
  int64_t rows = 5;      // the tests' rows (GroupNorm, BatchNorm: N); the benchmark takes its
                         // tensor size / dim
  int64_t dim = 64;      // a row's length (GroupNorm, BatchNorm: L, the positions of a channel)
  int64_t channels = 0;  // GroupNorm and BatchNorm: C
  int64_t groups = 1;    // GroupNorm: num_groups, dividing C
  bool channels_last = false;  // BatchNorm: x is (N, L, C)
  // GroupNorm and BatchNorm: how many dims hold the L positions of a channel: 0 (x is (N, C),
  // L = 1), 1 (N, C, L), 2 (N, C, 2, L / 2) or 3 (N, C, 2, 2, L / 4), and the same with C last;
  // L then a multiple of 2 or 4.
  int spatial_rank = 1;
  bool training = true;  // BatchNorm: batch statistics, or (false) the running ones as constants
  // The residual stream's storage (x, h and their gradients) and the branch's (r, s, y and
  // theirs; for the plain norms, y and dy): op_checks.hpp's two groups.
  DType stream = DType::float32;
  DType branch = DType::float32;
  RowKind row_kind = RowKind::ordinary;
  bool affine = true;                // gamma (and beta for a centring norm), or neither
  bool zero_centered_gamma = false;  // RMSNorm's scale 1 + gamma
  float dropout_p = 0;               // post-norm only
  bool timed = false;                // the benchmark's `--cases table` runs it

  std::string name() const;    // every field that differs from the defaults, for test traces
  Shape shape() const;         // x's: (rows, dim), (N, C, L), or (N, L, C) with channels_last
  int64_t statistics() const;  // mean and rstd values: one a row, a (sample, group), a channel
  int64_t parameters() const;  // gamma, beta and their gradients: dim, or C
};

const std::vector<NormCase>& norm_case_table();

// x of a case: shape().numel() floats of its row kind from `seed` (the tests round them to the
// case's storage type); a nan_row case's NaN is in the second sample.
std::vector<float> case_rows(const NormCase& c, uint32_t seed);

std::string op_name(NormOp op);
std::string fusion_name(Fusion fusion);
std::string row_kind_name(RowKind kind);

}  // namespace addnorm::cases
