// The AVX512_BF16 roundings (ops/cpu/native_bfloat16.hpp) against the integer emulation and the
// scalar rounding: the same bits for float32 patterns of every class (the float32 subnormals the
// instructions would flush to zero included, alone and among normal lanes), and the same outputs
// from the bfloat16 kernels, on every SIMD target. On a CPU without the instructions both sides
// are the emulation, and the tests check the emulation alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "addnorm/dtype.hpp"
#include "addnorm/ops.hpp"
#include "ops/cpu/convert.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/native_bfloat16.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;

// Sets the flag for one test and puts back the library's own choice however the test ends.
class NativeBfloat16OnEveryTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override {
    cpu::force_target(0);
    cpu::allow_native_bfloat16(true);
  }
};

// A stride through all 2^32 float32 patterns, then registers that mix float32 subnormals of
// every size with normal values, a register of subnormals only, rounding ties, the largest
// finite values (which round to infinity), infinities and NaNs with payloads.
std::vector<float> bfloat16_sweep() {
  std::vector<float> values;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4093) {
    values.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  }
  const uint32_t specials[] = {0x00000001u, 0x00007FFFu, 0x00008000u, 0x00018000u, 0x007F8000u,
                               0x007FFFFFu, 0x807FFFFFu, 0x80000001u, 0x00800000u, 0x3F808000u,
                               0x3F818000u, 0x7F7F7FFFu, 0x7F7F8000u, 0x7F7FFFFFu, 0x7F800000u,
                               0xFF800000u, 0x7F800001u, 0x7FC00000u, 0xFFFFFFFFu, 0x7FA02000u};
  for (const uint32_t bits : specials) {
    for (int k = 0; k < 33; ++k) values.push_back(k == 5 ? std::bit_cast<float>(bits) : 1.5f);
  }
  for (uint32_t k = 0; k < 64; ++k) values.push_back(std::bit_cast<float>(0x00010001u * (k + 1)));
  // A subnormal among normal values in the last 8 of a call of 24 (see below).
  while (values.size() % 24 != 0) values.push_back(1.0f);
  for (uint32_t k = 0; k < 48; ++k) values.push_back(k % 24 == 20 ? 1e-40f : 2.5f);
  return values;
}

TEST_P(NativeBfloat16OnEveryTarget, ConversionGivesTheScalarBits) {
  const std::vector<float> values = bfloat16_sweep();
  const auto count = static_cast<int64_t>(values.size());
  for (const bool native : {true, false}) {
    cpu::allow_native_bfloat16(native);
    for (const bool stream : {false, true}) {
      std::vector<uint16_t> narrow(values.size());
      cpu::from_float32(values.data(), narrow.data(), DType::bfloat16, count, stream);
      for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(narrow[i], to_bfloat16(values[i]).bits)
            << "float32 bits 0x" << std::hex << std::bit_cast<uint32_t>(values[i]) << std::dec
            << " native " << native << " stream " << stream;
      }
    }
    // In calls of 24 values: a whole register and half of one (on AVX3, 512 and 256 bits).
    std::vector<uint16_t> pieces(values.size());
    for (int64_t start = 0; start < count; start += 24) {
      cpu::from_float32(values.data() + start, pieces.data() + start, DType::bfloat16,
                        std::min<int64_t>(24, count - start));
    }
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(pieces[i], to_bfloat16(values[i]).bits)
          << "float32 bits 0x" << std::hex << std::bit_cast<uint32_t>(values[i]) << std::dec
          << " native " << native << " in pieces of 24";
    }
  }
}

