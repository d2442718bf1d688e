// The one table of row-norm cases (issue 32, item 4): what the tests check on every SIMD target
// against float64, for thread-count identity and by finite differences
// (tests/cpp/fast/case_table_test.cpp), and what the benchmark times with `--cases table`
// (bench/main.cpp). One list for every mode, the way ggml's test-backend-ops keeps one list for
// its test, perf and grad modes; a case added here is checked and timed without another edit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "addnorm/dtype.hpp"
#include "addnorm/norm_kind.hpp"

namespace addnorm::cases {

// What, besides the norm, the call fuses: nothing (layer_norm, rms_norm), the pre-norm residual
// add (add_norm_pre: h = x + r, y = Norm(h)) or the post-norm one (add_norm_post:
// y = Norm(x + Dropout(s))).
enum class Fusion { none, pre_norm, post_norm };

// The rows' contents, each chosen to stress the numerics in one way.
enum class RowKind {
  ordinary,    // U(-2, 3)
  large_mean,  // 1e6 + U(-0.2, 0.3): the mean is 1e7 times the spread
  constant,    // every element 42.5: variance 0, eps alone
  tiny,        // U(-2, 3) * 1e-40: float32 denormals
  huge,        // U(-2, 3) * 1e38: squares overflow float32
  nan_row,     // ordinary, one NaN in the second row
};

struct NormCase {
  Fusion fusion = Fusion::none;
  NormKind norm = NormKind::layer_norm;
  int64_t rows = 5;  // the tests' rows; the benchmark takes its tensor size / dim
  int64_t dim = 64;
  // The residual stream's storage (x, h and their gradients) and the branch's (r, s, y and
  // theirs; for the plain norms, y and dy): op_checks.hpp's two groups.
  DType stream = DType::float32;
  DType branch = DType::float32;
  RowKind row_kind = RowKind::ordinary;
  bool affine = true;                // gamma (and beta for a centring norm), or neither
  bool zero_centered_gamma = false;  // RMSNorm's scale 1 + gamma
  float dropout_p = 0;               // post-norm only
  bool timed = false;                // the benchmark's `--cases table` runs it

  std::string name() const;  // every field that differs from the defaults, for test traces
};

const std::vector<NormCase>& norm_case_table();

// x of a case: rows x dim floats of its row kind from `seed` (the tests round them to the
// case's storage type).
std::vector<float> case_rows(const NormCase& c, uint32_t seed);

std::string fusion_name(Fusion fusion);
std::string row_kind_name(RowKind kind);

}  // namespace addnorm::cases
