// BatchNorm's fast kernels on every SIMD target compiled into this binary, against the float64
// reference: training and inference forwards and backwards, on data that stresses the numerics
// (a mean far larger than the spread, denormal spreads, values near the float32 maximum, a NaN in
// one channel), with length 1 (vectors across channels) and length > 1 (vectors along the
// length), channel counts that are not a multiple of any vector width, and outputs large enough
// for streaming stores. Also: in-place forwards and thread-count determinism.
#include <gtest/gtest.h>
#include <omp.h>
#if defined(__unix__)
#include <sys/mman.h>
#endif

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/reference/batch_norm.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;
using testing::widen;
using testing::within_ulps;

struct Case {
  std::string kind;
  int64_t batch, channels, length;
};

Shape shape_of(const Case& c) {
  return c.length == 1 ? Shape{c.batch, c.channels} : Shape{c.batch, c.channels, c.length};
}

// x with channel-dependent contents, by kind.
std::vector<float> make_input(const Case& c, uint32_t seed) {
  auto x = random_floats(static_cast<size_t>(c.batch * c.channels * c.length), seed, -2.0f, 3.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    const auto channel = static_cast<int64_t>(i) / c.length % c.channels;
    if (c.kind == "large_mean") {
      // Means from 1e6 to ~1.7e7, spreads of 0.1: the hi + lo split must centre exactly.
      x[i] = 1e6f * static_cast<float>(1 + channel % 17) + x[i] * 1e-1f;
    } else if (c.kind == "tiny") {
      x[i] *= 1e-40f;  // denormal: with eps = 0, rstd >= 2^64 (the float64-lanes path)
    } else if (c.kind == "huge") {
      x[i] *= 1e38f;
    } else if (c.kind == "constant_channel" && channel == 1) {
      x[i] = 42.5f;
    }
  }
  if (c.kind == "nan_channel") {
    // Sample batch / 2, the middle of channel channels / 2.
    const int64_t at = ((c.batch / 2) * c.channels + c.channels / 2) * c.length + c.length / 2;
    x[static_cast<size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  // Length 1: channel counts around the vector widths (2, 4, 8 and 16 lanes).
  for (int64_t channels : {1, 3, 7, 8, 15, 16, 17, 33, 67}) {
    all.push_back({"ordinary", 11, channels, 1});
  }
  // Batches long enough for the statistics and the backward's pass 1 to run four chunks in
  // lock-step (samples shorter than 4 KiB; 203 samples make chunks of 12 and 13) and for the
  // normalising pass to walk four stretches; 1024 channels take the chunks one at a time.
  for (int64_t channels : {1, 3, 17, 67, 130}) all.push_back({"ordinary", 203, channels, 1});
  all.push_back({"ordinary", 70, 1024, 1});
  all.push_back({"large_mean", 203, 19, 1});
  // Length > 1, with lengths around the widths too.
  for (int64_t length : {2, 3, 9, 16, 31, 100}) all.push_back({"ordinary", 5, 3, length});
  for (const char* kind : {"large_mean", "tiny", "huge", "nan_channel", "constant_channel"}) {
    for (const auto& [channels, length] :
         {std::pair<int64_t, int64_t>{21, 1}, {37, 1}, {1536, 1}, {5, 17}, {3, 64}}) {
      all.push_back({kind, 9, channels, length});
    }
  }
  return all;
}

double eps_for(const Case& c) {
  return c.kind == "tiny" ? 0.0 : 1e-5;
}

// The float64 reference forward with the given statistics per channel.
std::vector<double> reference_forward(const std::vector<float>& x, const std::vector<float>& gamma,
                                      const std::vector<float>& beta, const Case& c,
                                      const std::vector<long double>& mean,
                                      const std::vector<long double>& rstd) {
  const reference::BatchLayout layout{c.batch, c.channels, c.length};
  const auto x64 = widen(x), g64 = widen(gamma), b64 = widen(beta);
  std::vector<double> y(x.size());
  for (int64_t ch = 0; ch < c.channels; ++ch) {
    reference::normalise_channel<double>(x64.data(), g64.data(), b64.data(), y.data(), layout, ch,
                                         mean[ch], rstd[ch]);
  }
  return y;
}

class BatchNormEveryTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override { cpu::force_target(0); }
};

// Training forward (batch statistics) and inference forward (running statistics).
void check_forward(const Case& c) {
  const Shape shape = shape_of(c);
  const Shape channels{c.channels};
  const auto x = make_input(c, 31);
  const auto gamma = random_floats(c.channels, 32, 0.5f, 1.5f);
  const auto beta = random_floats(c.channels, 33);
  const double eps = eps_for(c);
  const reference::BatchLayout layout{c.batch, c.channels, c.length};
  const auto x64 = widen(x);
  std::vector<long double> mean(c.channels), rstd(c.channels);
  for (int64_t ch = 0; ch < c.channels; ++ch) {
    const auto m = reference::channel_moments<double>(x64.data(), layout, ch);
    mean[ch] = m.mean;
    rstd[ch] = 1 / std::sqrt(m.variance + static_cast<long double>(eps));
  }
  BatchNormOptions options{
      {.gamma = ConstView{gamma.data(), channels}, .beta = ConstView{beta.data(), channels}}};
  options.eps = static_cast<float>(eps);
  std::vector<float> y(x.size());
  batch_norm({x.data(), shape}, {y.data(), shape}, options);
  EXPECT_TRUE(within_ulps(y, reference_forward(x, gamma, beta, c, mean, rstd), 4, 4.0));

  // Inference with running statistics equal to the batch's, rounded to float32 (except for
  // denormal spreads, whose variance would round to 0, and with eps = 0 make rstd infinite).
  if (c.kind == "tiny") return;
  std::vector<float> running_mean(c.channels), running_var(c.channels);
  for (int64_t ch = 0; ch < c.channels; ++ch) {
    running_mean[ch] = static_cast<float>(mean[ch]);
    running_var[ch] = static_cast<float>(1 / (rstd[ch] * rstd[ch]) - eps);
    mean[ch] = running_mean[ch];
    rstd[ch] = 1 / std::sqrt(static_cast<long double>(running_var[ch]) + eps);
  }
  options.training = false;
  batch_norm({x.data(), shape}, {y.data(), shape}, options,
             RunningStats{{running_mean.data(), channels}, {running_var.data(), channels}});
  EXPECT_TRUE(within_ulps(y, reference_forward(x, gamma, beta, c, mean, rstd), 4, 4.0));
}

// Training and inference backwards.
void check_backward(const Case& c) {
  const Shape shape = shape_of(c);
  const Shape channels{c.channels};
  const auto x = make_input(c, 41);
  const auto dy = random_floats(x.size(), 42);
  const auto gamma = random_floats(c.channels, 43, 0.5f, 1.5f);
  const auto beta = random_floats(c.channels, 44);
  auto running_mean = random_floats(c.channels, 45);
  auto running_var = random_floats(c.channels, 46, 0.5f, 2.0f);
  const reference::BatchLayout layout{c.batch, c.channels, c.length};
  const auto x64 = widen(x), dy64 = widen(dy), g64 = widen(gamma);
  const double eps = 1e-5;
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    std::vector<double> want_dx(x.size()), want_dg(c.channels), want_db(c.channels);
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      if (training) {
        reference::batch_norm_backward_channel<double>(dy64.data(), x64.data(), g64.data(),
                                                       want_dx.data(), want_dg.data(),
                                                       want_db.data(), layout, ch, eps);
      } else {
        reference::batch_norm_eval_backward_channel<double>(
            dy64.data(), x64.data(), g64.data(), want_dx.data(), want_dg.data(), want_db.data(),
            layout, ch, running_mean[ch], 1 / std::sqrt(double(running_var[ch]) + eps));
      }
    }
    BatchNormOptions options{
        {.gamma = ConstView{gamma.data(), channels}, .beta = ConstView{beta.data(), channels}}};
    options.training = training;
    options.eps = static_cast<float>(eps);
    // dx on a 64-byte boundary, so that a large enough one is written with streaming stores.
    std::vector<float> dx_storage(x.size() + 16), dg(c.channels), db(c.channels);
    float* dx_data =
        dx_storage.data() + (64 - reinterpret_cast<uintptr_t>(dx_storage.data()) % 64) / 4 % 16;
    batch_norm_backward(
        {dy.data(), shape}, {x.data(), shape},
        {{dx_data, shape}, MutableView{dg.data(), channels}, MutableView{db.data(), channels}},
        options, RunningStats{{running_mean.data(), channels}, {running_var.data(), channels}});
    const std::vector<float> dx(dx_data, dx_data + x.size());
    // dx is a difference of terms of size rstd * |g| * (1 + |x_hat|).
    EXPECT_TRUE(within_ulps(dx, want_dx, 4, 8.0 * testing::max_abs(want_dx)));
    // dgamma sums dy * x_hat, terms of size up to ~ |x_hat|, over N * L values.
    EXPECT_TRUE(within_ulps(dg, want_dg, 4, 8.0));
    EXPECT_TRUE(within_ulps(db, want_db, 4, 8.0));

    // Without dgamma (the inference backward then skips x) or without both: the same bits.
    for (const bool with_dbeta : {true, false}) {
      SCOPED_TRACE(with_dbeta ? "no dgamma" : "no dgamma, no dbeta");
      std::vector<float> dx_alone(x.size()), db_alone(c.channels, -1.0f);
      std::optional<MutableView> db_view;
      if (with_dbeta) db_view = MutableView{db_alone.data(), channels};
      batch_norm_backward(
          {dy.data(), shape}, {x.data(), shape}, {{dx_alone.data(), shape}, std::nullopt, db_view},
          options, RunningStats{{running_mean.data(), channels}, {running_var.data(), channels}});
      EXPECT_EQ(0, std::memcmp(dx_alone.data(), dx.data(), dx.size() * sizeof(float)));
      if (with_dbeta) {
        EXPECT_EQ(0, std::memcmp(db_alone.data(), db.data(), db.size() * sizeof(float)));
      }
    }
  }
}

