// The fast kernels on every SIMD target compiled into this binary (AVX-512, AVX2, SSE4, ...),
// not just the one this machine picks: each against the float64 reference on shape sweeps and
// adversarial rows, forward and backward, plain and fused. Also: thread-count determinism.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "addnorm/ops.hpp"
#include "ops/cpu/kernels.hpp"
#include "ops/reference/layer_norm.hpp"
#include "ops/reference/rms_norm.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;
using testing::widen;
using testing::within_ulps;

// Row contents that stress the numerics, by name.
std::vector<float> make_rows(const std::string& kind, int64_t rows, int64_t dim, uint32_t seed) {
  auto x = random_floats(static_cast<size_t>(rows * dim), seed, -2.0f, 3.0f);
  if (kind == "large_mean") {
    for (float& v : x) v = 1e6f + v * 1e-1f;
  } else if (kind == "constant") {
    for (float& v : x) v = 42.5f;
  } else if (kind == "tiny") {
    for (float& v : x) v *= 1e-40f;
  } else if (kind == "huge") {
    for (float& v : x) v *= 1e38f;
  } else if (kind == "nan_row" && rows > 1) {
    x[static_cast<size_t>(dim + dim / 2)] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

struct Case {
  std::string kind;
  int64_t rows;
  int64_t dim;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int64_t dim : {1, 3, 7, 8, 15, 16, 17, 33, 64, 100, 768, 4097}) {
    all.push_back({"ordinary", 5, dim});
  }
  for (const char* kind : {"large_mean", "constant", "tiny", "huge", "nan_row"}) {
    for (int64_t dim : {1, 9, 64, 257}) all.push_back({kind, 3, dim});
  }
  return all;
}

class EveryTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { cpu::force_target(GetParam()); }
  void TearDown() override { cpu::force_target(0); }
};

