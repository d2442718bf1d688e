// bfloat16 and float16 storage: the conversions (exhaustively, on every SIMD target), the
// norms with each tensor stored in its own type against float64, and the forward and backward
// kernels on 16-bit rows (norm_forward-inl.h, norm_backward-inl.h) on every target, with and
// without the fused residual add, streaming or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "addnorm/ops.hpp"
#include "ops/cpu/convert.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/reference/layer_norm.hpp"
#include "ops/reference/rms_norm.hpp"
#include "ops/storage.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::narrow_all;
using testing::random_floats;
using testing::widen;
using testing::widen_all;
using testing::widen_one;
using testing::within_storage_ulp;

// h = x + r and y = Norm(h) through add_norm_pre.
void pre_norm_forward(AnyConstView x, AnyConstView r, const Shape& normalized, AnyMutableView h,
                      AnyMutableView y, const NormOptions& options = {},
                      std::optional<NormStats> stats = {}) {
  add_norm_pre(x, r, normalized, h, y, options, stats);
}

// dx = Norm'(dy) at x through norm_backward, or with dh_next through add_norm_pre_backward (x
// then plays h).
void backward_of(AnyConstView dy, AnyConstView x, const Shape& normalized, const NormGrads& grads,
                 const NormOptions& options, std::optional<AnyConstView> dh_next = {}) {
  if (dh_next) {
    return add_norm_pre_backward(dy, dh_next, x, normalized, {grads.dx, grads.dgamma, grads.dbeta},
                                 options);
  }
  norm_backward(dy, x, normalized, grads, options);
}

TEST(Dtype, ScalarConversionsKnownValues) {
  EXPECT_EQ(to_float(bfloat16{0x3F80}), 1.0f);
  EXPECT_EQ(to_float(float16{0x3C00}), 1.0f);
  EXPECT_EQ(to_float(float16{0x7BFF}), 65504.0f);
  EXPECT_EQ(to_float(float16{0x0001}), std::ldexp(1.0f, -24));
  EXPECT_EQ(to_float(float16{0xC000}), -2.0f);
  EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3F80);
  EXPECT_EQ(to_float16(65504.0f).bits, 0x7BFF);
  EXPECT_EQ(to_float16(65520.0f).bits, 0x7C00);  // the tie above the largest rounds to Inf
  EXPECT_EQ(to_float16(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie to even: 0
  EXPECT_EQ(to_float16(std::ldexp(3.0f, -25)).bits, 0x0002);  // 1.5 units: even is 2
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(to_float(to_float16(std::nanf("")))));
}

// Narrowing rounds to the nearest representable value, ties to the even bit pattern.
void expect_round_to_nearest_even(float value, uint16_t bits, DType dtype) {
  if (std::isnan(value)) {
    EXPECT_TRUE(std::isnan(widen_one(bits, dtype)));
    return;
  }
  const double got = widen_one(bits, dtype);
  if (std::isinf(got)) {
    // Only values at or beyond the rounding threshold overflow.
    if (dtype == DType::float16) {
      EXPECT_GE(std::fabs(value), 65520.0f) << value;
    }
    return;
  }
  const double error = std::fabs(got - value);
  for (const int step : {-1, 1}) {
    const auto neighbour_bits = static_cast<uint16_t>(bits + step);
    const double neighbour = widen_one(neighbour_bits, dtype);
    if (std::isnan(neighbour) || (neighbour < 0) != (got < 0) || std::isinf(neighbour)) continue;
    const double other = std::fabs(neighbour - value);
    ASSERT_LE(error, other) << value << " -> " << got << " but " << neighbour << " is nearer";
    if (error == other) {
      ASSERT_EQ(bits & 1, 0) << value << ": a tie must round to the even pattern";
    }
  }
}

// The float64 reference backward of LayerNorm (layer) or RMSNorm with gamma, eps 1e-5, plus
// dh_next when given (the residual stream's gradient).
void reference_backward(bool layer, const std::vector<double>& dy, const std::vector<double>& x,
                        const std::vector<double>& gamma, int64_t rows, int64_t dim,
                        const std::vector<float>* dh_next, std::vector<double>& dx,
                        std::vector<double>& dgamma) {
  if (layer) {
    reference::layer_norm_backward<double>(dy.data(), x.data(), gamma.data(), nullptr, nullptr,
                                           dx.data(), dgamma.data(), nullptr, rows, dim, 1e-5);
  } else {
    reference::rms_norm_backward<double>(dy.data(), x.data(), gamma.data(), false, nullptr, nullptr,
                                         dx.data(), dgamma.data(), rows, dim, 1e-5);
  }
  if (dh_next) {
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += (*dh_next)[i];
  }
}

// The eps of every call and reference below, for both kinds.
constexpr float kEps = 1e-5f;

// The storage path's options: the norm, float32 gamma, eps.
NormOptions gamma_options(bool layer, const std::vector<float>& gamma, const Shape& normalized) {
  NormOptions options;
  options.eps = kEps;
  options.norm = layer ? NormKind::layer_norm : NormKind::rms_norm;
  options.gamma = AnyConstView(ConstView{gamma.data(), normalized});
  return options;
}

class ConversionsOnEveryTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override { cpu::force_target(0); }
};

