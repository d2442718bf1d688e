// The scalar numerics every norm kernel shares (LayerNorm, RMSNorm, BatchNorm; forward and
// backward; float32 and 16-bit rows), defined once: the float32 hi + lo split of a float64
// constant, when a row (or channel) may be normalised in float32 lanes, and the affine form of a
// call, fixed per call so each form gets its own branch-free loop. The SIMD halves of these
// steps are in lane_ops-inl.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace addnorm::cpu {

// The float32-lanes passes of the norms round centred values x - mean to float32 before scaling
// them by rstd. Below a spread of 2^-100 those values lie near or inside float32's denormal
// range, where rounding is absolute (to multiples of 2^-149), not relative: with eps > 0, rstd
// stays ordinary (~316 at eps = 1e-5) and would magnify that rounding to hundreds of ulp of
// x_hat (and of dgamma). Rows whose variance (mean square for RMSNorm) is below this bound take
// the float64 lanes instead; ordinary rows never come near it.
inline constexpr double kFloat32LanesMinVariance = 0x1p-200;

// A float64 value (plus, for a mean, its low part: RowMoments) as two floats, hi + lo: the
// float32 lanes subtract a centre as (v - hi) - lo, exact whenever v is within a factor 2 of the
// centre (the large-mean rows where cancellation matters), and scale by rstd as
// fma(c, rstd_hi, c * rstd_lo), rounded once. value - hi is exact, so lo carries the low part
// rounded once to float32: an error of 2^-24 of lo, which is at most half a float32 ulp of hi and
// so at most 2^-24 of any nonzero v - hi; with the subtraction's own rounding a centred value is
// within about 2^-23 of exact.
struct HiLo {
  float hi;
  float lo;
  double value() const { return static_cast<double>(hi) + static_cast<double>(lo); }
};
inline HiLo split(double value, double low = 0.0) {
  const float hi = static_cast<float>(value);
  return {hi, static_cast<float>((value - static_cast<double>(hi)) + low)};
}

// The rounding error of s = a + b (Knuth's TwoSum, no condition on the operands' sizes): a + b
// is exactly s + two_sum_low(a, b, s). Needs the additions as written (no -ffast-math, no
// reassociation), as the library is built.
inline double two_sum_low(double a, double b, double s) {
  const double b_part = s - a;
  return (a - (s - b_part)) + (b - b_part);
}

// Mean and population variance (mean square for RMSNorm, `centre` false) of `dim` values from
// their sums shifted by `shift`: sum = sum(x - shift), squares = sum((x - shift)^2). The
// variance is clamped at 0 against rounding; a NaN stays NaN.
// The mean is shift + sum / dim held as mean + mean_lo, its float64 rounding kept in mean_lo:
// a float64 mean alone is off by up to 2^-53 of itself, and a value next to a large mean can lie
// much closer to it than that (1e7 everywhere but one element 1e7 + 1 in a row of 1023: centred
// values of 1/1023, 2^-30 of the mean, whose rounding alone put outputs 15 float32 ulp out).
// Centring subtracts both parts: (x - hi) - lo in float32 lanes (split(mean, mean_lo)),
// (x - mean) - mean_lo in float64 lanes.
struct RowMoments {
  double mean;
  double variance;
  double mean_lo = 0.0;
};
// The same before the shift is added back: offset = mean(x - shift), variance not yet clamped.
struct ShiftedMoments {
  double offset;
  double variance;
};
inline ShiftedMoments shifted_moments(double sum, double squares, int64_t dim) {
  const double count = static_cast<double>(dim);
  const double offset = sum / count;
  return {offset, squares / count - offset * offset};
}
inline RowMoments moments_about(double shift, ShiftedMoments m) {
  const double mean = shift + m.offset;
  return {mean, m.variance < 0 ? 0.0 : m.variance, two_sum_low(shift, m.offset, mean)};
}
inline RowMoments moments_from(double sum, double squares, double shift, int64_t dim, bool centre) {
  if (!centre) return {0.0, squares / static_cast<double>(dim)};  // RMSNorm: shift 0, mean(x^2)
  return moments_about(shift, shifted_moments(sum, squares, dim));
}

// Float32 block sums (the 16-bit streams' statistics, forward and backward): values are summed
// in float32 lanes, each lane flushed into float64 after this many additions, so a block's
// rounding is at most about this many float32 roundings of the values' magnitude. 64 additions
// put a bfloat16 row's rstd up to 7.1 float32 ulp from float64 with 4 lanes (SSE4), 6.4 with 8
// (AVX2) and 5.0 with 16 (AVX3, D = 8192), against the 4 that float32 rows keep; 16 additions
// keep it within 1.9 on every lane count (dev/block_sums_error.py emulates the sums, 200 rows a
// shape; the case table checks the kernels).
inline constexpr int64_t kFloat32BlockAdditions = 16;

// Whether sums shifted by an estimate of the mean (offset = mean(d), shifted_variance =
// mean(d^2) - offset^2) keep the float32 block sums' rounding: var = E[d^2] - E[d]^2 amplifies
// it by (var + E[d]^2) / var, at most 4 when E[d]^2 <= 3 var. Otherwise (the estimate was poor:
// outliers among the values it came from) the sums are taken again, centred on the mean. NaN
// fails.
inline constexpr double kCloseEstimateSpread = 3;
inline bool shift_estimate_close(double offset, double shifted_variance) {
  return offset * offset <= kCloseEstimateSpread * shifted_variance;
}

