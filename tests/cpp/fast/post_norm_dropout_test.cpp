// The dropout kernels and the fused post-norm Add&Norm (forward and backward) on every SIMD
// target compiled into this binary, bit for bit against the scalar dropout definition
// (ops/reference/philox.hpp) followed by the unfused add and norm: any start in the stream, any
// length, pointers off vector boundaries, blocks of rows, rows longer than a block, outputs large
// enough to be streamed, aliased outputs, and 1 or 2 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/dropout.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/reference/philox.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;

// The definition: the mask and the dropped values of count elements from stream element first.
struct Dropped {
  std::vector<uint8_t> keep;
  std::vector<float> values;
};

Dropped dropped_by_definition(const std::vector<float>& s, const DropoutOptions& options,
                              uint64_t first) {
  Dropped out{std::vector<uint8_t>(s.size()), std::vector<float>(s.size())};
  const uint32_t threshold = reference::dropout_threshold(options.p);
  for (size_t i = 0; i < s.size(); ++i) {
    const bool kept =
        options.p == 0.0f || reference::dropout_keeps(options.seed, first + i, threshold);
    out.keep[i] = kept ? 1 : 0;
    out.values[i] = options.p == 0.0f ? s[i]
                                      : (kept ? reference::dropout_kept_value(s[i], options.p)
                                              : reference::dropout_dropped_value(s[i]));
  }
  return out;
}

constexpr DType kF32 = DType::float32;

class PostNormDropoutOnEveryTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override { cpu::force_target(0); }
};

TEST_P(PostNormDropoutOnEveryTarget, KernelsEqualTheDefinition) {
  ASSERT_EQ(cpu::current_target_name(), cpu::target_name(GetParam()));
  for (const float p : {0.1f, 0.5f, 0.9f, 1e-12f, 0.0f}) {
    for (const uint64_t first :
         {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{6}, (uint64_t{1} << 33) + 5,
          (uint64_t{1} << 34) - 37, (uint64_t{1} << 40) + 3}) {  // blocks' high word nonzero
      for (const int64_t count : {0, 1, 3, 7, 16, 33, 64, 100, 1000}) {
        for (const int64_t shift : {0, 1, 3}) {  // pointers off vector boundaries
          SCOPED_TRACE("p " + std::to_string(p) + " first " + std::to_string(first) + " count " +
                       std::to_string(count) + " shift " + std::to_string(shift));
          const DropoutOptions options{p, 0xDEADBEEF12345ull, 0};
          const auto n = static_cast<size_t>(count);
          const auto s = random_floats(n, 11, -3.0f, 3.0f);
          const auto x = random_floats(n, 12, -3.0f, 3.0f);
          const Dropped want = dropped_by_definition(s, options, first);
          std::vector<float> buffer(n + 8), second(n + 8), third(n + 8);
          std::vector<uint8_t> keep(n + 8, 7);
          float* out = buffer.data() + shift;

          cpu::apply_dropout(s.data(), out, DType::float32, count, options, first);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], want.values[i]) << "dropout " << i;

          cpu::add_dropout(x.data(), kF32, s.data(), kF32, out, keep.data() + shift, count, options,
                           first);
          for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(out[i], x[i] + want.values[i]) << "add " << i;
            ASSERT_EQ(keep[i + shift], want.keep[i]) << "keep " << i;
          }
          cpu::add_dropout(x.data(), kF32, s.data(), kF32, out, nullptr, count, options, first);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] + want.values[i]) << "add " << i;

          // The mask applied to another tensor, with and without streaming stores.
          for (const bool stream : {false, true}) {
            float* dropped = second.data() + (shift + 1) % 4;
            float* copy = third.data() + shift;
            cpu::apply_keep(x.data(), keep.data() + shift, dropped, kF32, copy, kF32, count, p,
                            stream);
            for (size_t i = 0; i < n; ++i) {
              const float expected = p == 0.0f
                                         ? x[i]
                                         : (want.keep[i] ? reference::dropout_kept_value(x[i], p)
                                                         : reference::dropout_dropped_value(x[i]));
              ASSERT_EQ(dropped[i], expected) << "apply " << i;
              ASSERT_EQ(copy[i], x[i]) << "copy " << i;
            }
          }

          // In place: out = x and out = s.
          std::vector<float> inplace = x;
          cpu::add_dropout(inplace.data(), kF32, s.data(), kF32, inplace.data(), nullptr, count,
                           options, first);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(inplace[i], x[i] + want.values[i]);
          inplace = s;
          cpu::add_dropout(x.data(), kF32, inplace.data(), kF32, inplace.data(), nullptr, count,
                           options, first);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(inplace[i], x[i] + want.values[i]);
        }
      }
    }
  }
}