TEST_P(ConversionsOnEveryTarget, WideningIsExactForEveryPattern) {
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> wide(all.size());
    cpu::to_float32(all.data(), dtype, wide.data(), static_cast<int64_t>(all.size()));
    for (uint32_t i = 0; i < 65536; ++i) {
      // NaNs too, bit for bit: the payload kept and quietened, as F16C widens a float16 NaN.
      const float want = widen_one(static_cast<uint16_t>(i), dtype);
      ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(want))
          << dtype_name(dtype) << " pattern " << i;
      if (!std::isnan(want)) {  // and the value is that of the bits, by the format's definition
        const int exponent = dtype == DType::float16 ? (i >> 10) & 0x1F : (i >> 7) & 0xFF;
        const int mantissa_bits = dtype == DType::float16 ? 10 : 7;
        const int bias = dtype == DType::float16 ? 15 : 127;
        const int top = dtype == DType::float16 ? 31 : 255;
        const double mantissa = i & ((1u << mantissa_bits) - 1);
        const double magnitude =
            exponent == top ? std::numeric_limits<double>::infinity()
            : exponent == 0
                ? std::ldexp(mantissa, 1 - bias - mantissa_bits)
                : std::ldexp(1.0 + std::ldexp(mantissa, -mantissa_bits), exponent - bias);
        ASSERT_EQ(static_cast<double>(wide[i]), (i & 0x8000) ? -magnitude : magnitude)
            << dtype_name(dtype) << " pattern " << i;
      }
    }
  }
}

// float32 values around every float16 rounding boundary (each midpoint between neighbouring
// float16 values, and the float32 values either side of it: below it rounds down, above it up,
// at it to the even pattern), both signs, with the float16 bits they must round to; and a
// stride through all 2^32 float32 patterns (infinities, NaNs with payloads and float32
// subnormals included), whose bits the scalar conversion gives.
struct Float16Sweep {
  std::vector<float> values;
  std::vector<int32_t> want;  // -1: as the scalar conversion rounds it
};
Float16Sweep float16_sweep() {
  Float16Sweep sweep;
  auto add = [&](float value, int32_t bits) {
    sweep.values.push_back(value);
    sweep.want.push_back(bits);
  };
  for (uint32_t low = 0; low < 0x7C00; ++low) {  // low and low + 1: finite, the last up to Inf
    const double a = to_float(float16{static_cast<uint16_t>(low)});
    const double b =
        low + 1 == 0x7C00 ? 65536.0 : to_float(float16{static_cast<uint16_t>(low + 1)});
    const auto midpoint = static_cast<float>((a + b) / 2);  // exact in float32
    const auto even = static_cast<int32_t>(low % 2 == 0 ? low : low + 1);
    for (const uint32_t sign : {0u, 0x8000u}) {
      const float s = sign ? -1.0f : 1.0f;
      add(s * midpoint, static_cast<int32_t>(sign) | even);
      add(s * std::nextafter(midpoint, 0.0f), static_cast<int32_t>(sign | low));
      add(s * std::nextafter(midpoint, 1e30f), static_cast<int32_t>(sign | (low + 1)));
    }
  }
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4093) {
    add(std::bit_cast<float>(static_cast<uint32_t>(bits)), -1);
  }
  for (const uint32_t bits : {0x7F800000u, 0xFF800000u, 0x7F800001u, 0x7FC00000u, 0xFFFFFFFFu,
                              0x7FA02000u, 0x00000001u, 0x807FFFFFu, 0x477FEFFFu, 0x477FF000u}) {
    add(std::bit_cast<float>(bits), -1);
  }
  return sweep;
}

// float16 narrowing on this target: the bits the sweep's boundaries require, the scalar
// conversion's bits everywhere (NaN payloads included), with and without streaming stores.
TEST_P(ConversionsOnEveryTarget, Float16NarrowingMatchesAtEveryRoundingBoundary) {
  const Float16Sweep sweep = float16_sweep();
  const auto count = static_cast<int64_t>(sweep.values.size());
  for (const bool stream : {false, true}) {
    std::vector<uint16_t> narrow(sweep.values.size());
    cpu::from_float32(sweep.values.data(), narrow.data(), DType::float16, count, stream);
    for (size_t i = 0; i < sweep.values.size(); ++i) {
      const uint16_t scalar = to_float16(sweep.values[i]).bits;
      ASSERT_EQ(narrow[i], scalar)
          << "float32 bits 0x" << std::hex << std::bit_cast<uint32_t>(sweep.values[i]);
      if (sweep.want[i] >= 0) {
        ASSERT_EQ(narrow[i], sweep.want[i])
            << "float32 bits 0x" << std::hex << std::bit_cast<uint32_t>(sweep.values[i]);
      }
    }
  }
}

// Every target converts to the same bits as the first (the best this machine runs: F16C's
// instructions from AVX2 on), both ways, NaNs included.
TEST(Conversions, EveryTargetGivesTheBestTargetsBits) {
  const Float16Sweep sweep = float16_sweep();
  const auto count = static_cast<int64_t>(sweep.values.size());
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<std::vector<uint16_t>> narrowed;
  std::vector<std::vector<uint32_t>> widened;
  for (const int64_t target : cpu::available_targets()) {
    cpu::force_target(target);
    std::vector<uint16_t> narrow(sweep.values.size());
    cpu::from_float32(sweep.values.data(), narrow.data(), DType::float16, count);
    std::vector<float> wide(all.size());
    cpu::to_float32(all.data(), DType::float16, wide.data(), 65536);
    narrowed.push_back(narrow);
    widened.push_back({});
    for (float v : wide) widened.back().push_back(std::bit_cast<uint32_t>(v));
    cpu::force_target(0);
    EXPECT_EQ(narrowed.back(), narrowed.front()) << cpu::target_name(target);
    EXPECT_EQ(widened.back(), widened.front()) << cpu::target_name(target);
  }
}

