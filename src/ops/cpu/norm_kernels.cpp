// Per-target SIMD row kernels for LayerNorm and RMSNorm (forward, fused residual add, backward)
// and their run-time dispatch. Highway compiles the HWY_NAMESPACE part once per x86-64 target;
// the HWY_ONCE part picks the best target for this CPU and spreads rows over OpenMP threads.
//
// Numerics (docs/numerics.md): sums, means and variances accumulate in float64 lanes (floats
// are promoted on load), the variance is taken from centred values in a second pass over the
// row (which is then in cache), and each output is one float32 rounding of a float64 value,
// followed for the affine step by one float32 fused multiply-add.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/norm_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "hwy/highway.h"
#include "ops/cpu/kernels.hpp"

#include <cmath>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DoubleTag = hn::ScalableTag<double>;
// As many float lanes as double lanes: floats are loaded half a register at a time and promoted.
using FloatTag = hn::Rebind<float, DoubleTag>;

// Shifted sums of one row: with d = x - shift, sum(d) and sum(d^2), in float64. Choosing the
// shift from the row itself (its first element) keeps the one-pass variance
// sum(d^2)/D - (sum(d)/D)^2 exact to float64 rounding times D: no element lies further than
// sqrt(D) standard deviations from the mean, so the cancellation is bounded, unlike the
// textbook E[x^2] - E[x]^2 whose error grows with mean^2 / variance.
struct ShiftedSums {
  double sum = 0;
  double squares = 0;
};

ShiftedSums shifted_sums_row(const float* HWY_RESTRICT x, int64_t dim, double shift) {
  const DoubleTag dd;
  const FloatTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(dd));
  const auto shift_v = hn::Set(dd, shift);
  auto sum0 = hn::Zero(dd), sum1 = hn::Zero(dd), sq0 = hn::Zero(dd), sq1 = hn::Zero(dd);
  int64_t i = 0;
  for (; i + 2 * n <= dim; i += 2 * n) {
    const auto d0 = hn::Sub(hn::PromoteTo(dd, hn::LoadU(df, x + i)), shift_v);
    const auto d1 = hn::Sub(hn::PromoteTo(dd, hn::LoadU(df, x + i + n)), shift_v);
    sum0 = hn::Add(sum0, d0);
    sum1 = hn::Add(sum1, d1);
    sq0 = hn::MulAdd(d0, d0, sq0);
    sq1 = hn::MulAdd(d1, d1, sq1);
  }
  for (; i + n <= dim; i += n) {
    const auto d0 = hn::Sub(hn::PromoteTo(dd, hn::LoadU(df, x + i)), shift_v);
    sum0 = hn::Add(sum0, d0);
    sq0 = hn::MulAdd(d0, d0, sq0);
  }
  ShiftedSums sums{hn::GetLane(hn::SumOfLanes(dd, hn::Add(sum0, sum1))),
                   hn::GetLane(hn::SumOfLanes(dd, hn::Add(sq0, sq1)))};
  for (; i < dim; ++i) {
    const double d = static_cast<double>(x[i]) - shift;
    sums.sum += d;
    sums.squares += d * d;
  }
  return sums;
}

// h = x + residual (one float32 rounding, as the unfused add) is stored, and its shifted sums
// returned. h may be x or residual: each element is loaded before it is stored.
ShiftedSums add_and_sum_row(const float* x, const float* residual, float* h, int64_t dim,
                            double shift) {
  const DoubleTag dd;
  const FloatTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(dd));
  const auto shift_v = hn::Set(dd, shift);
  auto sum0 = hn::Zero(dd), sq0 = hn::Zero(dd);
  int64_t i = 0;
  for (; i + n <= dim; i += n) {
    const auto h0 = hn::Add(hn::LoadU(df, x + i), hn::LoadU(df, residual + i));
    hn::StoreU(h0, df, h + i);
    const auto d0 = hn::Sub(hn::PromoteTo(dd, h0), shift_v);
    sum0 = hn::Add(sum0, d0);
    sq0 = hn::MulAdd(d0, d0, sq0);
  }
  ShiftedSums sums{hn::GetLane(hn::SumOfLanes(dd, sum0)), hn::GetLane(hn::SumOfLanes(dd, sq0))};
  for (; i < dim; ++i) {
    h[i] = x[i] + residual[i];
    const double d = static_cast<double>(h[i]) - shift;
    sums.sum += d;
    sums.squares += d * d;
  }
  return sums;
}

