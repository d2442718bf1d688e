// The float32 forward takes short rows (D <= 1024, whole registers) a group at a time, one row
// per float64 lane, and runs a longer row's statistics inside the normalising pass of the row
// before it (norm_forward-inl.h). Neither may change a single bit: on every SIMD target, a
// whole call (rows grouped or interleaved, split over 1, 2 or 3 threads) gives exactly what the
// same rows give one call per row (a group of one, no row before to interleave with), for LayerNorm
// and RMSNorm, plain and with a fused residual, float32 and bfloat16 branches, with rows the
// float32 lanes cannot hold (tiny spread, huge mean) and non-finite rows among them. The backward's
// dx likewise: its pass 2 takes rows four at a time (norm_backward-inl.h) or, where a group holds
// such a row, one at a time, and short rows' pass 1 a group at a time; a row's dx must not depend
// on which.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "addnorm/ops.hpp"
#include "hwy/targets.h"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/threading.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;

// rows x dim values with special rows at fixed places: row 3 has a spread of 1e-35 (float64
// lanes), row 6 a mean of 1e33 (beyond the float32 lanes' centre bound), row 9 a NaN.
std::vector<float> special_rows(int64_t rows, int64_t dim, uint32_t seed) {
  auto x = random_floats(static_cast<size_t>(rows * dim), seed, -2.0f, 3.0f);
  auto row = [&](int64_t r) { return x.begin() + r * dim; };
  for (int64_t i = 0; i < dim; ++i) {
    row(3)[i] = 1.0f + static_cast<float>(i % 7) * 1e-35f;
    row(6)[i] = 1e33f * (1.0f + static_cast<float>(i % 5) * 1e-3f);
  }
  row(9)[dim / 2] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

// The bfloat16 bits of each value (round to nearest even).
std::vector<uint16_t> bfloat16_bits(const std::vector<float>& values) {
  std::vector<uint16_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = to_bfloat16(values[i]).bits;
  return out;
}

// Bit patterns, so that NaNs compare equal to themselves.
template <class T>
std::vector<unsigned char> bits(const std::vector<T>& values) {
  std::vector<unsigned char> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

struct Outputs {
  std::vector<float> h;
  std::vector<uint16_t> y_bf16;
  std::vector<float> y, mean, rstd;
};

// The forward over rows [first, first + count) of x (and r), written at the same rows of `out`.
void forward(bool layer, bool residual, bool bf16_branch, const std::vector<float>& x,
             const std::vector<float>& r, const std::vector<uint16_t>& r_bf16,
             const std::vector<float>& gamma, const std::vector<float>& beta, int64_t dim,
             int64_t first, int64_t count, Outputs& out) {
  const int64_t at = first * dim;
  const Shape shape{count, dim}, normalized{dim};
  const NormStats stats{{out.mean.data() + first, {count}}, {out.rstd.data() + first, {count}}};
  const AnyMutableView y = bf16_branch
                               ? AnyMutableView{out.y_bf16.data() + at, shape, DType::bfloat16}
                               : AnyMutableView{out.y.data() + at, shape};
  const AnyConstView rv = bf16_branch ? AnyConstView{r_bf16.data() + at, shape, DType::bfloat16}
                                      : AnyConstView{r.data() + at, shape};
  const ConstView g{gamma.data(), normalized}, b{beta.data(), normalized};
  if (residual) {
    const NormOptions options{layer ? NormKind::layer_norm : NormKind::rms_norm, g,
                              layer ? OptionalConst(b) : std::nullopt};
    add_norm_pre({x.data() + at, shape}, rv, normalized, {out.h.data() + at, shape}, y, options,
                 stats);
  } else if (layer) {
    layer_norm({x.data() + at, shape}, normalized, y, {.gamma = g, .beta = b}, stats);
  } else {
    rms_norm({x.data() + at, shape}, normalized, y, {.gamma = g}, stats.rstd);
  }
}

class InterleavedRows : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override { cpu::force_target(0); }
};

TEST_P(InterleavedRows, WholeCallsEqualRowByRowCallsBitForBit) {
  const int64_t rows = 24;
  const int saved_threads = omp_get_max_threads();
  for (const int64_t dim : {64, 128, 208, 512, 1000, 1537, 4096}) {
    const auto x = special_rows(rows, dim, 21);
    const auto r = random_floats(static_cast<size_t>(rows * dim), 22, -1.0f, 1.0f);
    const auto r_bf16 = bfloat16_bits(r);
    const auto gamma = random_floats(static_cast<size_t>(dim), 23, 0.5f, 1.5f);
    const auto beta = random_floats(static_cast<size_t>(dim), 24);
    const auto n = static_cast<size_t>(rows * dim);
    for (const bool layer : {true, false}) {
      for (const bool residual : {false, true}) {
        for (const bool bf16_branch : {false, true}) {
          SCOPED_TRACE("dim " + std::to_string(dim) + (layer ? " layer" : " rms") +
                       (residual ? " residual" : "") + (bf16_branch ? " bf16 branch" : ""));
          auto fresh = [&] {
            return Outputs{std::vector<float>(n), std::vector<uint16_t>(n), std::vector<float>(n),
                           std::vector<float>(rows), std::vector<float>(rows)};
          };
          Outputs alone = fresh();
          for (int64_t row = 0; row < rows; ++row) {
            forward(layer, residual, bf16_branch, x, r, r_bf16, gamma, beta, dim, row, 1, alone);
          }
          for (const int threads : {1, 2, 3}) {
            omp_set_num_threads(threads);
            Outputs whole = fresh();
            forward(layer, residual, bf16_branch, x, r, r_bf16, gamma, beta, dim, 0, rows, whole);
            EXPECT_EQ(bits(whole.y), bits(alone.y)) << threads << " threads";
            EXPECT_EQ(whole.y_bf16, alone.y_bf16) << threads << " threads";
            EXPECT_EQ(bits(whole.h), bits(alone.h)) << threads << " threads";
            EXPECT_EQ(bits(whole.rstd), bits(alone.rstd)) << threads << " threads";
            if (layer) {
              EXPECT_EQ(bits(whole.mean), bits(alone.mean)) << threads << " threads";
            }
          }
          omp_set_num_threads(saved_threads);
        }
      }
    }
  }
}

// dx of rows [first, first + count), written at the same rows of dx.
void backward(bool layer, bool with_dh_next, bool bf16_dy, const std::vector<float>& x,
              const std::vector<float>& dy, const std::vector<uint16_t>& dy_bf16,
              const std::vector<float>& dh_next, const std::vector<float>& gamma,
              const std::vector<float>& beta, int64_t dim, int64_t first, int64_t count,
              std::vector<float>& dx) {
  const int64_t at = first * dim;
  const Shape shape{count, dim}, normalized{dim};
  const AnyConstView dyv = bf16_dy ? AnyConstView{dy_bf16.data() + at, shape, DType::bfloat16}
                                   : AnyConstView{dy.data() + at, shape};
  const ConstView g{gamma.data(), normalized}, b{beta.data(), normalized};
  std::vector<float> dgamma(static_cast<size_t>(dim)), dbeta(static_cast<size_t>(dim));
  const MutableView dg{dgamma.data(), normalized}, db{dbeta.data(), normalized};
  const MutableView dxv{dx.data() + at, shape};
  if (with_dh_next) {
    const NormOptions options{layer ? NormKind::layer_norm : NormKind::rms_norm, g,
                              layer ? OptionalConst(b) : std::nullopt};
    add_norm_pre_backward(dyv, AnyConstView{dh_next.data() + at, shape}, {x.data() + at, shape},
                          normalized, {dxv, dg, layer ? std::optional(db) : std::nullopt}, options);
  } else if (layer) {
    layer_norm_backward(dyv, {x.data() + at, shape}, normalized, {dxv, dg, db},
                        {.gamma = g, .beta = b});
  } else {
    rms_norm_backward(dyv, {x.data() + at, shape}, normalized, {dxv, dg}, {.gamma = g});
  }
}

TEST_P(InterleavedRows, BackwardWholeCallsEqualRowByRowCallsBitForBit) {
  // dx of a whole call, bit for bit that of row-by-row calls (dgamma's sums are ordered by
  // chunk, so only dx can be compared this way). The backward walks 16 fixed chunks of rows
  // (threading.hpp's row_reduction_chunks, for calls of 64 Ki elements or more), each grouping
  // its rows from its own start, so a group can end at a chunk edge: 192 rows make chunks of 12
  // (3 groups of 4); short rows take 1216, chunks of 76 (9 blocks of one row per float64 lane,
  // then 4 rows).
  const int saved_threads = omp_get_max_threads();
  // 64, 80 and 128: short rows, whose pass 1 takes a group of rows one per float64 lane.
  for (const int64_t dim : {64, 80, 128, 512, 1000, 1537}) {
    const int64_t rows = dim <= 128 ? 1216 : 192;
    ASSERT_GE(rows * dim, cpu::kParallelThreshold) << "a call of one chunk tests no chunk edges";
    auto x = special_rows(rows, dim, 31);
    // Special rows in the second chunk too (its third group of four, 8-11 rows from its start):
    // a tiny spread, a NaN.
    const int64_t second_chunk = rows / 16;
    std::copy(x.begin() + 3 * dim, x.begin() + 4 * dim, x.begin() + (second_chunk + 9) * dim);
    x[static_cast<size_t>((second_chunk + 10) * dim + 1)] = std::numeric_limits<float>::quiet_NaN();
    const auto dy = random_floats(static_cast<size_t>(rows * dim), 32, -1.0f, 1.0f);
    const auto dh_next = random_floats(static_cast<size_t>(rows * dim), 33, -1.0f, 1.0f);
    const auto dy_bf16 = bfloat16_bits(dy);
    const auto gamma = random_floats(static_cast<size_t>(dim), 34, 0.5f, 1.5f);
    const auto beta = random_floats(static_cast<size_t>(dim), 35);
    const auto n = static_cast<size_t>(rows * dim);
    for (const bool layer : {true, false}) {
      for (const bool with_dh_next : {false, true}) {
        for (const bool bf16_dy : {false, true}) {
          SCOPED_TRACE("dim " + std::to_string(dim) + (layer ? " layer" : " rms") +
                       (with_dh_next ? " dh_next" : "") + (bf16_dy ? " bf16 dy" : ""));
          std::vector<float> alone(n);
          for (int64_t row = 0; row < rows; ++row) {
            backward(layer, with_dh_next, bf16_dy, x, dy, dy_bf16, dh_next, gamma, beta, dim, row,
                     1, alone);
          }
          for (const int threads : {1, 2, 3}) {
            omp_set_num_threads(threads);
            std::vector<float> whole(n);
            backward(layer, with_dh_next, bf16_dy, x, dy, dy_bf16, dh_next, gamma, beta, dim, 0,
                     rows, whole);
            EXPECT_EQ(bits(whole), bits(alone)) << threads << " threads";
          }
          omp_set_num_threads(saved_threads);
        }
      }
    }
  }
}

// The pre-norm forward on bfloat16 rows (x, r, h and y all 16-bit), whose short rows take their
// sums a group at a time in float32 lanes and take a row again on its own where the group's
// checks fail (rows 3, 6 and 9 of special_rows, and row 12, whose first register is made of
// outliers: centred again on the mean at D = 80 and 128): whole calls on 1, 2 or 3 threads give
// what the same rows give one call per row.
TEST_P(InterleavedRows, SixteenBitPreNormWholeCallsEqualRowByRowCallsBitForBit) {
  const int64_t rows = 192;
  const int saved_threads = omp_get_max_threads();
  for (const int64_t dim : {64, 80, 128, 512}) {
    auto x_values = special_rows(rows, dim, 51);
    std::fill_n(x_values.begin() + 12 * dim, std::min<int64_t>(dim, 16), 1000.0f);
    const auto x = bfloat16_bits(x_values);
    const auto r = bfloat16_bits(random_floats(static_cast<size_t>(rows * dim), 52, -0.5f, 0.5f));
    const auto gamma = random_floats(static_cast<size_t>(dim), 53, 0.5f, 1.5f);
    const auto beta = random_floats(static_cast<size_t>(dim), 54);
    const Shape normalized{dim};
    for (const bool layer : {true, false}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + (layer ? " layer" : " rms"));
      struct SixteenBitOutputs {
        std::vector<uint16_t> h, y;
        std::vector<float> mean, rstd;
      };
      auto fresh = [&] {
        return SixteenBitOutputs{std::vector<uint16_t>(x.size()), std::vector<uint16_t>(x.size()),
                                 std::vector<float>(rows), std::vector<float>(rows)};
      };
      // Rows [first, first + count), written at the same rows of the outputs.
      auto forward = [&](int64_t first, int64_t count, SixteenBitOutputs& out) {
        const int64_t at = first * dim;
        const Shape shape{count, dim};
        const NormOptions options{
            layer ? NormKind::layer_norm : NormKind::rms_norm, ConstView{gamma.data(), normalized},
            layer ? OptionalConst(ConstView{beta.data(), normalized}) : std::nullopt};
        add_norm_pre(AnyConstView{x.data() + at, shape, DType::bfloat16},
                     AnyConstView{r.data() + at, shape, DType::bfloat16}, normalized,
                     AnyMutableView{out.h.data() + at, shape, DType::bfloat16},
                     AnyMutableView{out.y.data() + at, shape, DType::bfloat16}, options,
                     NormStats{MutableView{out.mean.data() + first, {count}},
                               {out.rstd.data() + first, {count}}});
      };
      SixteenBitOutputs alone = fresh();
      for (int64_t row = 0; row < rows; ++row) forward(row, 1, alone);
      for (const int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        SixteenBitOutputs whole = fresh();
        forward(0, rows, whole);
        EXPECT_EQ(whole.y, alone.y) << threads << " threads";
        EXPECT_EQ(whole.h, alone.h) << threads << " threads";
        EXPECT_EQ(bits(whole.rstd), bits(alone.rstd)) << threads << " threads";
        if (layer) {
          EXPECT_EQ(bits(whole.mean), bits(alone.mean)) << threads << " threads";
        }
      }
      omp_set_num_threads(saved_threads);
    }
  }
}

