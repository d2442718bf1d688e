// The public norms (addnorm/ops.hpp) on 16-bit and mixed storage, against the float64 ops on the
// same (widened) values: each 16-bit output within one unit of its storage type, float32 outputs
// and statistics within the float32 contract. Also the storage rules (one type per group of
// tensors, aliasing) and post-norm.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "addnorm/dtype.hpp"
#include "addnorm/float64.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;

struct Stored {
  DType dtype;
  std::vector<uint16_t> bits;
  std::vector<float> wide;  // the stored values, exactly

  Stored(const std::vector<float>& values, DType type) : dtype(type), bits(values.size()) {
    for (size_t i = 0; i < values.size(); ++i) {
      bits[i] = type == DType::bfloat16 ? to_bfloat16(values[i]).bits : to_float16(values[i]).bits;
      wide.push_back(type == DType::bfloat16 ? to_float(bfloat16{bits[i]})
                                             : to_float(float16{bits[i]}));
    }
  }
  AnyConstView view(const Shape& shape) const { return {bits.data(), shape, dtype}; }
};

std::vector<float> widen_bits(const std::vector<uint16_t>& bits, DType dtype) {
  std::vector<float> out;
  for (uint16_t b : bits) {
    out.push_back(dtype == DType::bfloat16 ? to_float(bfloat16{b}) : to_float(float16{b}));
  }
  return out;
}

std::vector<double> as_double(const std::vector<float>& values) {
  return {values.begin(), values.end()};
}

// One unit in the last place of a 16-bit type at `value` (8 significand bits for bfloat16, 11
// for float16; float16's subnormal spacing below 2^-14).
double unit(double value, DType dtype) {
  const int bits = dtype == DType::bfloat16 ? 8 : 11;
  const double magnitude = std::max(std::fabs(value), dtype == DType::float16 ? 0x1p-14 : 0x1p-126);
  return std::ldexp(1.0, std::ilogb(magnitude) - (bits - 1));
}

// got (stored as dtype) is want rounded to dtype, give or take the float32 work before the
// rounding: within one unit, plus `slack` (absolute) for gradients' cancellation.
void expect_within_unit(const std::vector<float>& got, const std::vector<double>& want, DType dtype,
                        double slack = 0) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), unit(want[i], dtype) + slack)
        << dtype_name(dtype) << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

double max_abs(const std::vector<double>& values) {
  double m = 0;
  for (double v : values) m = std::max(m, std::fabs(v));
  return m;
}

// Each storage type on every SIMD target this machine runs.
class SixteenBitStorage : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {
 protected:
  void SetUp() override { cpu::force_target(std::get<1>(GetParam())); }
  void TearDown() override { cpu::force_target(0); }
  static DType storage() { return std::get<0>(GetParam()); }
};

TEST_P(SixteenBitStorage, LayerNormForwardAndBackwardMatchFloat64) {
  const DType dtype = storage();
  for (const int64_t dim :
       {int64_t{64}, int64_t{67}, int64_t{128}, int64_t{512}}) {  // 64, 128: short rows
    const int64_t rows = 9;
    const Shape shape{rows, dim}, normalized{dim}, row_shape{rows};
    const Stored x(random_floats(rows * dim, 11, -3.0f, 5.0f), dtype);
    const Stored dy(random_floats(rows * dim, 12), dtype);
    const Stored gamma(random_floats(dim, 13, 0.5f, 1.5f), dtype);
    const Stored beta(random_floats(dim, 14), dtype);
    std::vector<uint16_t> y(rows * dim), dx(rows * dim);
    std::vector<float> mean(rows), rstd(rows), dgamma(dim), dbeta(dim);
    const NormOptions options{.gamma = gamma.view({dim}), .beta = beta.view({dim}), .eps = 1e-5f};
    layer_norm(x.view(shape), normalized, AnyMutableView(y.data(), shape, dtype), options,
               NormStats{{mean.data(), row_shape}, {rstd.data(), row_shape}});
    layer_norm_backward(dy.view(shape), x.view(shape), normalized,
                        {AnyMutableView(dx.data(), shape, dtype), MutableView{dgamma.data(), {dim}},
                         MutableView{dbeta.data(), {dim}}},
                        options, SavedStats{{mean.data(), row_shape}, {rstd.data(), row_shape}});

    const auto x64 = as_double(x.wide), dy64 = as_double(dy.wide);
    const auto g64 = as_double(gamma.wide), b64 = as_double(beta.wide);
    std::vector<double> y64(rows * dim), mean64(rows), rstd64(rows), dx64(rows * dim),
        dgamma64(dim), dbeta64(dim);
    const float64::NormOptions options64{.gamma = float64::ConstView{g64.data(), {dim}},
                                         .beta = float64::ConstView{b64.data(), {dim}},
                                         .eps = 1e-5};
    float64::layer_norm({x64.data(), shape}, normalized, {y64.data(), shape}, options64,
                        float64::NormStats{{mean64.data(), row_shape}, {rstd64.data(), row_shape}});
    float64::layer_norm_backward({dy64.data(), shape}, {x64.data(), shape}, normalized,
                                 {{dx64.data(), shape},
                                  float64::MutableView{dgamma64.data(), {dim}},
                                  float64::MutableView{dbeta64.data(), {dim}}},
                                 options64);
    expect_within_unit(widen_bits(y, dtype), y64, dtype);
    // dx cancels terms of the size of rstd * |dy * gamma|: a few float32 roundings of those.
    expect_within_unit(widen_bits(dx, dtype), dx64, dtype, 1e-5 * max_abs(dx64));
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_NEAR(mean[r], mean64[r], 1e-6 * std::fabs(mean64[r]) + 1e-7);
      EXPECT_NEAR(rstd[r], rstd64[r], 1e-6 * rstd64[r]);
    }
    // dgamma, dbeta: float32 sums over rows of float64 products: a float32 rounding each.
    for (int64_t i = 0; i < dim; ++i) {
      EXPECT_NEAR(dgamma[i], dgamma64[i], 1e-5 * max_abs(dgamma64));
      EXPECT_NEAR(dbeta[i], dbeta64[i], 1e-5 * max_abs(dbeta64));
    }
  }
}