// Mean and population variance from shifted sums (the variance clamped at 0 against rounding).
struct RowMoments {
  double mean;
  double variance;
};
RowMoments moments_from(const ShiftedSums& sums, double shift, int64_t dim, bool centre) {
  const double count = static_cast<double>(dim);
  if (!centre) return {0.0, sums.squares / count};  // RMSNorm: shift is 0, mean(x^2)
  const double mean_shifted = sums.sum / count;
  const double variance = sums.squares / count - mean_shifted * mean_shifted;
  return {shift + mean_shifted, variance < 0 ? 0.0 : variance};  // NaN stays NaN
}

// The affine step for one element, as the vector paths do it.
float affine_scalar(float x_hat, const NormForward& a, int64_t i) {
  if (a.gamma) {
    if (a.zero_centred_gamma) return std::fma(x_hat, a.gamma[i], x_hat);
    return a.beta ? std::fma(x_hat, a.gamma[i], a.beta[i]) : x_hat * a.gamma[i];
  }
  return a.beta ? x_hat + a.beta[i] : x_hat;
}

// y = x_hat * scale + beta with x_hat = (x - centre) * rstd, the scale being gamma, 1 + gamma
// (x_hat * gamma + x_hat in one fused multiply-add) or 1. y may be x.
// This pass runs in float32 lanes, twice as wide as float64 ones: the float64 centre is split
// into hi + lo floats, and x - hi is exact whenever x is within a factor 2 of the centre (the
// large-mean rows where cancellation matters), so x_hat carries at most
// about three float32 roundings (one when x is near the centre, and for RMSNorm).
void normalise_row(const float* x, double centre, double rstd, const NormForward& a, float* y) {
  const hn::ScalableTag<float> df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const float centre_hi = static_cast<float>(centre);
  const float centre_lo = static_cast<float>(centre - static_cast<double>(centre_hi));
  // rstd too is split, so that centred * rstd is rounded once (fma(c, hi, c * lo)), not twice.
  const float rstd_hi = static_cast<float>(rstd);
  const float rstd_lo = static_cast<float>(rstd - static_cast<double>(rstd_hi));
  const auto hi_v = hn::Set(df, centre_hi);
  const auto lo_v = hn::Set(df, centre_lo);
  const auto rstd_hi_v = hn::Set(df, rstd_hi);
  const auto rstd_lo_v = hn::Set(df, rstd_lo);
  const float* gamma = a.gamma;
  const float* beta = a.beta;
  auto affine = [&](auto x_hat, int64_t i) {
    if (gamma) {
      const auto g = hn::LoadU(df, gamma + i);
      if (a.zero_centred_gamma) return hn::MulAdd(x_hat, g, x_hat);
      return beta ? hn::MulAdd(x_hat, g, hn::LoadU(df, beta + i)) : hn::Mul(x_hat, g);
    }
    return beta ? hn::Add(x_hat, hn::LoadU(df, beta + i)) : x_hat;
  };
  int64_t i = 0;
  for (; i + n <= a.dim; i += n) {
    const auto centred = hn::Sub(hn::Sub(hn::LoadU(df, x + i), hi_v), lo_v);
    const auto x_hat = hn::MulAdd(centred, rstd_hi_v, hn::Mul(centred, rstd_lo_v));
    hn::StoreU(affine(x_hat, i), df, y + i);
  }
  for (; i < a.dim; ++i) {
    const float centred = (x[i] - centre_hi) - centre_lo;
    y[i] = affine_scalar(std::fma(centred, rstd_hi, centred * rstd_lo), a, i);
  }
}