TEST_P(ConversionsOnEveryTarget, NarrowingRoundsToNearestEven) {
  std::vector<float> values = random_floats(20000, 5, -70000.0f, 70000.0f);
  const auto small = random_floats(20000, 6, -1e-4f, 1e-4f);
  values.insert(values.end(), small.begin(), small.end());
  // Exact ties for both formats, around 1 and in float16's subnormal range.
  for (int k = 0; k < 64; ++k) {
    values.push_back(1.0f + std::ldexp(static_cast<float>(2 * k + 1), -8));   // bfloat16 ties
    values.push_back(1.0f + std::ldexp(static_cast<float>(2 * k + 1), -11));  // float16 ties
    values.push_back(std::ldexp(static_cast<float>(2 * k + 1), -25));         // subnormal ties
  }
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(3.4e38f);
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    std::vector<uint16_t> narrow(values.size());
    cpu::from_float32(values.data(), narrow.data(), dtype, static_cast<int64_t>(values.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t scalar =
          dtype == DType::bfloat16 ? to_bfloat16(values[i]).bits : to_float16(values[i]).bits;
      ASSERT_EQ(narrow[i], scalar) << dtype_name(dtype) << " " << values[i];
      expect_round_to_nearest_even(values[i], narrow[i], dtype);
    }
    // With streaming stores (whole aligned registers, scalar ends): the same bits, whatever
    // the target's alignment and the count.
    for (const int64_t shift : {0, 1, 7}) {
      for (const int64_t count : {int64_t{5}, int64_t{70}, static_cast<int64_t>(values.size())}) {
        std::vector<uint16_t> streamed(values.size() + 64, 0xDEAD);
        const auto count_used = std::min<int64_t>(count, static_cast<int64_t>(values.size()));
        cpu::from_float32(values.data(), streamed.data() + shift, dtype, count_used, true);
        ASSERT_TRUE(
            std::equal(narrow.begin(), narrow.begin() + count_used, streamed.begin() + shift))
            << dtype_name(dtype) << " shift " << shift << " count " << count_used;
        ASSERT_EQ(streamed[static_cast<size_t>(shift + count_used)], 0xDEAD) << "wrote past";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, ConversionsOnEveryTarget,
                         ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target_info) {
                           return cpu::target_name(target_info.param);
                         });

TEST(MixedPrecision, NarrowStorageForwardAndBackwardMatchFloat64) {
  const int64_t rows = 37, dim = 200;
  const Shape shape{rows, dim}, normalized{dim};
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    for (const NormKind kind : {NormKind::layer_norm, NormKind::rms_norm}) {
      const bool layer = kind == NormKind::layer_norm;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + (layer ? " layer" : " rms"));
      const auto x_bits = narrow_all(random_floats(rows * dim, 1, -3.0f, 5.0f), dtype);
      const auto dy_bits = narrow_all(random_floats(rows * dim, 2), dtype);
      const auto gamma_bits = narrow_all(random_floats(dim, 3, 0.5f, 1.5f), dtype);
      const auto beta = random_floats(dim, 4);  // float32 beta beside narrow gamma
      const auto x = widen(widen_all(x_bits, dtype)), dy = widen(widen_all(dy_bits, dtype));
      const auto gamma = widen(widen_all(gamma_bits, dtype)), beta64 = widen(beta);
      std::vector<double> want_y(x.size()), want_dx(x.size()), want_dgamma(dim);
      if (layer) {
        reference::layer_norm_forward<double>(x.data(), gamma.data(), beta64.data(), want_y.data(),
                                              nullptr, nullptr, rows, dim, 1e-5);
        reference::layer_norm_backward<double>(dy.data(), x.data(), gamma.data(), nullptr, nullptr,
                                               want_dx.data(), want_dgamma.data(), nullptr, rows,
                                               dim, 1e-5);
      } else {
        reference::rms_norm_forward<double>(x.data(), gamma.data(), false, want_y.data(), nullptr,
                                            rows, dim, 1e-5);
        reference::rms_norm_backward<double>(dy.data(), x.data(), gamma.data(), false, nullptr,
                                             nullptr, want_dx.data(), want_dgamma.data(), rows, dim,
                                             1e-5);
      }
      NormOptions options;
      options.eps = kEps;
      options.norm = kind;
      options.gamma = AnyConstView(gamma_bits.data(), normalized, dtype);
      if (layer) options.beta = AnyConstView(ConstView{beta.data(), normalized});
      std::vector<uint16_t> y_bits(x.size()), dx_bits(x.size());
      std::vector<float> rstd(rows), dgamma(dim);
      norm(AnyConstView(x_bits.data(), shape, dtype), normalized,
           AnyMutableView(y_bits.data(), shape, dtype), options,
           NormStats{MutableView{dgamma.data(), {rows}}, {rstd.data(), {rows}}});
      EXPECT_TRUE(within_storage_ulp(widen_all(y_bits, dtype), want_y, dtype, 1.0));
      backward_of(AnyConstView(dy_bits.data(), shape, dtype),
                  AnyConstView(x_bits.data(), shape, dtype), normalized,
                  {AnyMutableView(dx_bits.data(), shape, dtype),
                   MutableView{dgamma.data(), normalized}, std::nullopt},
                  options);
      EXPECT_TRUE(within_storage_ulp(widen_all(dx_bits, dtype), want_dx, dtype,
                                     8 * testing::max_abs(want_dx)));
      EXPECT_TRUE(testing::within_ulps(dgamma, want_dgamma, 4, 8.0));
    }
  }
}