// Whether float32 block sums of squares hold a row's variance (mean square for RMSNorm): beyond
// 2^100 a square may have overflowed float32 (values beyond ~1e19), below 2^-100 squares lose
// precision to float32's denormal range (values below ~1e-19). Such rows (and NaN) are summed
// again in float64.
inline constexpr double kBlockSumsMinVariance = 0x1p-100;
inline constexpr double kBlockSumsMaxVariance = 0x1p100;
inline bool block_sums_hold(double variance) {
  return variance >= kBlockSumsMinVariance && variance <= kBlockSumsMaxVariance;
}

// Where to take a row's float32 block sums again, from the moments of those shifted by
// `estimate` (shifted_moments of sum(d) and sum(d^2), d = v - estimate): nothing where the
// estimate was close (shift_estimate_close) or where the shifted variance is outside
// block_sums_hold's range or NaN (such sums fail the caller's block_sums_hold on the moments it
// takes from them, and the row goes to float64); otherwise the row's mean, split as hi + lo, to
// centre on.
inline std::optional<HiLo> recentre_at(float estimate, ShiftedMoments shifted) {
  if (shift_estimate_close(shifted.offset, shifted.variance) ||
      !block_sums_hold(shifted.variance)) {
    return std::nullopt;
  }
  return split(static_cast<double>(estimate) + shifted.offset);
}

// 1 / sqrt(variance + eps), the one rule of every statistics pass (the reference kernels' rstd_of
// is the same rule). A variance + eps of 0 or below has no root, and gives NaN (a negative eps
// can do that to a row of any spread, as in PyTorch), except for a zero-spread row with eps = 0:
// its rstd is +inf, and every centred value of it exactly 0 (xhat_scale).
inline double rstd_of(double variance, double eps) {
  const double sum = variance + eps;
  if (sum > 0) return 1.0 / std::sqrt(sum);
  return sum == 0 && variance == 0 ? std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::quiet_NaN();
}
// Inference's 1 / sqrt(running_var + eps): the values are not known to be centred, so a
// running_var + eps of 0 or below gives NaN outright.
inline double inference_rstd_of(double running_var, double eps) {
  const double rstd = rstd_of(running_var, eps);
  return std::isinf(rstd) ? std::numeric_limits<double>::quiet_NaN() : rstd;
}

// What x_hat = (x - mean) * rstd scales by: rstd_of is +inf only for a zero-spread row (or
// channel) with eps = 0, whose centred values are all exactly 0, so x_hat is 0 (not 0 * inf).
inline double xhat_scale(double rstd) {
  return std::isinf(rstd) ? 0.0 : rstd;
}

// Whether float32 lanes hold a row's normalisation: rstd and its low part are normal float32
// numbers (below 2^64, at least 2^-100), x - centre cannot overflow (|centre| < 2^100: any
// x - centre_hi then rounds to at most FLT_MAX), and the spread is clear of float32's denormal
// grid (kFloat32LanesMinVariance). NaNs fail every test.
// The bounds are named for the lanes' form of these tests too (lane_ops-inl.h).
inline constexpr double kFloat32LanesMaxCentre = 0x1p100;
inline constexpr double kFloat32LanesMaxRstd = 0x1p64;
inline constexpr double kFloat32LanesMinRstd = 0x1p-100;
inline bool float32_lanes_hold(double centre, double variance, double rstd) {
  return std::fabs(centre) < kFloat32LanesMaxCentre && rstd < kFloat32LanesMaxRstd &&
         rstd >= kFloat32LanesMinRstd && variance >= kFloat32LanesMinVariance;
}

// The same for a forward's normalising pass, which also takes the zero-spread rows with eps = 0
// (rstd infinite, scaled by xhat_scale = 0: every output is then exactly the shift).
inline bool forward_fits_float32(double centre, double variance, double rstd) {
  return (std::isinf(rstd) && std::fabs(centre) < kFloat32LanesMaxCentre) ||
         float32_lanes_hold(centre, variance, rstd);
}

// The affine step of a norm: y = x_hat * scale + shift, the scale gamma, 1 + gamma (x_hat *
// gamma + x_hat in one multiply-add) or 1, the shift beta or 0. A backward uses only the scale
// (none, gamma, one_plus_gamma): scale_only maps a form onto those.
enum class Affine { none, gamma, gamma_beta, beta, one_plus_gamma };

inline Affine affine_form(const void* gamma, const void* beta, bool zero_centered_gamma) {
  if (gamma) {
    if (zero_centered_gamma) return Affine::one_plus_gamma;
    return beta ? Affine::gamma_beta : Affine::gamma;
  }
  return beta ? Affine::beta : Affine::none;
}

constexpr Affine scale_only(Affine form) {
  if (form == Affine::gamma_beta) return Affine::gamma;
  if (form == Affine::beta) return Affine::none;
  return form;
}

// Calls body(std::integral_constant<Affine, form>{}): the form as a template argument.
template <class Body>
void with_affine(Affine form, const Body& body) {
  switch (form) {
    case Affine::none:
      return body(std::integral_constant<Affine, Affine::none>{});
    case Affine::gamma:
      return body(std::integral_constant<Affine, Affine::gamma>{});
    case Affine::gamma_beta:
      return body(std::integral_constant<Affine, Affine::gamma_beta>{});
    case Affine::beta:
      return body(std::integral_constant<Affine, Affine::beta>{});
    case Affine::one_plus_gamma:
      return body(std::integral_constant<Affine, Affine::one_plus_gamma>{});
  }
}

// Calls body(std::bool_constant<flag>{}): a run-time flag as a template argument.
template <class Body>
void with_flag(bool flag, const Body& body) {
  if (flag) {
    body(std::true_type{});
  } else {
    body(std::false_type{});
  }
}

}  // namespace addnorm::cpu