uint32_t bits_of(float value) {
  return std::bit_cast<uint32_t>(value);
}

// A dropped element is x * 0 (reference::dropout_dropped_value), as PyTorch's x * mask: NaN and
// infinities stay NaN, a negative value gives -0; kept ones are scaled. The dropout op, its
// backward (the same mask on dy) and the float64 op, bit for bit, on every target's lanes and
// tails.
TEST_P(PostNormDropoutOnEveryTarget, DroppedValuesAreMultipliedByZero) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            -2.5f,
                            3.0f,
                            -0.0f};
  const int64_t count = 103;
  std::vector<float> x(count), y(count), dx(count);
  std::vector<double> x64(count), y64(count);
  for (int64_t i = 0; i < count; ++i) x[i] = specials[i % 6], x64[i] = x[i];
  const DropoutOptions options{0.5f, 31, 2};
  dropout({x.data(), {count}}, {y.data(), {count}}, options);
  dropout_backward({x.data(), {count}}, {dx.data(), {count}}, options);
  float64::dropout({x64.data(), {count}}, {y64.data(), {count}}, {0.5, 31, 2});
  std::vector<uint8_t> mask(count);
  dropout_mask({mask.data(), {count}}, options);
  int64_t dropped_non_finite = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float want = mask[i] ? reference::dropout_kept_value(x[i], 0.5f)
                               : reference::dropout_dropped_value(x[i]);
    SCOPED_TRACE(i);
    EXPECT_EQ(std::isnan(y[i]), std::isnan(want));
    if (!std::isnan(want)) {
      EXPECT_EQ(bits_of(y[i]), bits_of(want));
    }
    EXPECT_EQ(std::isnan(dx[i]), std::isnan(y[i]));
    if (!std::isnan(y[i])) {
      EXPECT_EQ(bits_of(dx[i]), bits_of(y[i]));
    }
    EXPECT_EQ(std::isnan(y64[i]), std::isnan(want));
    if (!std::isnan(want)) {
      EXPECT_EQ(std::signbit(y64[i]), std::signbit(want));
    }
    dropped_non_finite += !mask[i] && !std::isfinite(x[i]);
  }
  EXPECT_GT(dropped_non_finite, 5);
}

// The same kernels with 16-bit tensors: x (bfloat16) and s (float16) widen exactly before the
// definition applies; the mask's outputs (dropped in bfloat16, copy in float16) round once.
TEST_P(PostNormDropoutOnEveryTarget, SixteenBitKernelsEqualTheDefinition) {
  for (const float p : {0.1f, 0.0f}) {
    for (const int64_t count : {1, 7, 33, 100, 1000}) {
      for (const bool stream : {false, true}) {
        SCOPED_TRACE("p " + std::to_string(p) + " count " + std::to_string(count) +
                     (stream ? " streamed" : ""));
        const DropoutOptions options{p, 77, 0};
        const uint64_t first = 3;
        const auto n = static_cast<size_t>(count);
        const auto x_wide = random_floats(n, 21, -3.0f, 3.0f);
        const auto s_wide = random_floats(n, 22, -3.0f, 3.0f);
        std::vector<bfloat16> x(n);
        std::vector<float16> s(n);
        std::vector<float> x_exact(n), s_exact(n);
        for (size_t i = 0; i < n; ++i) {
          x[i] = to_bfloat16(x_wide[i]);
          s[i] = to_float16(s_wide[i]);
          x_exact[i] = to_float(x[i]);
          s_exact[i] = to_float(s[i]);
        }
        const Dropped want = dropped_by_definition(s_exact, options, first);
        std::vector<float> out(n);
        std::vector<uint8_t> keep(n);
        cpu::add_dropout(x.data(), DType::bfloat16, s.data(), DType::float16, out.data(),
                         keep.data(), count, options, first);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(out[i], x_exact[i] + want.values[i]) << "add " << i;
          ASSERT_EQ(keep[i], want.keep[i]) << "keep " << i;
        }
        std::vector<bfloat16> dropped(n + 16);
        std::vector<float16> copy(n + 16);
        bfloat16* dropped_at = dropped.data() + 3;  // off vector boundaries
        cpu::apply_keep(out.data(), keep.data(), dropped_at, DType::bfloat16, copy.data(),
                        DType::float16, count, p, stream);
        for (size_t i = 0; i < n; ++i) {
          const float value = p == 0.0f ? out[i]
                                        : (want.keep[i] ? reference::dropout_kept_value(out[i], p)
                                                        : reference::dropout_dropped_value(out[i]));
          ASSERT_EQ(dropped_at[i].bits, to_bfloat16(value).bits) << "dropped " << i;
          ASSERT_EQ(copy[i].bits, to_float16(out[i]).bits) << "copy " << i;
        }
      }
    }
  }
}