// The same for bfloat16 rows (x, dy, dx and dh_next all 16-bit), whose short rows' pass 1 takes a
// group of rows in float32 lanes and takes a row again on its own where the group's checks fail
// (rows 3, 6 and 9 above, and row 12, whose first register is made of outliers: the sums are
// taken again, centred on the mean, at D = 80 and 128).
TEST_P(InterleavedRows, SixteenBitBackwardWholeCallsEqualRowByRowCallsBitForBit) {
  const int64_t rows = 192;
  const int saved_threads = omp_get_max_threads();
  for (const int64_t dim : {64, 80, 128, 512}) {
    auto x_values = special_rows(rows, dim, 41);
    std::fill_n(x_values.begin() + 12 * dim, std::min<int64_t>(dim, 16), 1000.0f);
    const auto x = bfloat16_bits(x_values);
    const auto dy = bfloat16_bits(random_floats(static_cast<size_t>(rows * dim), 42, -1.0f, 1.0f));
    const auto dh_next =
        bfloat16_bits(random_floats(static_cast<size_t>(rows * dim), 43, -1.0f, 1.0f));
    const auto gamma = random_floats(static_cast<size_t>(dim), 44, 0.5f, 1.5f);
    const auto beta = random_floats(static_cast<size_t>(dim), 45);
    const Shape normalized{dim};
    const ConstView g{gamma.data(), normalized}, b{beta.data(), normalized};
    for (const bool layer : {true, false}) {
      for (const bool with_dh_next : {false, true}) {
        SCOPED_TRACE("dim " + std::to_string(dim) + (layer ? " layer" : " rms") +
                     (with_dh_next ? " dh_next" : ""));
        // dx of rows [first, first + count), written at the same rows of dx.
        auto backward = [&](int64_t first, int64_t count, std::vector<uint16_t>& dx) {
          const int64_t at = first * dim;
          const Shape shape{count, dim};
          const AnyConstView dyv{dy.data() + at, shape, DType::bfloat16};
          const AnyConstView xv{x.data() + at, shape, DType::bfloat16};
          const AnyMutableView dxv{dx.data() + at, shape, DType::bfloat16};
          std::vector<float> dgamma(static_cast<size_t>(dim)), dbeta(static_cast<size_t>(dim));
          const MutableView dg{dgamma.data(), normalized}, db{dbeta.data(), normalized};
          if (with_dh_next) {
            const NormOptions options{layer ? NormKind::layer_norm : NormKind::rms_norm, g,
                                      layer ? OptionalConst(b) : std::nullopt};
            add_norm_pre_backward(dyv, AnyConstView{dh_next.data() + at, shape, DType::bfloat16},
                                  xv, normalized,
                                  {dxv, dg, layer ? std::optional(db) : std::nullopt}, options);
          } else if (layer) {
            layer_norm_backward(dyv, xv, normalized, {dxv, dg, db}, {.gamma = g, .beta = b});
          } else {
            rms_norm_backward(dyv, xv, normalized, {dxv, dg}, {.gamma = g});
          }
        };
        std::vector<uint16_t> alone(x.size());
        for (int64_t row = 0; row < rows; ++row) backward(row, 1, alone);
        for (const int threads : {1, 2, 3}) {
          omp_set_num_threads(threads);
          std::vector<uint16_t> whole(x.size());
          backward(0, rows, whole);
          EXPECT_EQ(whole, alone) << threads << " threads";
        }
        omp_set_num_threads(saved_threads);
      }
    }
  }
}