// The bfloat16 forwards and backward give the same bits either way, on rows whose outputs are
// bfloat16 subnormals (a gamma of 1e-39, a float32 subnormal) or whose inputs are (h = x + r of
// subnormal bfloat16 values), as on ordinary rows.
TEST_P(NativeBfloat16OnEveryTarget, KernelsGiveTheSameBitsEitherWay) {
  constexpr int64_t kRows = 48;
  for (const int64_t dim : {int64_t{64}, int64_t{128}, int64_t{1024}, int64_t{72}}) {
    const Shape shape{kRows, dim}, normalized{dim}, row_shape{kRows};
    const auto count = static_cast<size_t>(kRows * dim);
    auto bf16_bits = [&](const std::vector<float>& values) {
      std::vector<uint16_t> bits(values.size());
      for (size_t i = 0; i < values.size(); ++i) bits[i] = to_bfloat16(values[i]).bits;
      return bits;
    };
    std::vector<uint16_t> x = bf16_bits(random_floats(count, 11, -3.0f, 3.0f));
    std::vector<uint16_t> r = bf16_bits(random_floats(count, 12, -3.0f, 3.0f));
    const std::vector<uint16_t> dy = bf16_bits(random_floats(count, 13));
    std::vector<float> gamma = random_floats(static_cast<size_t>(dim), 14, 0.5f, 1.5f);
    const std::vector<float> beta = random_floats(static_cast<size_t>(dim), 15, -0.1f, 0.1f);
    gamma[3] = 1e-39f;  // float32 subnormal: y = x_hat * gamma + beta, with beta[3] set to 0
    std::vector<float> beta_tiny = beta;
    beta_tiny[3] = 0.0f;
    for (int64_t j = 0; j < dim; ++j) {  // row 2: subnormal bfloat16 inputs
      x[static_cast<size_t>(2 * dim + j)] = static_cast<uint16_t>(1 + j % 120);
      r[static_cast<size_t>(2 * dim + j)] = static_cast<uint16_t>(0x8000 | (3 + j % 50));
    }
    struct Outputs {
      std::vector<uint16_t> y, h, y_pre, dx;
      std::vector<float> dgamma;
    };
    auto run = [&](bool native) {
      cpu::allow_native_bfloat16(native);
      Outputs o{std::vector<uint16_t>(count), std::vector<uint16_t>(count),
                std::vector<uint16_t>(count), std::vector<uint16_t>(count),
                std::vector<float>(static_cast<size_t>(dim))};
      const AnyConstView xv(x.data(), shape, DType::bfloat16), rv(r.data(), shape, DType::bfloat16);
      const NormOptions ln{.gamma = ConstView{gamma.data(), normalized},
                           .beta = ConstView{beta_tiny.data(), normalized},
                           .eps = 1e-5f};
      layer_norm(xv, normalized, AnyMutableView(o.y.data(), shape, DType::bfloat16), ln);
      NormOptions pre;
      pre.gamma = ConstView{gamma.data(), normalized};
      pre.beta = ConstView{beta.data(), normalized};
      add_norm_pre(xv, rv, normalized, AnyMutableView(o.h.data(), shape, DType::bfloat16),
                   AnyMutableView(o.y_pre.data(), shape, DType::bfloat16), pre);
      layer_norm_backward(AnyConstView(dy.data(), shape, DType::bfloat16), xv, normalized,
                          {AnyMutableView(o.dx.data(), shape, DType::bfloat16),
                           MutableView{o.dgamma.data(), normalized}, std::nullopt},
                          ln);
      return o;
    };
    const Outputs native = run(true), emulated = run(false);
    EXPECT_EQ(native.y, emulated.y) << "D = " << dim;
    EXPECT_EQ(native.h, emulated.h) << "D = " << dim;
    EXPECT_EQ(native.y_pre, emulated.y_pre) << "D = " << dim;
    EXPECT_EQ(native.dx, emulated.dx) << "D = " << dim;
    EXPECT_EQ(native.dgamma, emulated.dgamma) << "D = " << dim;
    // The subnormal outputs are there to be rounded: column 3 of y is x_hat * 1e-39.
    EXPECT_NE(emulated.y[3], 0) << "D = " << dim;
    EXPECT_EQ(emulated.y[3] & 0x7F80, 0) << "D = " << dim;
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, NativeBfloat16OnEveryTarget,
                         ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target_info) {
                           return cpu::target_name(target_info.param);
                         });

}  // namespace
}  // namespace addnorm