// A float32 residual stream beside bfloat16 sub-layer outputs and bfloat16 norm outputs.
TEST(MixedPrecision, Float32ResidualStreamWithBfloat16Activations) {
  const int64_t rows = 9, dim = 96;
  const Shape shape{rows, dim}, normalized{dim};
  const auto stream = random_floats(rows * dim, 7, -2.0f, 2.0f);
  const auto update_bits = narrow_all(random_floats(rows * dim, 8), DType::bfloat16);
  std::vector<float> h(stream.size());
  std::vector<uint16_t> y_bits(stream.size());
  pre_norm_forward(ConstView{stream.data(), shape},
                   AnyConstView(update_bits.data(), shape, DType::bfloat16), normalized,
                   MutableView{h.data(), shape},
                   AnyMutableView(y_bits.data(), shape, DType::bfloat16));
  const auto update = widen_all(update_bits, DType::bfloat16);
  for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h[i], stream[i] + update[i]);
  const auto h64 = widen(h);
  std::vector<double> want(h.size());
  reference::layer_norm_forward<double>(h64.data(), nullptr, nullptr, want.data(), nullptr, nullptr,
                                        rows, dim, 1e-5);
  EXPECT_TRUE(within_storage_ulp(widen_all(y_bits, DType::bfloat16), want, DType::bfloat16, 1.0));
}

// Every tensor of the pre-norm op in one 16-bit type: h = x + r rounded to that type, and y
// the norm of that h, against float64.
TEST(MixedPrecision, AllNarrowPreNormMatchesFloat64) {
  const int64_t rows = 11, dim = 160;
  const Shape shape{rows, dim}, normalized{dim};
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const auto x_bits = narrow_all(random_floats(rows * dim, 71, -2.0f, 2.0f), dtype);
    const auto r_bits = narrow_all(random_floats(rows * dim, 72, -1.0f, 3.0f), dtype);
    std::vector<uint16_t> h_bits(x_bits.size()), y_bits(x_bits.size());
    pre_norm_forward(AnyConstView(x_bits.data(), shape, dtype),
                     AnyConstView(r_bits.data(), shape, dtype), normalized,
                     AnyMutableView(h_bits.data(), shape, dtype),
                     AnyMutableView(y_bits.data(), shape, dtype));
    const auto x = widen_all(x_bits, dtype), r = widen_all(r_bits, dtype);
    std::vector<float> sum(x.size());
    for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + r[i];
    ASSERT_EQ(h_bits, narrow_all(sum, dtype));
    const auto h64 = widen(widen_all(h_bits, dtype));
    std::vector<double> want(h64.size());
    reference::layer_norm_forward<double>(h64.data(), nullptr, nullptr, want.data(), nullptr,
                                          nullptr, rows, dim, 1e-5);
    EXPECT_TRUE(within_storage_ulp(widen_all(y_bits, dtype), want, dtype, 1.0));
  }
}

// Through the public op (include/addnorm/ops.hpp), which validates before the storage path.
TEST(MixedPrecision, RejectsBadArgumentsByName) {
  std::vector<uint16_t> x(8), y(8);
  const Shape shape{2, 4};
  try {
    layer_norm(AnyConstView(x.data(), shape, DType::bfloat16), Shape{5},
               AnyMutableView(y.data(), shape, DType::bfloat16));
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("normalized_shape [5]"), std::string::npos);
  }
  EXPECT_THROW(layer_norm(AnyConstView(x.data(), shape, DType::bfloat16), Shape{4},
                          AnyMutableView(y.data(), Shape{4, 2}, DType::bfloat16)),
               Error);
  // y partly over x is refused; y exactly x with the same storage type is allowed.
  EXPECT_THROW(layer_norm(AnyConstView(x.data(), shape, DType::bfloat16), Shape{4},
                          AnyMutableView(x.data() + 1, Shape{2, 3}, DType::bfloat16)),
               Error);
  EXPECT_NO_THROW(layer_norm(AnyConstView(x.data(), shape, DType::bfloat16), Shape{4},
                             AnyMutableView(x.data(), shape, DType::bfloat16)));
}

// The direct 16-bit forward (x and y of one 16-bit type) on every SIMD target, on rows that
// stress it, against float64 from the same (widened) inputs; mean and rstd within a few
// float32 ulp. Targets without vector code for a type stage through float32: the same bound.
class NarrowNormOnEveryTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override { cpu::force_target(0); }
};