TEST_P(BatchNormEveryTarget, MatchesTheFloat64Reference) {
  ASSERT_EQ(cpu::current_target_name(), cpu::target_name(GetParam()));  // really dispatched there
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.kind + " " + shape_of(c).to_string());
    check_forward(c);
    check_backward(c);
  }
}

// Outputs of at least kStreamingStoreBytes are written with streaming stores, which need aligned
// addresses: rows of an odd channel count start at every alignment, and the forward's four
// stretches start wherever the range allows. The training backward streams dx when C is a
// multiple of 16 (48 and 2048 here: one chunk at a time and four in lock-step).
TEST_P(BatchNormEveryTarget, MatchesTheReferenceWithStreamingStores) {
  const int64_t elements = cpu::kStreamingStoreBytes / int64_t{sizeof(float)} + 4096;
  for (const Case& c :
       {Case{"large_mean", elements / 1031 + 1, 1031, 1},
        Case{"nan_channel", elements / 2048 + 1, 2048, 1},
        Case{"ordinary", elements / 2048 + 3, 2048, 1}, Case{"ordinary", elements / 48 + 5, 48, 1},
        Case{"ordinary", elements / (37 * 67) + 1, 37, 67}}) {
    SCOPED_TRACE(c.kind + " " + shape_of(c).to_string());
    check_forward(c);
    check_backward(c);
  }
}

