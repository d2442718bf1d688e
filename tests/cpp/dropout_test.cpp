// Dropout: the Philox generator against its published known answers, the mask's independence
// from how a tensor is split, keep rate, scaling, and backward reuse of the same mask.
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <cmath>

#include "addnorm/ops.hpp"
#include "ops/cpu/dropout.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/reference/philox.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

// Known-answer vectors from Random123's kat_vectors for philox4x32_10.
TEST(Philox, MatchesPublishedKnownAnswers) {
  using reference::philox4x32_10;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          {0xffffffffu, 0xffffffffu}),
            (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

std::vector<uint8_t> mask_of(int64_t count, const DropoutOptions& options) {
  std::vector<uint8_t> mask(static_cast<size_t>(count));
  dropout_mask({mask.data(), {count}}, options);
  return mask;
}

TEST(Dropout, MaskDependsOnlyOnSeedAndElementIndex) {
  const DropoutOptions whole{0.3f, 1234, 0};
  const auto full = mask_of(1000, whole);
  // The same elements generated as three pieces with offsets give the same mask.
  for (const int64_t split : {1, 3, 500, 999}) {
    const auto head = mask_of(split, {0.3f, 1234, 0});
    const auto tail = mask_of(1000 - split, {0.3f, 1234, static_cast<uint64_t>(split)});
    for (int64_t i = 0; i < 1000; ++i) {
      EXPECT_EQ(full[i], i < split ? head[i] : tail[i - split]) << "split " << split;
    }
  }
  EXPECT_NE(full, mask_of(1000, {0.3f, 1235, 0}));  // another seed, another mask
}

TEST(Dropout, KeepRateIsOneMinusP) {
  for (const float p : {0.1f, 0.5f, 0.9f}) {
    const int64_t count = 200000;
    const auto mask = mask_of(count, {p, 7, 0});
    double kept = 0;
    for (uint8_t m : mask) kept += m;
    // Binomial standard deviation is at most 0.0012 of the count here; allow 5 of them.
    EXPECT_NEAR(kept / double(count), 1.0 - p, 0.006) << p;
  }
  for (uint8_t m : mask_of(1000, {0.0f, 7, 0})) EXPECT_EQ(m, 1);
}

TEST(Dropout, ForwardScalesKeptValuesAndBackwardReusesTheMask) {
  const DropoutOptions options{0.25f, 99, 5};
  const auto x = testing::random_floats(4096, 3);
  const auto mask = mask_of(4096, options);
  std::vector<float> y(x.size()), dx(x.size());
  dropout({x.data(), {64, 64}}, {y.data(), {64, 64}}, options);
  dropout_backward({x.data(), {64, 64}}, {dx.data(), {64, 64}}, options);
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = mask[i] ? static_cast<float>(double(x[i]) * (1.0 / 0.75)) : 0.0f;
    EXPECT_EQ(y[i], want) << i;
    EXPECT_EQ(dx[i], want) << i;  // d(dropout)/dx is the same mask and scale
  }
}