std::vector<float> stress_rows(const std::string& kind, int64_t rows, int64_t dim, DType dtype) {
  auto x = random_floats(static_cast<size_t>(rows * dim), 61, -2.0f, 3.0f);
  if (kind == "large_mean") {
    for (float& v : x) v = 300.0f + v;  // bfloat16 spacing 2 there: few distinct values
  } else if (kind == "constant_row") {
    for (int64_t i = 0; i < dim; ++i) x[static_cast<size_t>(dim + i)] = 1.5f;
  } else if (kind == "near_max") {
    // Mean near the largest finite value: x - mean overflows float32 for the negative ones.
    const float big = dtype == DType::bfloat16 ? 3e38f : 6e4f;
    for (size_t i = 0; i < x.size(); ++i) x[i] = i % 7 == 3 ? -big : big;
  } else if (kind == "outliers_first") {
    // The mean estimate from a row's first 16 values is far off: the kernel's second pass.
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t i = 0; i < std::min<int64_t>(dim, 16); ++i) {
        x[static_cast<size_t>(row * dim + i)] = dim > 64 ? 40.0f : 5.0f;
      }
    }
  } else if (kind == "nan_row") {
    x[static_cast<size_t>(dim + dim / 2)] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

// Calls of fewer than 4 rows (decoding) skip the per-call set-up (the bfloat16 pairs, the check
// of gamma and beta for NaN): 2 rows take that path, 5 the other.
TEST_P(NarrowNormOnEveryTarget, MatchesFloat64) {
  for (const int64_t rows : {2, 5}) {
    for (const DType dtype : {DType::bfloat16, DType::float16}) {
      for (const std::string kind :
           {"ordinary", "large_mean", "constant_row", "nan_row", "outliers_first", "near_max"}) {
        for (const int64_t dim : {1, 7, 33, 64, 128, 200, 1000}) {
          for (int affine = 0; affine < 4; ++affine) {
            // 0: LayerNorm gamma+beta, 1: LayerNorm beta only, 2: RMSNorm gamma, 3: RMSNorm
            // 1+gamma.
            const bool layer = affine < 2;
            SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + kind + " dim " +
                         std::to_string(dim) + " affine " + std::to_string(affine) + " rows " +
                         std::to_string(rows));
            const Shape shape{rows, dim}, normalized{dim};
            const auto x_bits = narrow_all(stress_rows(kind, rows, dim, dtype), dtype);
            const auto gamma = random_floats(static_cast<size_t>(dim), 62, 0.5f, 1.5f);
            const auto beta = random_floats(static_cast<size_t>(dim), 63);
            const auto x = widen(widen_all(x_bits, dtype));
            std::vector<double> scale(static_cast<size_t>(dim)), shift(static_cast<size_t>(dim));
            for (size_t i = 0; i < scale.size(); ++i) {
              scale[i] = affine == 1 ? 1.0 : affine == 3 ? 1.0 + gamma[i] : gamma[i];
              shift[i] = layer ? beta[i] : 0.0;
            }
            std::vector<double> want_y(x.size()), want_mean(rows), want_rstd(rows);
            if (layer) {
              reference::layer_norm_forward<double>(x.data(), scale.data(), shift.data(),
                                                    want_y.data(), want_mean.data(),
                                                    want_rstd.data(), rows, dim, 1e-5);
            } else {
              reference::rms_norm_forward<double>(x.data(), scale.data(), false, want_y.data(),
                                                  want_rstd.data(), rows, dim, 1e-5);
            }
            NormOptions options;
            options.eps = kEps;
            options.eps = kEps;
            options.eps = kEps;
            options.norm = layer ? NormKind::layer_norm : NormKind::rms_norm;
            if (affine != 1) options.gamma = AnyConstView(ConstView{gamma.data(), normalized});
            if (layer) options.beta = AnyConstView(ConstView{beta.data(), normalized});
            options.zero_centered_gamma = affine == 3;
            std::vector<uint16_t> y_bits(x.size());
            std::vector<float> mean(rows), rstd(rows);
            norm(AnyConstView(x_bits.data(), shape, dtype), normalized,
                 AnyMutableView(y_bits.data(), shape, dtype), options,
                 NormStats{MutableView{mean.data(), {rows}}, {rstd.data(), {rows}}});
            const auto y = widen_all(y_bits, dtype);
            for (int64_t row = 0; row < rows; ++row) {
              const auto at = static_cast<size_t>(row * dim);
              const std::vector<float> got(y.begin() + static_cast<std::ptrdiff_t>(at),
                                           y.begin() + static_cast<std::ptrdiff_t>(at + dim));
              const std::vector<double> want(
                  want_y.begin() + static_cast<std::ptrdiff_t>(at),
                  want_y.begin() + static_cast<std::ptrdiff_t>(at + dim));
              if (kind == "nan_row" && row == 1) {
                for (float v : got) ASSERT_TRUE(std::isnan(v));
                ASSERT_TRUE(std::isnan(rstd[1]));
                continue;
              }
              EXPECT_TRUE(within_storage_ulp(got, want, dtype, 1.0)) << "row " << row;
              EXPECT_NEAR(rstd[static_cast<size_t>(row)], want_rstd[static_cast<size_t>(row)],
                          1e-6 * want_rstd[static_cast<size_t>(row)]);
              if (layer) {
                EXPECT_NEAR(mean[static_cast<size_t>(row)], want_mean[static_cast<size_t>(row)],
                            1e-6 * (std::fabs(want_mean[static_cast<size_t>(row)]) + 1));
              }
            }
          }
        }
      }
    }
  }
}

// Runs body(dtype, dim, layer, with_dh) over both 16-bit types, dims 7, 64, 128 and 200, and the
// four variants: LayerNorm or RMSNorm, with or without dh_next.
template <class Body>
void for_each_backward_variant(const Body& body) {
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    for (const int64_t dim : {7, 64, 128, 200}) {
      for (int variant = 0; variant < 4; ++variant) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " dim " + std::to_string(dim) + " variant " +
                     std::to_string(variant));
        body(dtype, dim, variant % 2 == 0, variant >= 2);
      }
    }
  }
}