// y = x (in place) gives the same bits as a separate y, for both layouts.
TEST(FastBatchNorm, InPlaceMatchesOutOfPlace) {
  for (const Case& c : {Case{"large_mean", 40, 19, 1}, Case{"ordinary", 6, 5, 23}}) {
    SCOPED_TRACE(shape_of(c).to_string());
    const Shape shape = shape_of(c);
    auto x = make_input(c, 51);
    std::vector<float> y(x.size());
    batch_norm({x.data(), shape}, {y.data(), shape});
    batch_norm({x.data(), shape}, {x.data(), shape});
    EXPECT_EQ(x, y);
  }
}

// The same in 16 bits, and dx = dy in the training and inference backwards, for both layouts
// and every 16-bit type.
TEST(FastBatchNorm, SixteenBitInPlaceMatchesOutOfPlace) {
  for (const DType dtype : {DType::bfloat16, DType::float16}) {
    for (const Case& c : {Case{"ordinary", 40, 19, 1}, Case{"ordinary", 6, 5, 23}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_of(c).to_string());
      const Shape shape = shape_of(c), channels{c.channels};
      const auto x = testing::narrow_all(make_input(c, 52), dtype);
      const auto dy = testing::narrow_all(random_floats(x.size(), 53), dtype);
      std::vector<float> running_mean(c.channels, 0.25f), running_var(c.channels, 2.0f);
      const RunningStats running{{running_mean.data(), channels}, {running_var.data(), channels}};
      BatchNormOptions options;
      auto in_place = x;
      std::vector<uint16_t> y(x.size());
      batch_norm({x.data(), shape, dtype}, {y.data(), shape, dtype}, options);
      batch_norm({in_place.data(), shape, dtype}, {in_place.data(), shape, dtype}, options);
      EXPECT_EQ(in_place, y);
      for (const bool training : {true, false}) {
        options.training = training;
        auto dx_in_place = dy;
        std::vector<uint16_t> dx(x.size());
        batch_norm_backward({dy.data(), shape, dtype}, {x.data(), shape, dtype},
                            {{dx.data(), shape, dtype}, std::nullopt, std::nullopt}, options,
                            running);
        batch_norm_backward({dx_in_place.data(), shape, dtype}, {x.data(), shape, dtype},
                            {{dx_in_place.data(), shape, dtype}, std::nullopt, std::nullopt},
                            options, running);
        EXPECT_EQ(dx_in_place, dx) << (training ? "training" : "inference");
      }
    }
  }
}