struct PostCase {
  int64_t rows;
  int64_t dim;
  float p;
  uint64_t offset;
};

// The fused ops against dropout (definition) -> add -> the unfused norm and its backward.
void check_post_norm(const PostCase& c, bool layer) {
  SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.dim) + " p " + std::to_string(c.p) +
               " offset " + std::to_string(c.offset) + (layer ? " layer" : " rms"));
  const Shape shape{c.rows, c.dim}, normalized{c.dim};
  const auto n = static_cast<size_t>(c.rows * c.dim);
  const auto x = random_floats(n, 31, -2.0f, 2.0f), s = random_floats(n, 32, -2.0f, 2.0f);
  const auto dy = random_floats(n, 33);
  const auto gamma = random_floats(static_cast<size_t>(c.dim), 34, 0.5f, 1.5f);
  const auto beta = random_floats(static_cast<size_t>(c.dim), 35);
  const DropoutOptions dropout{c.p, 2017, c.offset};
  const ConstView g{gamma.data(), normalized}, b{beta.data(), normalized};
  NormOptions options;
  options.norm = layer ? NormKind::layer_norm : NormKind::rms_norm;
  options.gamma = g;
  if (layer) options.beta = b;

  // The unfused sequence.
  const Dropped d = dropped_by_definition(s, dropout, c.offset);
  std::vector<float> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = x[i] + d.values[i];
  std::vector<float> want_y(n), want_mean(c.rows), want_rstd(c.rows), want_dx(n), want_ds(n);
  std::vector<float> want_dg(c.dim), want_db(c.dim);
  const NormStats want_stats{{want_mean.data(), {c.rows}}, {want_rstd.data(), {c.rows}}};
  if (layer) {
    layer_norm({h.data(), shape}, normalized, {want_y.data(), shape}, options, want_stats);
    layer_norm_backward({dy.data(), shape}, {h.data(), shape}, normalized,
                        {{want_dx.data(), shape},
                         MutableView{want_dg.data(), normalized},
                         MutableView{want_db.data(), normalized}},
                        options);
  } else {
    rms_norm({h.data(), shape}, normalized, {want_y.data(), shape}, options, want_stats.rstd);
    rms_norm_backward({dy.data(), shape}, {h.data(), shape}, normalized,
                      {{want_dx.data(), shape}, MutableView{want_dg.data(), normalized}}, options);
  }
  for (size_t i = 0; i < n; ++i) {
    want_ds[i] = c.p == 0.0f ? want_dx[i]
                             : (d.keep[i] ? reference::dropout_kept_value(want_dx[i], c.p)
                                          : reference::dropout_dropped_value(want_dx[i]));
  }

  // The fused forward, into a fresh y and in place over x and over s.
  std::vector<float> y(n), mean(c.rows), rstd(c.rows);
  add_norm_post({x.data(), shape}, {s.data(), shape}, normalized, {y.data(), shape}, options,
                dropout, NormStats{{mean.data(), {c.rows}}, {rstd.data(), {c.rows}}});
  EXPECT_EQ(y, want_y);
  if (layer) {
    EXPECT_EQ(mean, want_mean);
  }
  EXPECT_EQ(rstd, want_rstd);
  std::vector<float> inplace = x;
  add_norm_post({inplace.data(), shape}, {s.data(), shape}, normalized, {inplace.data(), shape},
                options, dropout);
  EXPECT_EQ(inplace, want_y);
  inplace = s;
  add_norm_post({x.data(), shape}, {inplace.data(), shape}, normalized, {inplace.data(), shape},
                options, dropout);
  EXPECT_EQ(inplace, want_y);

  // The fused backward, into fresh outputs and aliased (dx = dy, ds = s).
  std::vector<float> dx(n), ds(n), dg(c.dim), db(c.dim);
  const OptionalMutable dbeta =
      layer ? OptionalMutable(MutableView{db.data(), normalized}) : std::nullopt;
  add_norm_post_backward(
      {dy.data(), shape}, {x.data(), shape}, {s.data(), shape}, normalized,
      {{dx.data(), shape}, {ds.data(), shape}, MutableView{dg.data(), normalized}, dbeta}, options,
      dropout);
  EXPECT_EQ(dx, want_dx);
  EXPECT_EQ(ds, want_ds);
  EXPECT_EQ(dg, want_dg);
  if (layer) {
    EXPECT_EQ(db, want_db);
  }
  std::vector<float> dy_dx = dy, s_ds = s;
  const AddNormPostGrads into_dy_and_s{
      {dy_dx.data(), shape}, {s_ds.data(), shape}, std::nullopt, std::nullopt};
  add_norm_post_backward({dy_dx.data(), shape}, {x.data(), shape}, {s_ds.data(), shape}, normalized,
                         into_dy_and_s, options, dropout);
  EXPECT_EQ(dy_dx, want_dx);
  EXPECT_EQ(s_ds, want_ds);
  // dx = x.
  std::vector<float> x_dx = x;
  const AddNormPostGrads into_x{
      {x_dx.data(), shape}, {ds.data(), shape}, std::nullopt, std::nullopt};
  add_norm_post_backward({dy.data(), shape}, {x_dx.data(), shape}, {s.data(), shape}, normalized,
                         into_x, options, dropout);
  EXPECT_EQ(x_dx, want_dx);
}