// The backward on rows stored in one 16-bit type (read and written directly where the target
// can), on every target, against float64: LayerNorm and RMSNorm, with and without a 16-bit
// dh_next, in place (dx over dy) and not, in groups of four rows and single rows.
TEST_P(NarrowNormOnEveryTarget, BackwardMatchesFloat64) {
  const int64_t rows = 9;
  for_each_backward_variant([&](DType dtype, int64_t dim, bool layer, bool with_dh) {
    const Shape shape{rows, dim}, normalized{dim};
    const auto count = static_cast<size_t>(rows * dim);
    const auto x_bits = narrow_all(random_floats(count, 81, -2.0f, 3.0f), dtype);
    auto dy_bits = narrow_all(random_floats(count, 82), dtype);
    const auto dh_bits = narrow_all(random_floats(count, 83), dtype);
    const auto gamma = random_floats(static_cast<size_t>(dim), 84, 0.5f, 1.5f);
    const auto x = widen(widen_all(x_bits, dtype)), dy = widen(widen_all(dy_bits, dtype));
    const auto dh = widen_all(dh_bits, dtype);
    const auto g64 = widen(gamma);
    std::vector<double> want_dx(count), want_dgamma(static_cast<size_t>(dim));
    reference_backward(layer, dy, x, g64, rows, dim, with_dh ? &dh : nullptr, want_dx, want_dgamma);
    const NormOptions options = gamma_options(layer, gamma, normalized);
    std::vector<float> dgamma(static_cast<size_t>(dim));
    // dx written over dy (an allowed alias) in the variants with dh_next.
    std::vector<uint16_t> separate(count);
    uint16_t* dx_bits = with_dh ? dy_bits.data() : separate.data();
    backward_of(AnyConstView(dy_bits.data(), shape, dtype),
                AnyConstView(x_bits.data(), shape, dtype), normalized,
                {AnyMutableView(dx_bits, shape, dtype), MutableView{dgamma.data(), normalized},
                 std::nullopt},
                options,
                with_dh ? std::optional<AnyConstView>(AnyConstView(dh_bits.data(), shape, dtype))
                        : std::nullopt);
    const std::vector<uint16_t> got(dx_bits, dx_bits + count);
    EXPECT_TRUE(
        within_storage_ulp(widen_all(got, dtype), want_dx, dtype, 8 * testing::max_abs(want_dx)));
    EXPECT_TRUE(testing::within_ulps(dgamma, want_dgamma, 4, 8.0));
  });
}

// Row by row, a 16-bit output (widened) within one unit of its storage type of the float64
// result; with nan_row, the stress rows' row 1 holds a NaN and must come out all NaN.
void expect_rows_within_unit(const std::vector<float>& y, const std::vector<double>& want_y,
                             int64_t rows, int64_t dim, DType dtype, bool nan_row) {
  for (int64_t row = 0; row < rows; ++row) {
    const auto at = static_cast<std::ptrdiff_t>(row * dim);
    const std::vector<float> got(y.begin() + at, y.begin() + at + dim);
    const std::vector<double> want(want_y.begin() + at, want_y.begin() + at + dim);
    if (nan_row && row == 1) {
      for (float v : got) ASSERT_TRUE(std::isnan(v));
      continue;
    }
    EXPECT_TRUE(within_storage_ulp(got, want, dtype, 1.0)) << "row " << row;
  }
}

// Pre-norm with every tensor in one 16-bit type, run by the forward kernel directly on every
// target that takes the type: h = x + r rounded once to the type, y = Norm(h) against float64
// (in place, h over x, too), LayerNorm and RMSNorm.
TEST_P(NarrowNormOnEveryTarget, PreNormMatchesFloat64) {
  const int64_t rows = 5;
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    for (const std::string kind :
         {"ordinary", "large_mean", "nan_row", "outliers_first", "constant_row", "near_max"}) {
      // 64, 80 and 128: short rows, a group at a time in float32 lanes (norm_forward-inl.h).
      for (const int64_t dim : {1, 7, 64, 80, 128, 203, 1000}) {
        for (const bool layer : {true, false}) {
          for (const bool in_place : {false, true}) {
            SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + kind + " dim " +
                         std::to_string(dim) + (layer ? " layer" : " rms") +
                         (in_place ? " in place" : ""));
            const Shape shape{rows, dim}, normalized{dim};
            auto x_bits = narrow_all(stress_rows(kind, rows, dim, dtype), dtype);
            const auto r_bits = narrow_all(
                random_floats(static_cast<size_t>(rows * dim), 73, -0.25f, 0.25f), dtype);
            const auto gamma = random_floats(static_cast<size_t>(dim), 74, 0.5f, 1.5f);
            const auto x = widen_all(x_bits, dtype), r = widen_all(r_bits, dtype);
            std::vector<float> sum(x.size());
            for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + r[i];
            const auto want_h_bits = narrow_all(sum, dtype);
            const auto h64 = widen(widen_all(want_h_bits, dtype));
            std::vector<double> want_y(h64.size()), want_rstd(rows);
            std::vector<double> gamma64(gamma.begin(), gamma.end());
            if (layer) {
              reference::layer_norm_forward<double>(h64.data(), gamma64.data(), nullptr,
                                                    want_y.data(), nullptr, want_rstd.data(), rows,
                                                    dim, 1e-5);
            } else {
              reference::rms_norm_forward<double>(h64.data(), gamma64.data(), false, want_y.data(),
                                                  want_rstd.data(), rows, dim, 1e-5);
            }
            NormOptions options;
            options.eps = kEps;
            options.eps = kEps;
            options.eps = kEps;
            options.norm = layer ? NormKind::layer_norm : NormKind::rms_norm;
            options.gamma = AnyConstView(ConstView{gamma.data(), normalized});
            std::vector<uint16_t> separate_h(x_bits.size()), y_bits(x_bits.size());
            uint16_t* h_bits = in_place ? x_bits.data() : separate_h.data();
            std::vector<float> mean(rows), rstd(rows);
            pre_norm_forward(AnyConstView(x_bits.data(), shape, dtype),
                             AnyConstView(r_bits.data(), shape, dtype), normalized,
                             AnyMutableView(h_bits, shape, dtype),
                             AnyMutableView(y_bits.data(), shape, dtype), options,
                             NormStats{MutableView{mean.data(), {rows}}, {rstd.data(), {rows}}});
            ASSERT_EQ(std::vector<uint16_t>(h_bits, h_bits + x_bits.size()), want_h_bits);
            expect_rows_within_unit(widen_all(y_bits, dtype), want_y, rows, dim, dtype,
                                    kind == "nan_row");
            for (int64_t row = 0; row < rows; ++row) {
              if (kind == "nan_row" && row == 1) continue;
              EXPECT_NEAR(rstd[static_cast<size_t>(row)], want_rstd[static_cast<size_t>(row)],
                          1e-6 * want_rstd[static_cast<size_t>(row)]);
            }
          }
        }
      }
    }
  }
}