// The same in float64 lanes, for rows whose spread is so small (rstd >= 2^64: denormal-range
// inputs with eps = 0) that rstd or the centre's low part would not survive float32.
void normalise_row_float64(const float* x, double centre, double rstd, const NormForward& a,
                           float* y) {
  const DoubleTag dd;
  const FloatTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(dd));
  const auto centre_v = hn::Set(dd, centre);
  const auto rstd_v = hn::Set(dd, rstd);
  const float* gamma = a.gamma;
  const float* beta = a.beta;
  int64_t i = 0;
  for (; i + n <= a.dim; i += n) {
    const auto x_hat = hn::DemoteTo(
        df, hn::Mul(hn::Sub(hn::PromoteTo(dd, hn::LoadU(df, x + i)), centre_v), rstd_v));
    auto out = x_hat;
    if (gamma) {
      const auto g = hn::LoadU(df, gamma + i);
      if (a.zero_centred_gamma) {
        out = hn::MulAdd(x_hat, g, x_hat);
      } else if (beta) {
        out = hn::MulAdd(x_hat, g, hn::LoadU(df, beta + i));
      } else {
        out = hn::Mul(x_hat, g);
      }
    } else if (beta) {
      out = hn::Add(x_hat, hn::LoadU(df, beta + i));
    }
    hn::StoreU(out, df, y + i);
  }
  for (; i < a.dim; ++i) {
    const float x_hat = static_cast<float>((static_cast<double>(x[i]) - centre) * rstd);
    y[i] = affine_scalar(x_hat, a, i);
  }
}

void fill_row(float* y, int64_t dim, float value) {
  for (int64_t i = 0; i < dim; ++i) y[i] = value;
}