TEST_P(PostNormDropoutOnEveryTarget, FusedOpsEqualDropoutAddNorm) {
  // Odd dims and offsets put blocks and rows off 4-element Philox blocks and vector boundaries;
  // 40 x 1000 is several blocks of rows; 2 x 20000 rows longer than a block.
  const std::vector<PostCase> cases = {
      {5, 1, 0.1f, 0},    {3, 7, 0.3f, 1},     {4, 33, 0.1f, 3},       {2, 768, 0.5f, 6},
      {3, 4097, 0.1f, 2}, {40, 1000, 0.1f, 0}, {40, 1000, 0.2f, 7},    {2, 20000, 0.1f, 5},
      {9, 100, 0.0f, 0},  {9, 100, 1e-12f, 1}, {6, 64, 0.9f, 1234567},
  };
  for (const PostCase& c : cases) {
    for (const bool layer : {true, false}) check_post_norm(c, layer);
  }
}

// Outputs of 8 MiB and more are written with streaming stores.
TEST_P(PostNormDropoutOnEveryTarget, StreamedOutputsEqualDropoutAddNorm) {
  check_post_norm({520, 4100, 0.1f, 3}, true);
}

INSTANTIATE_TEST_SUITE_P(Targets, PostNormDropoutOnEveryTarget,
                         ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target_info) {
                           return cpu::target_name(target_info.param);
                         });

// The same bits for 1 and 2 threads, in the sizes where the ops split rows over threads.
TEST(PostNormDropout, ThreadCountDoesNotChangeTheResult) {
  const int64_t rows = 700, dim = 1000;
  const Shape shape{rows, dim}, normalized{dim};
  const auto n = static_cast<size_t>(rows * dim);
  const auto x = random_floats(n, 41), s = random_floats(n, 42), dy = random_floats(n, 43);
  const auto gamma = random_floats(dim, 44, 0.5f, 1.5f), beta = random_floats(dim, 45);
  const NormOptions options{NormKind::layer_norm, ConstView{gamma.data(), normalized},
                            ConstView{beta.data(), normalized}};
  const DropoutOptions dropout{0.1f, 9, 3};
  auto run = [&](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> y(n), dx(n), ds(n), dg(dim), db(dim);
    add_norm_post({x.data(), shape}, {s.data(), shape}, normalized, {y.data(), shape}, options,
                  dropout);
    add_norm_post_backward({dy.data(), shape}, {x.data(), shape}, {s.data(), shape}, normalized,
                           {{dx.data(), shape},
                            {ds.data(), shape},
                            MutableView{dg.data(), normalized},
                            MutableView{db.data(), normalized}},
                           options, dropout);
    omp_set_num_threads(before);
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), ds.begin(), ds.end());
    y.insert(y.end(), dg.begin(), dg.end());
    y.insert(y.end(), db.begin(), db.end());
    return y;
  };
  EXPECT_EQ(run(1), run(2));
}

}  // namespace
}  // namespace addnorm