// The backward of a float32 residual stream with a 16-bit branch, run by the kernels directly:
// x, dh_next and dx float32, dy 16-bit, against float64 from the same inputs. dx is float32, so
// it is held to a few float32 ulp of its scale, as the float32 backward is.
TEST_P(NarrowNormOnEveryTarget, BackwardWithFloat32StreamMatchesFloat64) {
  const int64_t rows = 9;
  for_each_backward_variant([&](DType dtype, int64_t dim, bool layer, bool with_dh) {
    const Shape shape{rows, dim}, normalized{dim};
    const auto count = static_cast<size_t>(rows * dim);
    const auto x = random_floats(count, 91, -2.0f, 3.0f);
    const auto dy_bits = narrow_all(random_floats(count, 92), dtype);
    auto dh = random_floats(count, 93);
    const auto gamma = random_floats(static_cast<size_t>(dim), 94, 0.5f, 1.5f);
    const auto x64 = widen(x), dy64 = widen(widen_all(dy_bits, dtype)), g64 = widen(gamma);
    std::vector<double> want_dx(count), want_dgamma(static_cast<size_t>(dim));
    reference_backward(layer, dy64, x64, g64, rows, dim, with_dh ? &dh : nullptr, want_dx,
                       want_dgamma);
    const NormOptions options = gamma_options(layer, gamma, normalized);
    std::vector<float> dgamma(static_cast<size_t>(dim));
    // dx written over dh_next (an allowed alias: the same type) in the variants with it.
    std::vector<float> separate(count);
    float* dx = with_dh ? dh.data() : separate.data();
    backward_of(AnyConstView(dy_bits.data(), shape, dtype), ConstView{x.data(), shape}, normalized,
                {MutableView{dx, shape}, MutableView{dgamma.data(), normalized}, std::nullopt},
                options,
                with_dh ? std::optional<AnyConstView>(ConstView{dh.data(), shape}) : std::nullopt);
    const std::vector<float> got(dx, dx + count);
    EXPECT_TRUE(testing::within_ulps(got, want_dx, 8, testing::max_abs(want_dx)));
    EXPECT_TRUE(testing::within_ulps(dgamma, want_dgamma, 4, 8.0));
  });
}