TEST_P(SixteenBitStorage, RmsNormWithZeroCenteredGammaMatchesFloat64) {
  const DType dtype = storage();
  const int64_t rows = 6, dim = 130;
  const Shape shape{rows, dim}, normalized{dim}, row_shape{rows};
  const Stored x(random_floats(rows * dim, 21, -2.0f, 2.0f), dtype);
  const Stored dy(random_floats(rows * dim, 22), dtype);
  const Stored gamma(random_floats(dim, 23, -0.2f, 0.2f), dtype);
  std::vector<uint16_t> y(rows * dim), dx(rows * dim);
  std::vector<float> rstd(rows), dgamma(dim);
  const NormOptions options{.gamma = gamma.view({dim}), .zero_centered_gamma = true, .eps = 1e-6f};
  rms_norm(x.view(shape), normalized, AnyMutableView(y.data(), shape, dtype), options,
           MutableView{rstd.data(), row_shape});
  rms_norm_backward(dy.view(shape), x.view(shape), normalized,
                    {AnyMutableView(dx.data(), shape, dtype), MutableView{dgamma.data(), {dim}}},
                    options, ConstView{rstd.data(), row_shape});
  const auto x64 = as_double(x.wide), dy64 = as_double(dy.wide), g64 = as_double(gamma.wide);
  std::vector<double> y64(rows * dim), dx64(rows * dim), dgamma64(dim);
  const float64::NormOptions options64{
      .gamma = float64::ConstView{g64.data(), {dim}}, .zero_centered_gamma = true, .eps = 1e-6};
  float64::rms_norm({x64.data(), shape}, normalized, {y64.data(), shape}, options64);
  float64::rms_norm_backward({dy64.data(), shape}, {x64.data(), shape}, normalized,
                             {{dx64.data(), shape}, float64::MutableView{dgamma64.data(), {dim}}},
                             options64);
  expect_within_unit(widen_bits(y, dtype), y64, dtype);
  expect_within_unit(widen_bits(dx, dtype), dx64, dtype, 1e-5 * max_abs(dx64));
  for (int64_t i = 0; i < dim; ++i) {
    EXPECT_NEAR(dgamma[i], dgamma64[i], 1e-5 * max_abs(dgamma64));
  }
}

