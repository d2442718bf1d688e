// The fused Add & Norm ops: equal to the unfused sequence of library ops, and their gradients
// equal to float64 finite differences of the composed function.
#include <gtest/gtest.h>

#include "addnorm/ops.hpp"
#include "ops/reference/layer_norm.hpp"
#include "ops/reference/rms_norm.hpp"
#include "test_support.hpp"

namespace addnorm {
namespace {

using testing::random_floats;
using testing::widen;
using testing::within_ulps;

struct Case {
  NormKind norm;
  bool with_gamma;
  bool with_beta;
};
const Case kCases[] = {{NormKind::layer_norm, true, true},
                       {NormKind::layer_norm, false, false},
                       {NormKind::layer_norm, true, false},
                       {NormKind::rms_norm, true, false},
                       {NormKind::rms_norm, false, false}};

NormOptions options_for(const Case& c, const std::vector<float>& gamma,
                        const std::vector<float>& beta, const Shape& normalized) {
  NormOptions options;
  options.norm = c.norm;
  if (c.with_gamma) options.gamma = ConstView{gamma.data(), normalized};
  if (c.with_beta) options.beta = ConstView{beta.data(), normalized};
  return options;
}

// Norm(h) through the unfused public op, with the same description the fused op took.
void unfused_norm(const std::vector<float>& h, std::vector<float>& y, const Shape& shape,
                  const Shape& normalized, const NormOptions& options) {
  norm({h.data(), shape}, normalized, {y.data(), shape}, options);
}

TEST(AddNormPre, EqualsAddThenNormBitForBit) {
  const Shape shape{3, 5, 48}, normalized{48};
  const auto x = random_floats(720, 1), r = random_floats(720, 2);
  const auto gamma = random_floats(48, 3, 0.5f, 1.5f), beta = random_floats(48, 4);
  for (const Case& c : kCases) {
    const NormOptions options = options_for(c, gamma, beta, normalized);
    std::vector<float> h(720), y(720), h_ref(720), y_ref(720);
    add_norm_pre({x.data(), shape}, {r.data(), shape}, normalized, {h.data(), shape},
                 {y.data(), shape}, options);
    add({x.data(), shape}, {r.data(), shape}, {h_ref.data(), shape});
    unfused_norm(h_ref, y_ref, shape, normalized, options);
    EXPECT_EQ(h, h_ref);
    EXPECT_EQ(y, y_ref);
  }
}

TEST(AddNormPost, WithoutDropoutEqualsNormOfSum) {
  const Shape shape{4, 33}, normalized{33};
  const auto x = random_floats(132, 5), s = random_floats(132, 6);
  const auto gamma = random_floats(33, 7, 0.5f, 1.5f), beta = random_floats(33, 8);
  for (const Case& c : kCases) {
    const NormOptions options = options_for(c, gamma, beta, normalized);
    std::vector<float> y(132), h(132), y_ref(132);
    add_norm_post({x.data(), shape}, {s.data(), shape}, normalized, {y.data(), shape}, options);
    add({x.data(), shape}, {s.data(), shape}, {h.data(), shape});
    unfused_norm(h, y_ref, shape, normalized, options);
    EXPECT_EQ(y, y_ref);
  }
}

TEST(AddNormPost, WithDropoutEqualsDropoutAddNorm) {
  const Shape shape{8, 64}, normalized{64};
  const auto x = random_floats(512, 9), s = random_floats(512, 10);
  const DropoutOptions dropout_options{0.1f, 2017, 12345};
  std::vector<float> y(512), dropped(512), h(512), y_ref(512);
  add_norm_post({x.data(), shape}, {s.data(), shape}, normalized, {y.data(), shape}, {},
                dropout_options);
  dropout({s.data(), shape}, {dropped.data(), shape}, dropout_options);
  add({x.data(), shape}, {dropped.data(), shape}, {h.data(), shape});
  layer_norm({h.data(), shape}, normalized, {y_ref.data(), shape});
  EXPECT_EQ(y, y_ref);
  int zeros = 0;
  for (float v : dropped) zeros += v == 0.0f;
  EXPECT_GT(zeros, 20);  // p = 0.1 of 512 really drops some
}

// float64 forward of the composed pre-norm block, for finite differences:
// loss = sum(dy * Norm(x + r)) + sum(dh_next * (x + r)).
double pre_norm_loss(const std::vector<double>& x, const std::vector<double>& r,
                     const std::vector<double>& gamma, const std::vector<double>& beta,
                     const std::vector<double>& dy, const std::vector<double>& dh_next,
                     NormKind norm, int64_t rows, int64_t dim) {
  std::vector<double> h(x.size()), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = x[i] + r[i];
  if (norm == NormKind::layer_norm) {
    reference::layer_norm_forward<double>(h.data(), gamma.data(), beta.data(), y.data(), nullptr,
                                          nullptr, rows, dim, 1e-5);
  } else {
    reference::rms_norm_forward<double>(h.data(), gamma.data(), false, y.data(), nullptr, rows, dim,
                                        1e-5);
  }
  return testing::dot(y, dy) + testing::dot(h, dh_next);
}

TEST(AddNormPreBackward, MatchesFiniteDifferencesOfTheComposedBlock) {
  const int64_t rows = 3, dim = 6;
  const Shape shape{rows, dim}, normalized{dim};
  const auto x = random_floats(rows * dim, 11, -2.0f, 2.0f);
  const auto r = random_floats(rows * dim, 12, -2.0f, 2.0f);
  const auto dy = random_floats(rows * dim, 13), dh_next = random_floats(rows * dim, 14);
  const auto gamma = random_floats(dim, 15, 0.5f, 1.5f), beta = random_floats(dim, 16);
  for (const NormKind norm : {NormKind::layer_norm, NormKind::rms_norm}) {
    const bool layer = norm == NormKind::layer_norm;
    NormOptions options{norm, ConstView{gamma.data(), normalized},
                        layer ? OptionalConst(ConstView{beta.data(), normalized}) : std::nullopt};
    std::vector<float> h(rows * dim), y(rows * dim), dh(rows * dim), dgamma(dim), dbeta(dim);
    add_norm_pre({x.data(), shape}, {r.data(), shape}, normalized, {h.data(), shape},
                 {y.data(), shape}, options);
    add_norm_pre_backward(
        {dy.data(), shape}, ConstView{dh_next.data(), shape}, {h.data(), shape}, normalized,
        {{dh.data(), shape},
         MutableView{dgamma.data(), normalized},
         layer ? OptionalMutable(MutableView{dbeta.data(), normalized}) : std::nullopt},
        options);
    // The float64 finite differences are taken at the float32 h (= x + r rounded), through r.
    const auto h64 = widen(h), zeros = std::vector<double>(h.size(), 0.0);
    const auto g64 = widen(gamma), b64 = layer ? widen(beta) : std::vector<double>(dim, 0.0);
    const auto dy64 = widen(dy), dhn64 = widen(dh_next);
    auto numeric_check = [&](const std::vector<double>& analytic, int which) {
      auto loss = [&](const std::vector<double>& p) {
        return pre_norm_loss(which == 0 ? p : h64, zeros, which == 1 ? p : g64,
                             which == 2 ? p : b64, dy64, dhn64, norm, rows, dim);
      };
      return testing::matches_finite_differences(loss, which == 0 ? h64 : (which == 1 ? g64 : b64),
                                                 analytic, 1e-6, 1e-5);
    };
    SCOPED_TRACE(layer ? "layer_norm" : "rms_norm");
    EXPECT_TRUE(numeric_check(widen(dh), 0));
    EXPECT_TRUE(numeric_check(widen(dgamma), 1));
    if (layer) {
      EXPECT_TRUE(numeric_check(widen(dbeta), 2));
    }
  }
}

TEST(AddNormPostBackward, MatchesFiniteDifferencesThroughTheDropoutMask) {
  const int64_t rows = 4, dim = 5;
  const Shape shape{rows, dim}, normalized{dim};
  const auto x = random_floats(rows * dim, 21, -2.0f, 2.0f);
  const auto s = random_floats(rows * dim, 22, -2.0f, 2.0f);
  const auto dy = random_floats(rows * dim, 23);
  const auto gamma = random_floats(dim, 24, 0.5f, 1.5f), beta = random_floats(dim, 25);
  const DropoutOptions dropout_options{0.3f, 77, 0};
  std::vector<uint8_t> mask(rows * dim);
  dropout_mask({mask.data(), shape}, dropout_options);
  NormOptions options{NormKind::layer_norm, ConstView{gamma.data(), normalized},
                      ConstView{beta.data(), normalized}};
  std::vector<float> dx(rows * dim), ds(rows * dim), dgamma(dim), dbeta(dim);
  add_norm_post_backward({dy.data(), shape}, {x.data(), shape}, {s.data(), shape}, normalized,
                         {{dx.data(), shape},
                          {ds.data(), shape},
                          MutableView{dgamma.data(), normalized},
                          MutableView{dbeta.data(), normalized}},
                         options, dropout_options);
  // loss(x, s) = sum(dy * LN(x + mask * s / (1 - p))) in float64.
  const auto g64 = widen(gamma), b64 = widen(beta), dy64 = widen(dy);
  auto loss = [&](const std::vector<double>& xs, const std::vector<double>& ss) {
    std::vector<double> h(xs.size()), y(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) h[i] = xs[i] + (mask[i] ? ss[i] / 0.7 : 0.0);
    reference::layer_norm_forward<double>(h.data(), g64.data(), b64.data(), y.data(), nullptr,
                                          nullptr, rows, dim, 1e-5);
    return testing::dot(y, dy64);
  };
  const auto x64 = widen(x), s64 = widen(s);
  EXPECT_TRUE(testing::matches_finite_differences(
      [&](const std::vector<double>& p) { return loss(p, s64); }, x64, widen(dx), 1e-6, 1e-5));
  EXPECT_TRUE(testing::matches_finite_differences(
      [&](const std::vector<double>& p) { return loss(x64, p); }, s64, widen(ds), 1e-6, 1e-5));
  int dropped = 0;
  for (size_t i = 0; i < ds.size(); ++i) dropped += mask[i] == 0 && ds[i] == 0.0f;
  EXPECT_GT(dropped, 0);
}

}  // namespace
}  // namespace addnorm