void norm_forward_rows(const NormForward& a, int64_t begin, int64_t end) {
  for (int64_t row = begin; row < end; ++row) {
    const int64_t offset = row * a.dim;
    const float* x = a.x + offset;
    ShiftedSums sums;
    double shift = 0;
    if (a.residual) {
      if (a.centre) shift = static_cast<double>(x[0] + a.residual[offset]);
      sums = add_and_sum_row(x, a.residual + offset, a.h + offset, a.dim, shift);
      x = a.h + offset;
    } else {
      if (a.centre) shift = static_cast<double>(x[0]);
      sums = shifted_sums_row(x, a.dim, shift);
    }
    const RowMoments moments = moments_from(sums, shift, a.dim, a.centre);
    float* y = a.y + offset;
    if (!std::isfinite(sums.sum) || !std::isfinite(moments.variance)) {
      // A NaN or Inf in the row poisons this row only.
      fill_row(y, a.dim, std::numeric_limits<float>::quiet_NaN());
      if (a.mean) a.mean[row] = std::numeric_limits<float>::quiet_NaN();
      if (a.rstd) a.rstd[row] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const double rstd = 1.0 / std::sqrt(moments.variance + a.eps);
    // Zero variance with eps = 0: every centred value is exactly 0 and so is x_hat (not 0 * inf).
    if (!std::isfinite(rstd)) {
      normalise_row(x, moments.mean, 0.0, a, y);
    } else if (rstd < 0x1p64) {
      normalise_row(x, moments.mean, rstd, a, y);
    } else {
      normalise_row_float64(x, moments.mean, rstd, a, y);
    }
    if (a.mean) a.mean[row] = static_cast<float>(moments.mean);
    if (a.rstd) a.rstd[row] = static_cast<float>(rstd);
  }
}

// One row of the backward. With x_hat = (x - mean) * rstd and g = dy * scale:
//   dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)) [+ dh_next]   (no mean(g) for RMSNorm)
// and the row's dy * x_hat and dy are added to the float64 partial sums of dgamma and dbeta.
// Pass 1 (x and dy from memory) gathers the statistics and both means in shifted form:
// sum(g * x_hat) = rstd * (sum(g * d) - (mean - shift) * sum(g)) with d = x - shift.
// Pass 2 (in cache) writes dx.
void norm_backward_row(const NormBackward& a, int64_t row, double* HWY_RESTRICT dgamma_partial,
                       double* HWY_RESTRICT dbeta_partial) {
  const DoubleTag dd;
  const FloatTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(dd));
  const int64_t dim = a.dim;
  const int64_t offset = row * dim;
  const float* x = a.x + offset;
  const float* dy = a.dy + offset;
  const float* dh_next = a.dh_next ? a.dh_next + offset : nullptr;
  float* dx = a.dx + offset;
  const float* gamma = a.gamma;
  const double count = static_cast<double>(dim);
  const double shift = a.centre ? static_cast<double>(x[0]) : 0.0;

  const auto one = hn::Set(dd, 1.0);
  // g = dy * scale in float64, where scale is gamma, 1 + gamma or 1.
  auto scaled = [&](auto dy_v, int64_t i) {
    if (!gamma) return dy_v;
    const auto g = hn::PromoteTo(dd, hn::LoadU(df, gamma + i));
    return hn::Mul(dy_v, a.zero_centred_gamma ? hn::Add(one, g) : g);
  };
  auto scaled_scalar = [&](double dy_i, int64_t i) {
    if (!gamma) return dy_i;
    const double g = static_cast<double>(gamma[i]);
    return dy_i * (a.zero_centred_gamma ? 1.0 + g : g);
  };

  // Pass 1: sum(d), sum(d^2), sum(g), sum(g * d).
  const auto shift_v = hn::Set(dd, shift);
  auto sum_d = hn::Zero(dd), sum_d2 = hn::Zero(dd), sum_g = hn::Zero(dd), sum_gd = hn::Zero(dd);
  int64_t i = 0;
  for (; i + n <= dim; i += n) {
    const auto d = hn::Sub(hn::PromoteTo(dd, hn::LoadU(df, x + i)), shift_v);
    const auto g = scaled(hn::PromoteTo(dd, hn::LoadU(df, dy + i)), i);
    sum_d = hn::Add(sum_d, d);
    sum_d2 = hn::MulAdd(d, d, sum_d2);
    sum_g = hn::Add(sum_g, g);
    sum_gd = hn::MulAdd(g, d, sum_gd);
  }
  ShiftedSums sums{hn::GetLane(hn::SumOfLanes(dd, sum_d)), hn::GetLane(hn::SumOfLanes(dd, sum_d2))};
  double total_g = hn::GetLane(hn::SumOfLanes(dd, sum_g));
  double total_gd = hn::GetLane(hn::SumOfLanes(dd, sum_gd));
  for (; i < dim; ++i) {
    const double d = static_cast<double>(x[i]) - shift;
    const double g = scaled_scalar(static_cast<double>(dy[i]), i);
    sums.sum += d;
    sums.squares += d * d;
    total_g += g;
    total_gd += g * d;
  }
  const RowMoments moments = moments_from(sums, shift, dim, a.centre);
  double rstd = a.saved_rstd ? static_cast<double>(a.saved_rstd[row])
                             : 1.0 / std::sqrt(moments.variance + a.eps);
  // A zero-variance row with eps = 0 has x_hat = 0 (not 0 * inf); its dx stays undefined.
  const double xhat_scale = std::isinf(rstd) ? 0.0 : rstd;
  const double mean_g = a.centre ? total_g / count : 0.0;
  const double mean_g_xhat =
      xhat_scale * (total_gd - (moments.mean - shift) * total_g) / count;

  // Pass 2: dx, and the dgamma/dbeta partial sums. dx may alias x, dy or dh_next: every input
  // element is loaded before dx's element is stored.
  const auto mean_v = hn::Set(dd, moments.mean);
  const auto xhat_scale_v = hn::Set(dd, xhat_scale);
  const auto mean_g_v = hn::Set(dd, mean_g);
  const auto mean_g_xhat_v = hn::Set(dd, mean_g_xhat);
  const auto rstd_v = hn::Set(dd, rstd);
  i = 0;
  for (; i + n <= dim; i += n) {
    const auto dy_v = hn::PromoteTo(dd, hn::LoadU(df, dy + i));
    const auto x_hat =
        hn::Mul(hn::Sub(hn::PromoteTo(dd, hn::LoadU(df, x + i)), mean_v), xhat_scale_v);
    const auto g = scaled(dy_v, i);
    auto grad = hn::Mul(rstd_v, hn::Sub(hn::Sub(g, mean_g_v), hn::Mul(x_hat, mean_g_xhat_v)));
    if (dh_next) grad = hn::Add(grad, hn::PromoteTo(dd, hn::LoadU(df, dh_next + i)));
    if (dgamma_partial) {
      hn::StoreU(hn::MulAdd(dy_v, x_hat, hn::LoadU(dd, dgamma_partial + i)), dd,
                 dgamma_partial + i);
    }
    if (dbeta_partial) {
      hn::StoreU(hn::Add(dy_v, hn::LoadU(dd, dbeta_partial + i)), dd, dbeta_partial + i);
    }
    hn::StoreU(hn::DemoteTo(df, grad), df, dx + i);
  }
  for (; i < dim; ++i) {
    const double dy_i = static_cast<double>(dy[i]);
    const double x_hat = (static_cast<double>(x[i]) - moments.mean) * xhat_scale;
    double grad = rstd * (scaled_scalar(dy_i, i) - mean_g - x_hat * mean_g_xhat);
    if (dh_next) grad += static_cast<double>(dh_next[i]);
    if (dgamma_partial) dgamma_partial[i] += dy_i * x_hat;
    if (dbeta_partial) dbeta_partial[i] += dy_i;
    dx[i] = static_cast<float>(grad);
  }
}