// The float64 lanes of the target's widest vectors: AVX3 8, AVX2 4, SSE4 2, the scalar target 1.
int64_t float64_lanes(int64_t target) {
  const std::string name = hwy::TargetName(target);
  if (name.rfind("AVX3", 0) == 0) return 8;
  if (name == "AVX2") return 4;
  if (name == "SSE4" || name == "SSSE3") return 2;
  return 1;
}

// A row stepped inside the normalising pass of the row before, whose steps end half-way through a
// group of four vectors (D = 542: the float32 forward steps once per float32 register, 33 of them
// on AVX3, 67 on AVX2, 135 on SSE4, leaving one float64 vector and a few elements), must send
// that last vector to the accumulator an uninterrupted run sends it to. The values make the two
// differ by a whole unit: lane 1 of the set the vector belongs to (set 2) is 0, where lane 1 of
// set 0 holds 2^60, which would swallow the vector's 1. So the row's mean is 1 / D taken alone
// and must be the same when the rows before it are in the same call, on any number of threads.
TEST_P(InterleavedRows, ASteppedRowsLastVectorGoesWhereAnUninterruptedRunPutsIt) {
  const int64_t rows = 128, dim = 542;  // more than kParallelThreshold elements: threads split it
  const int64_t lanes = float64_lanes(GetParam());
  const int64_t vectors = dim / lanes;         // whole float64 vectors of the row
  const int64_t last = (vectors - 1) * lanes;  // the first element of the last one
  std::vector<float> x(static_cast<size_t>(rows * dim), 0.0f);
  for (int64_t row = 0; row < rows; ++row) {
    float* r = x.data() + row * dim;
    if (lanes > 1) {
      r[1] = 0x1p60f;           // vector 0, lane 1: set 0
      r[lanes + 1] = -0x1p60f;  // vector 1, lane 1: set 1
      r[last + 1] = 1.0f;       // the last vector, lane 1
    } else {
      r[1] = 1.0f;
    }
  }
  const Shape shape{rows, dim}, normalized{dim};
  const int saved_threads = omp_get_max_threads();
  std::vector<float> y(x.size()), alone_mean(static_cast<size_t>(rows)), rstd(alone_mean.size());
  for (int64_t row = 0; row < rows; ++row) {
    const Shape one{1, dim};
    layer_norm({x.data() + row * dim, one}, normalized, {y.data() + row * dim, one}, {},
               NormStats{{alone_mean.data() + row, {1}}, {rstd.data() + row, {1}}});
  }
  // Taken alone the 1 is kept (set 2's lane 1 is 0): the mean is 1 / D.
  EXPECT_EQ(alone_mean[0], static_cast<float>(1.0 / static_cast<double>(dim)));
  for (const int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> mean(alone_mean.size());
    layer_norm({x.data(), shape}, normalized, {y.data(), shape}, {},
               NormStats{{mean.data(), {rows}}, {rstd.data(), {rows}}});
    EXPECT_EQ(mean, alone_mean) << threads << " threads";
  }
  omp_set_num_threads(saved_threads);
}

INSTANTIATE_TEST_SUITE_P(Targets, InterleavedRows, ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target_info) {
                           return cpu::target_name(target_info.param);
                         });

}  // namespace
}  // namespace addnorm