// 16-bit dropout on every compiled target: each output is the float32 dropout of the widened
// input rounded once to the storage type (and p = 0 the identity), for lengths off the vector
// and block boundaries, offsets off the stream's blocks of four, in place and out of place, and
// the backward the same as the forward. A float32 output for a 16-bit input is refused by name.
TEST(Dropout, SixteenBitStorageIsTheFloat32ResultRoundedOnce) {
  for (int64_t target : cpu::available_targets()) {
    cpu::force_target(target);
    for (const DType dtype : {DType::bfloat16, DType::float16}) {
      for (const int64_t count : {int64_t{1}, int64_t{37}, int64_t{2048}, int64_t{5003}}) {
        for (const DropoutOptions options :
             {DropoutOptions{0.3f, 11, 5}, DropoutOptions{0.0f, 11, 5}}) {
          SCOPED_TRACE(cpu::target_name(target) + " " + dtype_name(dtype) + " count " +
                       std::to_string(count) + " p " + std::to_string(options.p));
          const Shape shape{count};
          const auto x = testing::narrow_all(testing::random_floats(count, 21, -3, 3), dtype);
          const auto wide = testing::widen_all(x, dtype);
          std::vector<float> want_wide(wide.size());
          dropout({wide.data(), shape}, {want_wide.data(), shape}, options);
          const auto want = testing::narrow_all(want_wide, dtype);
          std::vector<uint16_t> y(x.size()), dx(x.size());
          auto in_place = x;
          dropout({x.data(), shape, dtype}, {y.data(), shape, dtype}, options);
          dropout({in_place.data(), shape, dtype}, {in_place.data(), shape, dtype}, options);
          dropout_backward({x.data(), shape, dtype}, {dx.data(), shape, dtype}, options);
          EXPECT_EQ(y, want);
          EXPECT_EQ(in_place, want);
          EXPECT_EQ(dx, want);
        }
      }
    }
  }
  cpu::force_target(0);
  // A tensor the threads split (2^18 values), from offset 0: the same bits on 1 and 2 threads.
  const int64_t count = int64_t{1} << 18;
  const auto large = testing::narrow_all(testing::random_floats(count, 22), DType::bfloat16);
  const int saved_threads = omp_get_max_threads();
  std::vector<std::vector<uint16_t>> by_threads;
  for (const int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<uint16_t> out(large.size());
    dropout({large.data(), {count}, DType::bfloat16}, {out.data(), {count}, DType::bfloat16},
            {0.2f, 5, 0});
    by_threads.push_back(std::move(out));
  }
  omp_set_num_threads(saved_threads);
  EXPECT_EQ(by_threads[0], by_threads[1]);
  const std::vector<uint16_t> x(8, to_bfloat16(1.5f).bits);
  std::vector<float> y(8, 7.0f);
  try {
    dropout({x.data(), {8}, DType::bfloat16}, MutableView{y.data(), {8}}, {0.5f, 1, 0});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("y is stored as float32, expected bfloat16 like x"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(y, std::vector<float>(8, 7.0f));
}

// The SIMD mask generator equals the scalar definition for any start and length, on every
// compiled target. Offsets from 2^34 on put a nonzero high word in the block counter, and
// 2^34 - 37 runs a step of blocks across 2^32 (where that word carries).
TEST(Dropout, SimdStreamEqualsTheScalarDefinition) {
  for (int64_t target : cpu::available_targets()) {
    cpu::force_target(target);
    for (const uint64_t first : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{1} << 33,
                                 (uint64_t{1} << 34) - 37, (uint64_t{1} << 40) + 3}) {
      std::vector<uint32_t> bits(1000);
      cpu::philox_bits(0x123456789ull, first, bits.data(), 1000);
      for (uint64_t i = 0; i < 1000; ++i) {
        ASSERT_EQ(bits[i], reference::philox_bits(0x123456789ull, first + i))
            << cpu::target_name(target) << " element " << first + i;
      }
    }
  }
  cpu::force_target(0);
}

// dropout_mask keeps element i exactly when the definition does (its bits at or above
// floor(p 2^32)), for any offset and length and on every compiled target.
TEST(Dropout, MaskEqualsTheDefinitionOnEveryTarget) {
  for (int64_t target : cpu::available_targets()) {
    cpu::force_target(target);
    for (const float p : {0.1f, 0.5f, 0.97f}) {
      const uint32_t threshold = reference::dropout_threshold(p);
      for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{1} << 33,
                                    (uint64_t{1} << 34) - 37, (uint64_t{1} << 40) + 3}) {
        const auto mask = mask_of(1003, {p, 0x9876ull, offset});
        for (uint64_t i = 0; i < mask.size(); ++i) {
          ASSERT_EQ(mask[i], reference::dropout_keeps(0x9876ull, offset + i, threshold) ? 1 : 0)
              << cpu::target_name(target) << " p " << p << " element " << offset + i;
        }
      }
    }
  }
  cpu::force_target(0);
}

}  // namespace
}  // namespace addnorm