TEST_P(EveryTarget, NormsMatchTheFloat64Reference) {
  ASSERT_EQ(cpu::current_target_name(), cpu::target_name(GetParam()));  // really dispatched there
  for (const Case& c : cases()) {
    for (const bool layer : {true, false}) {
      SCOPED_TRACE(c.kind + " dim " + std::to_string(c.dim) + (layer ? " layer" : " rms"));
      const Shape shape{c.rows, c.dim}, normalized{c.dim};
      const auto x = make_rows(c.kind, c.rows, c.dim, 3);
      const auto r = random_floats(x.size(), 4);
      const auto dy = random_floats(x.size(), 5);
      const auto gamma = random_floats(static_cast<size_t>(c.dim), 6, 0.5f, 1.5f);
      const auto beta = random_floats(static_cast<size_t>(c.dim), 7);
      const auto x64 = widen(x), dy64 = widen(dy), g64 = widen(gamma), b64 = widen(beta);
      std::vector<double> want_y(x.size()), want_dx(x.size()), want_dg(c.dim), want_db(c.dim);
      std::vector<float> y(x.size()), dx(x.size()), dg(c.dim), db(c.dim);
      const OptionalMutable dbeta =
          layer ? OptionalMutable(MutableView{db.data(), normalized}) : std::nullopt;
      if (layer) {
        reference::layer_norm_forward<double>(x64.data(), g64.data(), b64.data(), want_y.data(),
                                              nullptr, nullptr, c.rows, c.dim, 1e-5);
        reference::layer_norm_backward<double>(dy64.data(), x64.data(), g64.data(), nullptr,
                                               nullptr, want_dx.data(), want_dg.data(),
                                               want_db.data(), c.rows, c.dim, 1e-5);
        const NormOptions options{.gamma = ConstView{gamma.data(), normalized},
                                  .beta = ConstView{beta.data(), normalized}};
        layer_norm({x.data(), shape}, normalized, {y.data(), shape}, options);
        layer_norm_backward({dy.data(), shape}, {x.data(), shape}, normalized,
                            {{dx.data(), shape}, MutableView{dg.data(), normalized}, dbeta},
                            options);
      } else {
        reference::rms_norm_forward<double>(x64.data(), g64.data(), false, want_y.data(), nullptr,
                                            c.rows, c.dim, 1e-5);
        reference::rms_norm_backward<double>(dy64.data(), x64.data(), g64.data(), false, nullptr,
                                             nullptr, want_dx.data(), want_dg.data(), c.rows, c.dim,
                                             1e-5);
        const NormOptions options{.gamma = ConstView{gamma.data(), normalized},
                                  .zero_centered_gamma = false,
                                  .eps = 1e-5f};
        rms_norm({x.data(), shape}, normalized, {y.data(), shape}, options);
        rms_norm_backward({dy.data(), shape}, {x.data(), shape}, normalized,
                          {{dx.data(), shape}, MutableView{dg.data(), normalized}}, options);
      }
      EXPECT_TRUE(within_ulps(y, want_y, 4, 4.0));
      if (c.kind == "nan_row") continue;  // dgamma sums the NaN row: nothing finite to compare
      // dx is a difference of terms of size rstd * |g| * (1 + |x_hat|).
      const double dx_scale = 8.0 * testing::max_abs(want_dx) + 8.0;
      EXPECT_TRUE(within_ulps(dx, want_dx, 4, dx_scale));
      EXPECT_TRUE(within_ulps(dg, want_dg, 4, 8.0));
      if (layer) {
        EXPECT_TRUE(within_ulps(db, want_db, 4, 8.0));
      }

      // The fused pre-norm op equals add followed by the norm, bit for bit.
      std::vector<float> h(x.size()), y_fused(x.size()), h_ref(x.size()), y_ref(x.size());
      NormOptions fused{layer ? NormKind::layer_norm : NormKind::rms_norm,
                        ConstView{gamma.data(), normalized},
                        layer ? OptionalConst(ConstView{beta.data(), normalized}) : std::nullopt};
      add_norm_pre({x.data(), shape}, {r.data(), shape}, normalized, {h.data(), shape},
                   {y_fused.data(), shape}, fused);
      add({x.data(), shape}, {r.data(), shape}, {h_ref.data(), shape});
      if (layer) {
        layer_norm({h_ref.data(), shape}, normalized, {y_ref.data(), shape}, fused);
      } else {
        rms_norm({h_ref.data(), shape}, normalized, {y_ref.data(), shape}, fused);
      }
      EXPECT_EQ(h, h_ref);
      EXPECT_EQ(y_fused, y_ref);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, EveryTarget, ::testing::ValuesIn(cpu::available_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& target_info) {
                           return cpu::target_name(target_info.param);
                         });

TEST(FastKernels, CompilesSeveralTargets) {
  // SSE4 or AVX2 next to the best target: the same binary runs without AVX-512.
  EXPECT_GE(cpu::available_targets().size(), 2u) << cpu::current_target_name();
}

// dx, dgamma and dbeta are bitwise identical for 1, 2 and 3 threads: float32 rows, and bfloat16
// rows short and long (their pass 1 sums in float32 lanes and blocks), 1000 rows so that the
// reduction chunks end in partial groups, taken row by row. Compared as bits: a bfloat16 dx fills
// the float buffer in pairs.
TEST(FastKernels, BackwardIsBitwiseIdenticalForAnyThreadCount) {
  for (const auto& [dtype, dim] :
       {std::pair{DType::float32, int64_t{96}}, std::pair{DType::bfloat16, int64_t{96}},
        std::pair{DType::bfloat16, int64_t{1000}}}) {
    const int64_t rows = 1000;
    const Shape shape{rows, dim}, normalized{dim};
    const auto x = random_floats(rows * dim, 11, -3.0f, 3.0f);
    const auto dy = random_floats(rows * dim, 12);
    const auto gamma = random_floats(dim, 13, 0.5f, 1.5f);
    const auto beta = random_floats(dim, 14);
    std::vector<bfloat16> x16, dy16;
    for (size_t i = 0; i < x.size(); ++i) {
      x16.push_back(to_bfloat16(x[i]));
      dy16.push_back(to_bfloat16(dy[i]));
    }
    const bool narrow = dtype == DType::bfloat16;
    const AnyConstView x_view = narrow ? AnyConstView(TensorView<const bfloat16>{x16.data(), shape})
                                       : AnyConstView(ConstView{x.data(), shape});
    const AnyConstView dy_view = narrow
                                     ? AnyConstView(TensorView<const bfloat16>{dy16.data(), shape})
                                     : AnyConstView(ConstView{dy.data(), shape});
    const int saved_threads = omp_get_max_threads();
    std::vector<std::vector<uint32_t>> results;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> dx(x.size()), dg(dim), db(dim);  // a bfloat16 dx fills half of dx
      const AnyMutableView dx_view = narrow ? AnyMutableView(dx.data(), shape, DType::bfloat16)
                                            : AnyMutableView(MutableView{dx.data(), shape});
      layer_norm_backward(
          dy_view, x_view, normalized,
          {dx_view, MutableView{dg.data(), normalized}, MutableView{db.data(), normalized}},
          {.gamma = ConstView{gamma.data(), normalized},
           .beta = ConstView{beta.data(), normalized}});
      dx.insert(dx.end(), dg.begin(), dg.end());
      dx.insert(dx.end(), db.begin(), db.end());
      std::vector<uint32_t> bits(dx.size());
      std::memcpy(bits.data(), dx.data(), dx.size() * sizeof(float));
      results.push_back(std::move(bits));
    }
    omp_set_num_threads(saved_threads);
    EXPECT_EQ(results[0], results[1]) << "dim " << dim;
    EXPECT_EQ(results[0], results[2]) << "dim " << dim;
  }
}

// BatchNorm's training backward and running statistics are bitwise identical for 1, 2 and 3
// threads, and a channel whose mean is 1e6 times its spread is normalised exactly.
TEST(FastKernels, BatchNormIsThreadDeterministicAndExactForLargeMeans) {
  const int64_t batch = 1000, channels = 5, length = 16;  // 80 Ki elements: split over threads
  const Shape shape{batch, channels, length};
  auto x = random_floats(batch * channels * length, 21, -1.0f, 1.0f);
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t l = 0; l < length; ++l) x[(n * channels + 2) * length + l] += 1e6f;
  }
  const auto dy = random_floats(x.size(), 22);
  const auto gamma = random_floats(channels, 23, 0.5f, 1.5f);
  const std::vector<float> beta(channels, 0.0f);
  const int saved_threads = omp_get_max_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> y(x.size()), dx(x.size()), dg(channels), db(channels);
    std::vector<float> running_mean(channels, 0.0f), running_var(channels, 1.0f);
    const BatchNormOptions options{ConstView{gamma.data(), {channels}},
                                   ConstView{beta.data(), {channels}}};
    batch_norm({x.data(), shape}, {y.data(), shape}, options,
               RunningStats{{running_mean.data(), {channels}}, {running_var.data(), {channels}}});
    batch_norm_backward({dy.data(), shape}, {x.data(), shape},
                        {{dx.data(), shape},
                         MutableView{dg.data(), {channels}},
                         MutableView{db.data(), {channels}}},
                        options);
    for (auto* part : {&dx, &dg, &db, &running_mean, &running_var}) {
      y.insert(y.end(), part->begin(), part->end());
    }
    results.push_back(std::move(y));
  }
  omp_set_num_threads(saved_threads);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  // Channel 2 against float64: its values are 1e6 + U(-1, 1).
  double mean = 0, variance = 0;
  const double count = double(batch * length);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t l = 0; l < length; ++l) mean += x[(n * channels + 2) * length + l] / count;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t l = 0; l < length; ++l)
      variance += std::pow(x[(n * channels + 2) * length + l] - mean, 2) / count;
  std::vector<float> got;
  std::vector<double> want;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t l = 0; l < length; ++l) {
      const int64_t at = (n * channels + 2) * length + l;
      got.push_back(results[0][at]);
      want.push_back((x[at] - mean) / std::sqrt(variance + 1e-5) * gamma[2]);
    }
  }
  EXPECT_TRUE(within_ulps(got, want, 2, 4.0));
}

}  // namespace
}  // namespace addnorm