#if defined(__unix__)
// The inference backward without dgamma does not read x: x lies in memory that cannot be read
// (PROT_NONE) for those calls, on every target, for every storage type and both layouts; dx and
// dbeta keep the bits of the call that computed dgamma, also with dx written over x.
TEST_P(BatchNormEveryTarget, InferenceBackwardWithoutDgammaReadsNoX) {
  for (const DType dtype : {DType::float32, DType::bfloat16, DType::float16}) {
    for (const Case& c :
         {Case{"ordinary", 40, 19, 1}, Case{"ordinary", 9, 67, 1}, Case{"ordinary", 6, 5, 23}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_of(c).to_string());
      const Shape shape = shape_of(c), channels{c.channels};
      const auto size = static_cast<size_t>(dtype_size(dtype));
      // Each tensor's bytes in the storage type.
      const auto stored = [&](const std::vector<float>& values) {
        std::vector<uint8_t> bytes(values.size() * size);
        if (dtype == DType::float32) {
          std::memcpy(bytes.data(), values.data(), bytes.size());
        } else {
          const auto bits = testing::narrow_all(values, dtype);
          std::memcpy(bytes.data(), bits.data(), bytes.size());
        }
        return bytes;
      };
      const auto x = stored(make_input(c, 71));
      const auto dy = stored(random_floats(x.size() / size, 72));
      const auto gamma = random_floats(c.channels, 73, 0.5f, 1.5f);
      const auto beta = random_floats(c.channels, 74);
      std::vector<float> running_mean(c.channels, 0.25f), running_var(c.channels, 2.0f);
      const RunningStats running{{running_mean.data(), channels}, {running_var.data(), channels}};
      BatchNormOptions options{
          {.gamma = ConstView{gamma.data(), channels}, .beta = ConstView{beta.data(), channels}}};
      options.training = false;

      std::vector<uint8_t> dx(x.size());
      std::vector<float> dg(c.channels), db(c.channels);
      batch_norm_backward({dy.data(), shape, dtype}, {x.data(), shape, dtype},
                          {{dx.data(), shape, dtype},
                           MutableView{dg.data(), channels},
                           MutableView{db.data(), channels}},
                          options, running);

      void* guarded =
          mmap(nullptr, x.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(guarded, MAP_FAILED);
      std::memcpy(guarded, x.data(), x.size());
      ASSERT_EQ(0, mprotect(guarded, x.size(), PROT_NONE));
      for (const bool with_dbeta : {true, false}) {
        std::vector<uint8_t> dx_alone(x.size());
        std::vector<float> db_alone(c.channels, -1.0f);
        std::optional<MutableView> db_view;
        if (with_dbeta) db_view = MutableView{db_alone.data(), channels};
        batch_norm_backward({dy.data(), shape, dtype}, {guarded, shape, dtype},
                            {{dx_alone.data(), shape, dtype}, std::nullopt, db_view}, options,
                            running);
        EXPECT_EQ(dx_alone, dx);
        if (with_dbeta) {
          EXPECT_EQ(db_alone, db);
        }
      }
      ASSERT_EQ(0, munmap(guarded, x.size()));

      auto x_then_dx = x;  // dx written over x
      batch_norm_backward({dy.data(), shape, dtype}, {x_then_dx.data(), shape, dtype},
                          {{x_then_dx.data(), shape, dtype}, std::nullopt, std::nullopt}, options,
                          running);
      EXPECT_EQ(x_then_dx, dx);
    }
  }
}
#endif

// The forward, both backwards and the running statistics are bitwise identical for 1, 2 and 3
// threads, on every target: for (N, C) input, where vectors run across channels (the split of
// the flat tensor over threads moves the scalar ends, which must compute as the vectors do), and
// for (N, C, L), where threads split the batch.
TEST_P(BatchNormEveryTarget, IsThreadDeterministic) {
  for (const Case& shape_case : {Case{"large_mean", 3001, 37, 1}, Case{"large_mean", 30000, 3, 1},
                                 Case{"large_mean", 1000, 5, 16}}) {
    const auto [kind, batch, channels, length] = shape_case;
    SCOPED_TRACE("batch " + std::to_string(batch) + " channels " + std::to_string(channels) +
                 " length " + std::to_string(length));
    const Shape shape = shape_of(shape_case), per_channel{channels};
    const auto x = make_input(shape_case, 61);
    const auto dy = random_floats(x.size(), 62);
    const auto gamma = random_floats(channels, 63, 0.5f, 1.5f);
    const auto beta = random_floats(channels, 64);
    const int saved_threads = omp_get_max_threads();
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> y(x.size()), dx(x.size()), dg(channels), db(channels);
      std::vector<float> running_mean(channels, 0.0f), running_var(channels, 1.0f);
      BatchNormOptions options{{.gamma = ConstView{gamma.data(), per_channel},
                                .beta = ConstView{beta.data(), per_channel}}};
      const RunningStats running{{running_mean.data(), per_channel},
                                 {running_var.data(), per_channel}};
      batch_norm({x.data(), shape}, {y.data(), shape}, options, running);
      std::vector<float> all = y;
      for (const bool training : {true, false}) {
        options.training = training;
        batch_norm_backward({dy.data(), shape}, {x.data(), shape},
                            {{dx.data(), shape},
                             MutableView{dg.data(), per_channel},
                             MutableView{db.data(), per_channel}},
                            options, running);
        for (auto* part : {&dx, &dg, &db}) all.insert(all.end(), part->begin(), part->end());
      }
      for (auto* part : {&running_mean, &running_var}) {
        all.insert(all.end(), part->begin(), part->end());
      }
      results.push_back(std::move(all));
    }
    omp_set_num_threads(saved_threads);
    EXPECT_EQ(results[0], results[1]);
    EXPECT_EQ(results[0], results[2]);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, BatchNormEveryTarget,
                         ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target_info) {
                           return cpu::target_name(target_info.param);
                         });

}  // namespace
}  // namespace addnorm