// The layout large-model training uses: a float32 residual stream x and h beside 16-bit
// sub-layer output r and normalised y. h is x + r rounded once to float32, bit for bit.
TEST_P(SixteenBitStorage, PreNormWithFloat32StreamAndSixteenBitActivations) {
  const DType dtype = storage();
  const int64_t rows = 5, dim = 96;
  const Shape shape{rows, dim}, normalized{dim};
  const std::vector<float> x = random_floats(rows * dim, 31, -4.0f, 4.0f);
  const Stored r(random_floats(rows * dim, 32), dtype);
  const std::vector<float> gamma = random_floats(dim, 33, 0.5f, 1.5f);
  std::vector<float> h(rows * dim);
  std::vector<uint16_t> y(rows * dim);
  add_norm_pre(
      ConstView{x.data(), shape}, r.view(shape), normalized, MutableView{h.data(), shape},
      AnyMutableView(y.data(), shape, dtype),
      NormOptions{NormKind::rms_norm, ConstView{gamma.data(), {dim}}, std::nullopt, false, 1e-6f});
  for (int64_t i = 0; i < rows * dim; ++i) ASSERT_EQ(h[i], x[i] + r.wide[i]) << i;
  const auto h64 = as_double(h), g64 = as_double(gamma);
  std::vector<double> y64(rows * dim);
  float64::rms_norm({h64.data(), shape}, normalized, {y64.data(), shape},
                    float64::NormOptions{.gamma = float64::ConstView{g64.data(), {dim}},
                                         .zero_centered_gamma = false,
                                         .eps = 1e-6});
  expect_within_unit(widen_bits(y, dtype), y64, dtype);
}

// The mirror image: a 16-bit residual stream (x and h; in the backward h, dh_next and dh) with
// float32 activations (r and y; dy), run by the kernels without staging. h is x + r rounded once
// to its type, bit for bit; y, within a few float32 roundings of the float64 norm of that h (the
// stream's float32 block sums add a few float32 roundings of the row's magnitude,
// docs/numerics.md); dh within one unit of its type of the float64 gradient.
TEST_P(SixteenBitStorage, PreNormWithSixteenBitStreamAndFloat32Activations) {
  const DType dtype = storage();
  for (const NormKind norm : {NormKind::layer_norm, NormKind::rms_norm}) {
    const bool layer = norm == NormKind::layer_norm;
    const int64_t rows = 6, dim = 300;
    const Shape shape{rows, dim}, normalized{dim}, row_shape{rows};
    const Stored x(random_floats(rows * dim, 51, -3.0f, 5.0f), dtype);
    const std::vector<float> r = random_floats(rows * dim, 52, -1.0f, 1.0f);
    const Stored dh_next(random_floats(rows * dim, 53), dtype);
    const std::vector<float> dy = random_floats(rows * dim, 54);
    const std::vector<float> gamma = random_floats(dim, 55, 0.5f, 1.5f);
    const std::vector<float> beta = random_floats(dim, 56);
    const NormOptions options{
        norm, ConstView{gamma.data(), {dim}},
        layer ? std::optional<AnyConstView>(ConstView{beta.data(), {dim}}) : std::nullopt, false,
        1e-5f};
    std::vector<uint16_t> h(rows * dim), dh(rows * dim);
    std::vector<float> y(rows * dim), mean(rows), rstd(rows), dgamma(dim), dbeta(dim);
    add_norm_pre(x.view(shape), ConstView{r.data(), shape}, normalized,
                 AnyMutableView(h.data(), shape, dtype), MutableView{y.data(), shape}, options,
                 NormStats{{mean.data(), row_shape}, {rstd.data(), row_shape}});
    for (int64_t i = 0; i < rows * dim; ++i) {
      const uint16_t want = dtype == DType::bfloat16 ? to_bfloat16(x.wide[i] + r[i]).bits
                                                     : to_float16(x.wide[i] + r[i]).bits;
      ASSERT_EQ(h[i], want) << i;
    }
    AddNormPreGrads grads{
        AnyMutableView(dh.data(), shape, dtype), MutableView{dgamma.data(), {dim}},
        layer ? std::optional<MutableView>(MutableView{dbeta.data(), {dim}}) : std::nullopt};
    add_norm_pre_backward(ConstView{dy.data(), shape}, dh_next.view(shape),
                          AnyConstView(h.data(), shape, dtype), normalized, grads, options,
                          SavedStats{{mean.data(), row_shape}, {rstd.data(), row_shape}});

    const auto h64 = as_double(widen_bits(h, dtype)), dy64 = as_double(dy);
    const auto g64 = as_double(gamma), b64 = as_double(beta);
    std::vector<double> y64(rows * dim), dx64(rows * dim), dgamma64(dim), dbeta64(dim),
        rstd64(rows), mean64(rows);
    const Shape param{dim};
    const float64::NormOptions options64{
        norm, float64::ConstView{g64.data(), param},
        layer ? float64::OptionalConst(float64::ConstView{b64.data(), param}) : std::nullopt, false,
        1e-5};
    std::vector<double> x_zero(rows * dim, 0.0), h_again(rows * dim);
    float64::add_norm_pre(
        {h64.data(), shape}, {x_zero.data(), shape}, normalized, {h_again.data(), shape},
        {y64.data(), shape}, options64,
        float64::NormStats{{mean64.data(), row_shape}, {rstd64.data(), row_shape}});
    const auto dh_next64 = as_double(dh_next.wide);
    float64::add_norm_pre_backward(
        {dy64.data(), shape}, float64::ConstView{dh_next64.data(), shape}, {h64.data(), shape},
        normalized,
        {{dx64.data(), shape},
         float64::MutableView{dgamma64.data(), param},
         layer ? std::optional<float64::MutableView>(float64::MutableView{dbeta64.data(), param})
               : std::nullopt},
        options64);
    // A few float32 roundings of y, and a few of the row's magnitude (|h| <= 6) carried through
    // rstd and gamma (<= 1.5).
    for (int64_t row = 0; row < rows; ++row) {
      const double carried = 8 * 0x1p-24 * 6.0 * rstd64[row] * 1.5;
      for (int64_t i = row * dim; i < (row + 1) * dim; ++i) {
        ASSERT_LE(std::fabs(y[i] - y64[i]), 4 * 0x1p-24 * std::fabs(y64[i]) + carried)
            << "element " << i << ": " << y[i] << " vs " << y64[i];
      }
      EXPECT_NEAR(rstd[row], rstd64[row], 1e-6 * rstd64[row]);
      if (layer) {
        EXPECT_NEAR(mean[row], mean64[row], 1e-6 * std::fabs(mean64[row]) + 1e-6);
      }
    }
    expect_within_unit(widen_bits(dh, dtype), dx64, dtype, 1e-5 * max_abs(dx64));
    for (int64_t i = 0; i < dim; ++i) {
      EXPECT_NEAR(dgamma[i], dgamma64[i], 1e-5 * max_abs(dgamma64));
      if (layer) {
        EXPECT_NEAR(dbeta[i], dbeta64[i], 1e-5 * max_abs(dbeta64));
      }
    }
  }
}