// A float32 residual stream (x and h) with a 16-bit branch (r and y), run by the forward kernel
// directly (no float32 staging) on every target that takes the type: h = x + r in float32
// exactly, y = Norm(h) rounded once to the branch type, against float64. Without r: x float32,
// y 16-bit. Streaming stores (a call above the threshold, through cpu::norm_forward) give the
// same bits as the ordinary ones.
TEST_P(NarrowNormOnEveryTarget, Float32StreamWithNarrowBranchMatchesFloat64) {
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    for (const std::string kind : {"ordinary", "large_mean", "nan_row", "outliers_first"}) {
      for (const int64_t dim : {1, 7, 64, 203}) {
        for (const bool residual : {false, true}) {
          for (const bool layer : {true, false}) {
            SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + kind + " dim " +
                         std::to_string(dim) + (residual ? " residual" : "") +
                         (layer ? " layer" : " rms"));
            const int64_t rows = 5;
            const Shape shape{rows, dim}, normalized{dim};
            const auto x = stress_rows(kind, rows, dim, DType::float32);
            const auto r_bits =
                narrow_all(random_floats(static_cast<size_t>(rows * dim), 75, -0.5f, 0.5f), dtype);
            const auto gamma = random_floats(static_cast<size_t>(dim), 76, 0.5f, 1.5f);
            const auto beta = random_floats(static_cast<size_t>(dim), 77);
            const auto r = widen_all(r_bits, dtype);
            std::vector<float> want_h(x);
            if (residual) {
              for (size_t i = 0; i < x.size(); ++i) want_h[i] = x[i] + r[i];
            }
            const auto h64 = widen(want_h);
            std::vector<double> gamma64(gamma.begin(), gamma.end()),
                beta64(beta.begin(), beta.end()), want_y(h64.size());
            if (layer) {
              reference::layer_norm_forward<double>(h64.data(), gamma64.data(), beta64.data(),
                                                    want_y.data(), nullptr, nullptr, rows, dim,
                                                    1e-5);
            } else {
              reference::rms_norm_forward<double>(h64.data(), gamma64.data(), false, want_y.data(),
                                                  nullptr, rows, dim, 1e-5);
            }
            NormOptions options;
            options.eps = kEps;
            options.eps = kEps;
            options.eps = kEps;
            options.norm = layer ? NormKind::layer_norm : NormKind::rms_norm;
            options.gamma = AnyConstView(ConstView{gamma.data(), normalized});
            if (layer) options.beta = AnyConstView(ConstView{beta.data(), normalized});
            std::vector<float> h(x.size());
            std::vector<uint16_t> y_bits(x.size());
            if (residual) {
              pre_norm_forward(ConstView{x.data(), shape},
                               AnyConstView(r_bits.data(), shape, dtype), normalized,
                               MutableView{h.data(), shape},
                               AnyMutableView(y_bits.data(), shape, dtype), options);
              for (size_t i = 0; i < h.size(); ++i) {
                if (!std::isnan(want_h[i])) {
                  ASSERT_EQ(h[i], want_h[i]) << "element " << i;
                }
              }
            } else {
              norm(ConstView{x.data(), shape}, normalized,
                   AnyMutableView(y_bits.data(), shape, dtype), options);
            }
            expect_rows_within_unit(widen_all(y_bits, dtype), want_y, rows, dim, dtype,
                                    kind == "nan_row");
          }
        }
      }
    }
  }
}

// Streaming stores (whole aligned registers) give the same bits as ordinary ones, at every
// alignment of y (and of h with the fused residual add), for one 16-bit type throughout and for
// a float32 stream (x, h) with a 16-bit branch (r, y).
TEST_P(NarrowNormOnEveryTarget, StreamingStoresGiveTheSameBits) {
  const int64_t rows = 6;
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    for (const bool residual : {false, true}) {
      for (const bool float32_stream : {false, true}) {
        for (const int64_t dim : {5, 64, 203}) {
          for (const int64_t shift : {0, 1, 9}) {
            const auto x_floats = random_floats(static_cast<size_t>(rows * dim), 64);
            const auto x_bits = narrow_all(x_floats, dtype);
            const auto r_bits =
                narrow_all(random_floats(static_cast<size_t>(rows * dim), 67), dtype);
            const auto gamma = random_floats(static_cast<size_t>(dim), 65, 0.5f, 1.5f);
            std::vector<std::vector<uint16_t>> outputs;
            for (const bool stream : {false, true}) {
              std::vector<uint16_t> y(x_bits.size() + 64), h(x_bits.size() + 64);
              std::vector<float> h_floats(x_bits.size() + 64);
              cpu::NormForward args;
              args.x = float32_stream ? static_cast<const void*>(x_floats.data()) : x_bits.data();
              args.residual = residual ? r_bits.data() : nullptr;
              args.h = !residual        ? nullptr
                       : float32_stream ? static_cast<void*>(h_floats.data() + shift)
                                        : h.data() + shift;
              args.y = y.data() + shift;
              args.storage = float32_stream ? DType::float32 : dtype;
              args.branch_storage = dtype;
              args.gamma = gamma.data();
              args.rows = rows;
              args.dim = dim;
              args.eps = 1e-5;
              args.stream_outputs = stream;
              cpu::norm_forward_range(args, 0, rows);
              y.insert(y.end(), h.begin(), h.end());
              for (float v : h_floats)
                y.push_back(static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16));
              for (float v : h_floats)
                y.push_back(static_cast<uint16_t>(std::bit_cast<uint32_t>(v)));
              outputs.push_back(y);
            }
            EXPECT_EQ(outputs[0], outputs[1])
                << dtype_name(dtype) << " dim " << dim << " shift " << shift
                << (residual ? " residual" : "") << (float32_stream ? " float32 stream" : "");
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, NarrowNormOnEveryTarget,
                         ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target_info) {
                           return cpu::target_name(target_info.param);
                         });

// A call above the streaming threshold equals the same rows in small calls, bit for bit.
TEST(MixedPrecision, LargeBfloat16CallEqualsSmallOnes) {
  const int64_t dim = 2000, rows = 2100, part = 700;  // 8.0 MiB of bfloat16
  ASSERT_TRUE(cpu::streams_output(rows * dim * 2));
  ASSERT_FALSE(cpu::streams_output(part * dim * 2));
  const auto x = narrow_all(random_floats(static_cast<size_t>(rows * dim), 66), DType::bfloat16);
  const Shape normalized{dim};
  std::vector<uint16_t> large(x.size()), small(x.size());
  norm(AnyConstView(x.data(), {rows, dim}, DType::bfloat16), normalized,
       AnyMutableView(large.data(), {rows, dim}, DType::bfloat16));
  for (int64_t first = 0; first < rows; first += part) {
    const auto at = static_cast<size_t>(first * dim);
    norm(AnyConstView(x.data() + at, {part, dim}, DType::bfloat16), normalized,
         AnyMutableView(small.data() + at, {part, dim}, DType::bfloat16));
  }
  EXPECT_TRUE(large == small);
}

}  // namespace
}  // namespace addnorm