void norm_backward_rows(const NormBackward& a, int64_t begin, int64_t end, double* dgamma_partial,
                        double* dbeta_partial) {
  for (int64_t row = begin; row < end; ++row) {
    norm_backward_row(a, row, dgamma_partial, dbeta_partial);
  }
}

// The name of the target this copy of the kernels was compiled for (for the tests).
const char* compiled_target_name() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "ops/cpu/threading.hpp"

namespace addnorm::cpu {

HWY_EXPORT(norm_forward_rows);
HWY_EXPORT(norm_backward_rows);
HWY_EXPORT(compiled_target_name);

void norm_forward(const NormForward& args) {
  parallel_rows(args.rows, args.dim, [&](int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(norm_forward_rows)(args, begin, end);
  });
}

void norm_backward(const NormBackward& args) {
  // dgamma and dbeta: each fixed chunk of rows sums into its own float64 partials, in row order;
  // the chunks are then added in chunk order. The chunks depend only on the row count, so the
  // result is bitwise the same for any number of threads.
  const bool want_partials = args.dgamma || args.dbeta;
  const int64_t chunks = want_partials ? reduction_chunks(args.rows) : 1;
  PartialSums partials(want_partials ? chunks : 0, args.dim, args.dgamma != nullptr,
                       args.dbeta != nullptr);
  parallel_chunks(chunks, args.rows, args.dim, [&](int64_t chunk, int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(norm_backward_rows)(args, begin, end, partials.dgamma(chunk),
                                             partials.dbeta(chunk));
  });
  if (args.dgamma) partials.reduce_dgamma(args.dgamma);
  if (args.dbeta) partials.reduce_dbeta(args.dbeta);
}

void norm_forward_range(const NormForward& args, int64_t begin, int64_t end) {
  HWY_DYNAMIC_DISPATCH(norm_forward_rows)(args, begin, end);
}

void norm_backward_range(const NormBackward& args, int64_t begin, int64_t end,
                         double* dgamma_partial, double* dbeta_partial) {
  HWY_DYNAMIC_DISPATCH(norm_backward_rows)(args, begin, end, dgamma_partial, dbeta_partial);
}

std::vector<int64_t> available_targets() {
  std::vector<int64_t> targets;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) targets.push_back(target);
  return targets;
}

void force_target(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

std::string target_name(int64_t target) { return hwy::TargetName(target); }

std::string current_target_name() { return HWY_DYNAMIC_DISPATCH(compiled_target_name)(); }

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