// A 16-bit x normalised into a float32 y (and the mirror: float32 x into 16-bit y is the
// pre-norm test's layout above), LayerNorm, against float64.
TEST_P(SixteenBitStorage, LayerNormOfSixteenBitRowsIntoFloat32) {
  const DType dtype = storage();
  const int64_t rows = 5, dim = 257;
  const Shape shape{rows, dim}, normalized{dim};
  const Stored x(random_floats(rows * dim, 61, -2.0f, 2.0f), dtype);
  std::vector<float> y(rows * dim);
  layer_norm(x.view(shape), normalized, MutableView{y.data(), shape});
  const auto x64 = as_double(x.wide);
  std::vector<double> y64(rows * dim);
  float64::layer_norm({x64.data(), shape}, normalized, {y64.data(), shape});
  // |x| <= 2; rstd below 1 / 0.5 (the spread of uniform values on [-2, 2] is about 1.15).
  for (int64_t i = 0; i < rows * dim; ++i) {
    ASSERT_LE(std::fabs(y[i] - y64[i]), 4 * 0x1p-24 * std::fabs(y64[i]) + 8 * 0x1p-24 * 2.0 * 2.0)
        << "element " << i << ": " << y[i] << " vs " << y64[i];
  }
}

// The fused pre-norm on a 16-bit residual stream is, bit for bit, the unfused add (h rounded to
// its type) followed by the norm of h: calls of more rows than one block of the kernels' add
// (norm_forward-inl.h, add_then_norm_rows: 256 KiB of h) with a part block after, h
// written over x, over r or apart, 16-bit and float32 branches, LayerNorm and RMSNorm, short rows
// and long, on 1 and 2 threads.
TEST_P(SixteenBitStorage, PreNormEqualsTheAddThenTheNormBitForBit) {
  const DType dtype = storage();
  const int saved_threads = omp_get_max_threads();
  for (const int64_t dim : {64, 520}) {
    const int64_t rows = (int64_t{600} << 10) / (2 * dim);  // 600 KiB of h: two blocks and a part
    const Shape shape{rows, dim}, normalized{dim}, row_shape{rows};
    const Stored x(random_floats(rows * dim, 57, -3.0f, 5.0f), dtype);
    const std::vector<float> r_wide = random_floats(rows * dim, 58, -1.0f, 1.0f);
    const Stored r(r_wide, dtype);
    const std::vector<float> gamma = random_floats(dim, 59, 0.5f, 1.5f);
    const std::vector<float> beta = random_floats(dim, 60);
    for (const bool float32_branch : {false, true}) {
      for (const NormKind norm : {NormKind::layer_norm, NormKind::rms_norm}) {
        const bool layer = norm == NormKind::layer_norm;
        const NormOptions options{
            norm, ConstView{gamma.data(), {dim}},
            layer ? std::optional<AnyConstView>(ConstView{beta.data(), {dim}}) : std::nullopt,
            false, 1e-5f};
        // The unfused ops: h = x + r rounded to h's type, then the norm of h.
        std::vector<uint16_t> want_h(x.bits.size());
        for (size_t i = 0; i < want_h.size(); ++i) {
          const float sum = x.wide[i] + (float32_branch ? r_wide[i] : r.wide[i]);
          want_h[i] = dtype == DType::bfloat16 ? to_bfloat16(sum).bits : to_float16(sum).bits;
        }
        std::vector<uint16_t> want_y16(x.bits.size());
        std::vector<float> want_y32(x.bits.size()), want_mean(rows), want_rstd(rows);
        const AnyMutableView want_y = float32_branch
                                          ? AnyMutableView(MutableView{want_y32.data(), shape})
                                          : AnyMutableView(want_y16.data(), shape, dtype);
        const NormStats want_stats{{want_mean.data(), row_shape}, {want_rstd.data(), row_shape}};
        const AnyConstView h_view(want_h.data(), shape, dtype);
        if (layer) {
          layer_norm(h_view, normalized, want_y,
                     {.gamma = ConstView{gamma.data(), {dim}},
                      .beta = ConstView{beta.data(), {dim}},
                      .eps = 1e-5f},
                     want_stats);
        } else {
          rms_norm(
              h_view, normalized, want_y,
              {.gamma = ConstView{gamma.data(), {dim}}, .zero_centered_gamma = false, .eps = 1e-5f},
              MutableView{want_rstd.data(), row_shape});
        }
        for (const int threads : {1, 2}) {
          for (const std::string where : {"apart", "over x", "over r"}) {
            if (where == "over r" && float32_branch) {
              continue;  // h and r of different types
            }
            SCOPED_TRACE("dim " + std::to_string(dim) + (layer ? " layer" : " rms") +
                         (float32_branch ? " float32 branch" : "") + " h " + where + ", " +
                         std::to_string(threads) + " threads");
            omp_set_num_threads(threads);
            std::vector<uint16_t> x_bits = x.bits, r_bits = r.bits, apart(x.bits.size());
            uint16_t* h = where == "over x"   ? x_bits.data()
                          : where == "over r" ? r_bits.data()
                                              : apart.data();
            std::vector<uint16_t> y16(x.bits.size());
            std::vector<float> y32(x.bits.size()), mean(rows), rstd(rows);
            const AnyConstView r_view = float32_branch
                                            ? AnyConstView(ConstView{r_wide.data(), shape})
                                            : AnyConstView(r_bits.data(), shape, dtype);
            const AnyMutableView y = float32_branch ? AnyMutableView(MutableView{y32.data(), shape})
                                                    : AnyMutableView(y16.data(), shape, dtype);
            add_norm_pre(AnyConstView(x_bits.data(), shape, dtype), r_view, normalized,
                         AnyMutableView(h, shape, dtype), y, options,
                         NormStats{{mean.data(), row_shape}, {rstd.data(), row_shape}});
            omp_set_num_threads(saved_threads);
            EXPECT_TRUE(std::equal(want_h.begin(), want_h.end(), h));
            EXPECT_EQ(y16, want_y16);
            EXPECT_EQ(y32, want_y32);
            EXPECT_EQ(rstd, want_rstd);
            if (layer) {
              EXPECT_EQ(mean, want_mean);
            }
            // The add op alone gives the same h, apart and in place, on each thread count.
            std::vector<uint16_t> x_add = x.bits, r_add = r.bits, out_add(x.bits.size());
            uint16_t* out = where == "over x"   ? x_add.data()
                            : where == "over r" ? r_add.data()
                                                : out_add.data();
            const AnyConstView r_add_view = float32_branch
                                                ? AnyConstView(ConstView{r_wide.data(), shape})
                                                : AnyConstView(r_add.data(), shape, dtype);
            omp_set_num_threads(threads);
            add(AnyConstView(x_add.data(), shape, dtype), r_add_view,
                AnyMutableView(out, shape, dtype));
            omp_set_num_threads(saved_threads);
            EXPECT_TRUE(std::equal(want_h.begin(), want_h.end(), out));
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TypesAndTargets, SixteenBitStorage,
                         ::testing::Combine(::testing::Values(DType::bfloat16, DType::float16),
                                            ::testing::ValuesIn(cpu::available_targets())),
                         [](const auto& param_info) {
                           return std::string(dtype_name(std::get<0>(param_info.param))) + "_" +
                                  cpu::target_name(std::get<1>(param_info.param));
                         });

// The two 16-bit types together: a residual stream of one (x and h; in the backward x or h,
// dh_next and dx) with a branch of the other (r and y; dy), run by the kernels directly on every
// target (all nine pairs are compiled). Against the float64 ops: h is x + r rounded once to the
// stream's type, bit for bit; each 16-bit output within one unit of its type (gradients: plus a
// few float32 roundings of their scale); LayerNorm and RMSNorm, short rows and long.
TEST_P(SixteenBitStorage, StreamOfOneSixteenBitTypeWithBranchOfTheOther) {
  const DType stream = storage();
  const DType branch = stream == DType::bfloat16 ? DType::float16 : DType::bfloat16;
  for (const int64_t dim : {int64_t{64}, int64_t{150}}) {
    for (const NormKind norm : {NormKind::layer_norm, NormKind::rms_norm}) {
      const bool layer = norm == NormKind::layer_norm;
      SCOPED_TRACE("dim " + std::to_string(dim) + (layer ? " layer" : " rms"));
      const int64_t rows = 7;
      const Shape shape{rows, dim}, normalized{dim}, param{dim};
      const Stored x(random_floats(rows * dim, 81, -3.0f, 5.0f), stream);
      const Stored r(random_floats(rows * dim, 82), branch);
      const Stored dy(random_floats(rows * dim, 83), branch);
      const Stored dh_next(random_floats(rows * dim, 84), stream);
      const std::vector<float> gamma = random_floats(dim, 85, 0.5f, 1.5f);
      const NormOptions options{norm, ConstView{gamma.data(), param}, std::nullopt, false, 1e-5f};
      const auto x64 = as_double(x.wide), dy64 = as_double(dy.wide), g64 = as_double(gamma);
      const float64::NormOptions options64{norm, float64::ConstView{g64.data(), param},
                                           std::nullopt, false, 1e-5};
      std::vector<double> zero(rows * dim, 0.0), scratch64(rows * dim);

      // The plain norm: x of the stream's type into y of the branch's, and its backward.
      std::vector<uint16_t> y(rows * dim), dx(rows * dim);
      std::vector<float> dgamma(dim);
      if (layer) {
        layer_norm(x.view(shape), normalized, AnyMutableView(y.data(), shape, branch),
                   {.gamma = ConstView{gamma.data(), param}, .eps = 1e-5f});
        layer_norm_backward(dy.view(shape), x.view(shape), normalized,
                            {AnyMutableView(dx.data(), shape, stream),
                             MutableView{dgamma.data(), param}, std::nullopt},
                            {.gamma = ConstView{gamma.data(), param}, .eps = 1e-5f});
      } else {
        rms_norm(x.view(shape), normalized, AnyMutableView(y.data(), shape, branch),
                 {.gamma = ConstView{gamma.data(), param}, .eps = 1e-5f});
        rms_norm_backward(
            dy.view(shape), x.view(shape), normalized,
            {AnyMutableView(dx.data(), shape, stream), MutableView{dgamma.data(), param}},
            {.gamma = ConstView{gamma.data(), param}, .eps = 1e-5f});
      }
      std::vector<double> y64(rows * dim), dx64(rows * dim), dgamma64(dim);
      float64::add_norm_pre({x64.data(), shape}, {zero.data(), shape}, normalized,
                            {scratch64.data(), shape}, {y64.data(), shape}, options64);
      float64::add_norm_pre_backward(
          {dy64.data(), shape}, std::nullopt, {x64.data(), shape}, normalized,
          {{dx64.data(), shape}, float64::MutableView{dgamma64.data(), param}, std::nullopt},
          options64);
      expect_within_unit(widen_bits(y, branch), y64, branch);
      expect_within_unit(widen_bits(dx, stream), dx64, stream, 1e-5 * max_abs(dx64));
      for (int64_t i = 0; i < dim; ++i) {
        EXPECT_NEAR(dgamma[i], dgamma64[i], 1e-5 * max_abs(dgamma64));
      }

      // The pre-norm: x, h (stream) and r, y (branch); its backward with dh_next (stream).
      std::vector<uint16_t> h(rows * dim), y_pre(rows * dim), dh(rows * dim);
      add_norm_pre(x.view(shape), r.view(shape), normalized,
                   AnyMutableView(h.data(), shape, stream),
                   AnyMutableView(y_pre.data(), shape, branch), options);
      for (int64_t i = 0; i < rows * dim; ++i) {
        const float sum = x.wide[i] + r.wide[i];
        ASSERT_EQ(h[i], stream == DType::bfloat16 ? to_bfloat16(sum).bits : to_float16(sum).bits)
            << i;
      }
      add_norm_pre_backward(dy.view(shape), dh_next.view(shape),
                            AnyConstView(h.data(), shape, stream), normalized,
                            {AnyMutableView(dh.data(), shape, stream),
                             MutableView{dgamma.data(), param}, std::nullopt},
                            options);
      const auto h64 = as_double(widen_bits(h, stream)), dh_next64 = as_double(dh_next.wide);
      float64::add_norm_pre({h64.data(), shape}, {zero.data(), shape}, normalized,
                            {scratch64.data(), shape}, {y64.data(), shape}, options64);
      float64::add_norm_pre_backward(
          {dy64.data(), shape}, float64::ConstView{dh_next64.data(), shape}, {h64.data(), shape},
          normalized,
          {{dx64.data(), shape}, float64::MutableView{dgamma64.data(), param}, std::nullopt},
          options64);
      expect_within_unit(widen_bits(y_pre, branch), y64, branch);
      expect_within_unit(widen_bits(dh, stream), dx64, stream, 1e-5 * max_abs(dx64));
      for (int64_t i = 0; i < dim; ++i) {
        EXPECT_NEAR(dgamma[i], dgamma64[i], 1e-5 * max_abs(dgamma64));
      }
    }
  }
}

// A call's row tensors form two groups of one storage type each: the residual stream (x and h;
// in a backward the input, dh_next and the gradient) and the branch (r and y). Any other call is
// refused by name, before anything is written.
TEST(StorageRules, EachGroupOfTensorsSharesOneType) {
  const Shape shape{2, 8}, normalized{8};
  const Stored x(random_floats(16, 91), DType::bfloat16);
  const Stored r(random_floats(16, 92), DType::float16);
  std::vector<float> wide(16, 7.0f), dgamma(8, 7.0f);
  std::vector<uint16_t> narrow(16, 0x1234), other(16, 0x1234);
  auto expect_refused = [&](const std::string& message, const auto& call) {
    try {
      call();
      ADD_FAILURE() << "expected an error: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
    EXPECT_EQ(wide, std::vector<float>(16, 7.0f)) << message;
    EXPECT_EQ(dgamma, std::vector<float>(8, 7.0f)) << message;
    EXPECT_EQ(narrow, std::vector<uint16_t>(16, 0x1234)) << message;
    EXPECT_EQ(other, std::vector<uint16_t>(16, 0x1234)) << message;
  };
  const AnyMutableView narrow_bf16(narrow.data(), shape, DType::bfloat16);
  const AnyMutableView narrow_f16(other.data(), shape, DType::float16);
  const MutableView float32{wide.data(), shape};
  expect_refused("h is stored as float32, expected bfloat16 like x", [&] {
    add_norm_pre(x.view(shape), r.view(shape), normalized, float32, narrow_f16);
  });
  expect_refused("y is stored as bfloat16, expected float16 like r", [&] {
    add_norm_pre(x.view(shape), r.view(shape), normalized, narrow_bf16, narrow_bf16);
  });
  expect_refused("dx is stored as float32, expected bfloat16 like x", [&] {
    layer_norm_backward(r.view(shape), x.view(shape), normalized,
                        {float32, std::nullopt, std::nullopt});
  });
  expect_refused("dx is stored as float16, expected bfloat16 like x", [&] {
    rms_norm_backward(r.view(shape), x.view(shape), normalized, {narrow_f16, std::nullopt});
  });
  expect_refused("dh_next is stored as float16, expected bfloat16 like h", [&] {
    add_norm_pre_backward(
        r.view(shape), r.view(shape), x.view(shape), normalized,
        {narrow_bf16, MutableView{dgamma.data(), normalized}, std::nullopt},
        {NormKind::layer_norm, ConstView{wide.data(), normalized}, std::nullopt, false, 1e-5f});
  });
  expect_refused("dh is stored as float32, expected bfloat16 like h", [&] {
    add_norm_pre_backward(r.view(shape), std::nullopt, x.view(shape), normalized,
                          {float32, std::nullopt, std::nullopt});
  });
  // The residual add: x and out are the stream.
  expect_refused("out is stored as float32, expected bfloat16 like x",
                 [&] { add(x.view(shape), r.view(shape), float32); });
  // BatchNorm: x, y, dy and dx are one group.
  expect_refused("y is stored as float32, expected bfloat16 like x",
                 [&] { batch_norm(x.view(shape), float32); });
  expect_refused("dy is stored as float16, expected bfloat16 like x", [&] {
    batch_norm_backward(r.view(shape), x.view(shape), {narrow_bf16, std::nullopt, std::nullopt});
  });
  expect_refused("dx is stored as float16, expected bfloat16 like x", [&] {
    batch_norm_backward(x.view(shape), x.view(shape), {narrow_f16, std::nullopt, std::nullopt});
  });
}

// An output may replace an input only when both store the same type.
TEST(StorageRules, OutputOverInputOfAnotherTypeIsRefused) {
  const Shape shape{2, 8};
  std::vector<uint16_t> memory(16, to_bfloat16(1.5f).bits);
  memory[3] = to_bfloat16(-2.0f).bits;
  const std::vector<uint16_t> before = memory;
  try {
    layer_norm(AnyConstView(memory.data(), shape, DType::bfloat16), Shape{8},
               AnyMutableView(memory.data(), shape, DType::float16));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("y overlaps x"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("another type"), std::string::npos) << e.what();
  }
  EXPECT_EQ(memory, before);
  // The same type in place is allowed, and normalises.
  layer_norm(AnyConstView(memory.data(), shape, DType::bfloat16), Shape{8},
             AnyMutableView(memory.data(), shape, DType::bfloat16));
  EXPECT_NE(memory, before);
}

// Post-norm on 16-bit storage is the float32 op on the widened values, each output rounded
// once: bit for bit the nearest 16-bit value to the float32 op's result (whose own contract the
// float32 tests hold), forward and backward, with dropout.
TEST_P(SixteenBitStorage, PostNormIsTheFloat32OpRoundedOnce) {
  const DType dtype = storage();
  const int64_t rows = 7, dim = 200;
  const Shape shape{rows, dim}, normalized{dim}, row_shape{rows};
  const Stored x(random_floats(rows * dim, 41, -2.0f, 2.0f), dtype);
  const Stored s(random_floats(rows * dim, 42, -1.0f, 1.0f), dtype);
  const Stored dy(random_floats(rows * dim, 43), dtype);
  const Stored gamma(random_floats(dim, 44, 0.5f, 1.5f), dtype);
  const Stored beta(random_floats(dim, 45), dtype);
  const NormOptions options{NormKind::layer_norm, gamma.view({dim}), beta.view({dim}), false,
                            1e-5f};
  const DropoutOptions dropout{0.1f, 1234, 77};
  std::vector<uint16_t> y(rows * dim), dx(rows * dim), ds(rows * dim);
  std::vector<float> mean(rows), rstd(rows), dgamma(dim), dbeta(dim);
  add_norm_post(x.view(shape), s.view(shape), normalized, AnyMutableView(y.data(), shape, dtype),
                options, dropout, NormStats{{mean.data(), row_shape}, {rstd.data(), row_shape}});
  add_norm_post_backward(
      dy.view(shape), x.view(shape), s.view(shape), normalized,
      {AnyMutableView(dx.data(), shape, dtype), AnyMutableView(ds.data(), shape, dtype),
       MutableView{dgamma.data(), {dim}}, MutableView{dbeta.data(), {dim}}},
      options, dropout);

  const Shape param{dim};
  const NormOptions options32{NormKind::layer_norm, ConstView{gamma.wide.data(), param},
                              ConstView{beta.wide.data(), param}, false, 1e-5f};
  std::vector<float> y32(rows * dim), dx32(rows * dim), ds32(rows * dim), mean32(rows),
      rstd32(rows), dgamma32(dim), dbeta32(dim);
  add_norm_post(ConstView{x.wide.data(), shape}, ConstView{s.wide.data(), shape}, normalized,
                MutableView{y32.data(), shape}, options32, dropout,
                NormStats{{mean32.data(), row_shape}, {rstd32.data(), row_shape}});
  add_norm_post_backward(ConstView{dy.wide.data(), shape}, ConstView{x.wide.data(), shape},
                         ConstView{s.wide.data(), shape}, normalized,
                         {MutableView{dx32.data(), shape}, MutableView{ds32.data(), shape},
                          MutableView{dgamma32.data(), param}, MutableView{dbeta32.data(), param}},
                         options32, dropout);
  EXPECT_EQ(y, Stored(y32, dtype).bits);
  EXPECT_EQ(dx, Stored(dx32, dtype).bits);
  EXPECT_EQ(ds, Stored(ds32, dtype).bits);
  EXPECT_EQ(mean, mean32);
  EXPECT_EQ(rstd, rstd32);
  EXPECT_EQ(dgamma, dgamma32);
  EXPECT_EQ(dbeta, dbeta32);
  // The dropout really dropped: the comparison covers masked elements.
  int dropped = 0;
  for (int64_t i = 0; i < rows * dim; ++i) dropped += ds32[i] == 0.0f && dx32[i] != 0.0f;
  EXPECT_GT(dropped, 0) << "dropout p = 0.1 should drop some of " << rows * dim << " elements";
}

}  // namespace
}  // namespace addnorm
