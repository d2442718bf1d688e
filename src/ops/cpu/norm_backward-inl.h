// Per-target SIMD row kernels for the LayerNorm and RMSNorm backward (the forward is
// norm_forward-inl.h; both share norm_numerics.hpp, lane_ops-inl.h and row_storage-inl.h), on
// rows of any storage type. Highway's "-inl.h" convention: each stream storage's translation
// unit (norm_backward_unit.inc) includes it once per target, so no one file compiles all nine
// pairs (that file took 128 s on a 2-core AMD EPYC); norm_backward_kernels.cpp picks the unit
// and spreads rows over OpenMP threads.
//
// Numerics (docs/numerics.md): a row's sums accumulate in float64 lanes (floats promoted on
// load), or for a 16-bit stream in float32 blocks as its forward's statistics do
// (backward_block_sums); each dx is rounded once to its storage type from float64 or from a few
// float32 fused multiply-adds.
#if defined(ADDNORM_OPS_CPU_NORM_BACKWARD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_NORM_BACKWARD_INL_H_
#undef ADDNORM_OPS_CPU_NORM_BACKWARD_INL_H_
#else
#define ADDNORM_OPS_CPU_NORM_BACKWARD_INL_H_
#endif

#include "hwy/highway.h"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/lane_ops-inl.h"
#include "ops/cpu/row_storage-inl.h"
#include "ops/cpu/shifted_sums-inl.h"
#include "ops/cpu/tuning.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

#include "hwy/cache_control.h"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- backward ----------------------------------------------------------------------------
// One row: with x_hat = (x - mean) * rstd and g = dy * scale,
//   dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)) [+ dh_next]   (no mean(g) for RMSNorm)
// and the row's dy * x_hat and dy are added to the float64 partial sums of dgamma and dbeta.
// Pass 1 (x and dy from memory) gathers the statistics and both means in shifted form, in
// float64 lanes (a 16-bit stream: float32 blocks, backward_block_sums):
// sum(g * x_hat) = rstd * (sum(g * d) - (mean - shift) * sum(g)) with d = x - shift.
// Pass 2 (in cache) writes dx in float32 lanes, twice as wide as float64 ones.

struct BackwardSums {
  ShiftedSums x;     // of d = x - shift
  double g = 0;      // sum(g)
  double gd = 0;     // sum(g * d)
  double max_g = 0;  // max |g|: whether g and its sums fit the float32 pass
};

// Adds elements [begin, end) of a row to its pass-1 sums one at a time in float64 (the ends of
// rows short of a vector): d = x - shift, g = dy * scale (exact in float64).
template <class S, class B, Affine kScale>
void add_backward_elements(BackwardSums& sums, const typename S::Elem* HWY_RESTRICT x,
                           const typename B::Elem* HWY_RESTRICT dy, const float* HWY_RESTRICT gamma,
                           int64_t begin, int64_t end, double shift) {
  for (int64_t i = begin; i < end; ++i) {
    const double d = static_cast<double>(load_one<S>(x, i)) - shift;
    double g = static_cast<double>(load_one<B>(dy, i));
    if constexpr (kScale != Affine::none) {
      const double scale = static_cast<double>(gamma[i]);
      g *= kScale == Affine::one_plus_gamma ? 1.0 + scale : scale;
    }
    sums.x.sum += d;
    sums.x.squares += d * d;
    sums.g += g;
    sums.gd += g * d;
    sums.max_g = std::max(sums.max_g, std::fabs(g));  // NaN is caught by the sums
  }
}

// Pass 1's terms for RowSumsRun (shifted_sums-inl.h), which walks the row: vector v adds to set
// v % 2 (each chain of additions then waits for the adder half as often: a row in cache is
// latency-bound). kCentre: LayerNorm (sum(d) and sum(g) are needed). sum(d^2) gives rstd when
// none is saved, and always the row's spread, which decides whether pass 2 may run in float32
// lanes.
template <class S, class B, Affine kScale, bool kCentre>
struct BackwardTerms {
  struct Lanes {
    hn::Vec<DoubleTag> d, d2, g, gd, max_g;
  };
  using Sums = BackwardSums;

  BackwardTerms(const typename S::Elem* HWY_RESTRICT x_in,
                const typename B::Elem* HWY_RESTRICT dy_in, const float* HWY_RESTRICT gamma_in,
                double shift_in)
      : x(x_in),
        dy(dy_in),
        gamma(gamma_in),
        shift(shift_in),
        shift_v(hn::Set(DoubleTag(), shift_in)) {}

  const typename S::Elem* HWY_RESTRICT x;
  const typename B::Elem* HWY_RESTRICT dy;
  const float* HWY_RESTRICT gamma;
  double shift;
  hn::Vec<DoubleTag> shift_v;  // shift in every lane

  static Lanes zero() {
    const auto z = hn::Zero(DoubleTag());
    return {z, z, z, z, z};
  }
  static Lanes combine(const Lanes& a, const Lanes& b) {
    return {hn::Add(a.d, b.d), hn::Add(a.d2, b.d2), hn::Add(a.g, b.g), hn::Add(a.gd, b.gd),
            hn::Max(a.max_g, b.max_g)};
  }
  HWY_INLINE void prefetch(int64_t i) const {
    hwy::Prefetch(x + i + kPrefetchFloats);
    hwy::Prefetch(dy + i + kPrefetchFloats);
  }
  HWY_INLINE void add(Lanes& set, int64_t i) const {
    const DoubleTag dd;
    const HalfFloatTag df;  // half a register of floats, promoted
    const auto d = hn::Sub(hn::PromoteTo(dd, load<S>(df, x + i)), shift_v);
    // g = dy * scale in float64 (exact: a product of two floats fits a double).
    auto g = hn::PromoteTo(dd, load<B>(df, dy + i));
    if constexpr (kScale != Affine::none) {
      const auto scale = hn::PromoteTo(dd, hn::LoadU(df, gamma + i));
      g = hn::Mul(g, kScale == Affine::one_plus_gamma ? hn::Add(hn::Set(dd, 1.0), scale) : scale);
    }
    if constexpr (kCentre) set.d = hn::Add(set.d, d);
    set.d2 = hn::MulAdd(d, d, set.d2);
    if constexpr (kCentre) set.g = hn::Add(set.g, g);
    set.gd = hn::MulAdd(g, d, set.gd);
    set.max_g = hn::Max(set.max_g, hn::Abs(g));
  }
  Sums total(const Lanes& set) const {
    const DoubleTag dd;
    auto sum = [&](hn::Vec<DoubleTag> v) HWY_ATTR { return hn::GetLane(hn::SumOfLanes(dd, v)); };
    return {{sum(set.d), sum(set.d2)},
            sum(set.g),
            sum(set.gd),
            hn::GetLane(hn::MaxOfLanes(dd, set.max_g))};
  }
  void add_elements(Sums& sums, int64_t begin, int64_t end) const {
    add_backward_elements<S, B, kScale>(sums, x, dy, gamma, begin, end, shift);
  }
};
template <class S, class B, Affine kScale, bool kCentre>
using BackwardSumsRun = RowSumsRun<BackwardTerms<S, B, kScale, kCentre>, 2>;
template <class S, class B, Affine kScale, bool kCentre>
BackwardSumsRun<S, B, kScale, kCentre> backward_sums_run(const typename S::Elem* HWY_RESTRICT x,
                                                         const typename B::Elem* HWY_RESTRICT dy,
                                                         const float* HWY_RESTRICT gamma,
                                                         int64_t dim, double shift) {
  return BackwardSumsRun<S, B, kScale, kCentre>(
      BackwardTerms<S, B, kScale, kCentre>(x, dy, gamma, shift), dim);
}

// What pass 2 needs of a row, from pass 1.
struct BackwardRow {
  double mean;         // of x (0 for RMSNorm)
  double variance;     // of x (mean(x^2) for RMSNorm), whether or not rstd is saved
  double rstd;         // as given or computed; may be +inf with eps = 0
  double mean_g;       // mean(g), 0 for RMSNorm
  double mean_g_xhat;  // mean(g * x_hat)
  double max_g;        // max |g|
  double mean_lo;      // the mean's low part (RowMoments: the centre is mean + mean_lo)
};

// Pass 2 in float64 lanes, each dx rounded once from float64: for rows that do not fit the
// float32 pass (fits_float32: rstd >= 2^64 or infinite, a spread below 2^-100, non-finite
// statistics).
template <class S, class B, Affine kScale>
void backward_dx_float64(const NormBackward& a, const typename S::Elem* x,
                         const typename B::Elem* dy, const typename S::Elem* dh_next,
                         typename S::Elem* dx, const BackwardRow& r,
                         double* HWY_RESTRICT dgamma_partial, double* HWY_RESTRICT dbeta_partial) {
  const DoubleTag dd;
  const HalfFloatTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(dd));
  const float* gamma = a.gamma;
  const auto one = hn::Set(dd, 1.0);
  // A zero-variance row with eps = 0 has x_hat = 0 (not 0 * inf); its dx stays undefined.
  const double scale = xhat_scale(r.rstd);
  const auto mean_v = hn::Set(dd, r.mean);
  const auto mean_lo_v = hn::Set(dd, r.mean_lo);
  const auto xhat_scale_v = hn::Set(dd, scale);
  const auto mean_g_v = hn::Set(dd, r.mean_g);
  const auto mean_g_xhat_v = hn::Set(dd, r.mean_g_xhat);
  const auto rstd_v = hn::Set(dd, r.rstd);
  auto scaled = [&](auto dy_v, int64_t i) {
    if constexpr (kScale == Affine::none) return dy_v;
    const auto g = hn::PromoteTo(dd, hn::LoadU(df, gamma + i));
    if constexpr (kScale == Affine::gamma) return hn::Mul(dy_v, g);
    if constexpr (kScale == Affine::one_plus_gamma) return hn::Mul(dy_v, hn::Add(one, g));
  };
  // dx may alias x, dy or dh_next: every input element is loaded before dx's is stored.
  int64_t i = 0;
  for (; i + n <= a.dim; i += n) {
    const auto dy_v = hn::PromoteTo(dd, load<B>(df, dy + i));
    const auto x_hat = hn::Mul(
        hn::Sub(hn::Sub(hn::PromoteTo(dd, load<S>(df, x + i)), mean_v), mean_lo_v), xhat_scale_v);
    const auto g = scaled(dy_v, i);
    auto grad = hn::Mul(rstd_v, hn::Sub(hn::Sub(g, mean_g_v), hn::Mul(x_hat, mean_g_xhat_v)));
    if (dh_next) grad = hn::Add(grad, hn::PromoteTo(dd, load<S>(df, dh_next + i)));
    if (dgamma_partial) {
      hn::StoreU(hn::MulAdd(dy_v, x_hat, hn::LoadU(dd, dgamma_partial + i)), dd,
                 dgamma_partial + i);
    }
    if (dbeta_partial) {
      hn::StoreU(hn::Add(dy_v, hn::LoadU(dd, dbeta_partial + i)), dd, dbeta_partial + i);
    }
    store<S>(df, hn::DemoteTo(df, grad), dx + i);
  }
  for (; i < a.dim; ++i) {
    const double dy_i = static_cast<double>(load_one<B>(dy, i));
    const double x_hat = ((static_cast<double>(load_one<S>(x, i)) - r.mean) - r.mean_lo) * scale;
    double g = dy_i;
    if (gamma) g *= kScale == Affine::one_plus_gamma ? 1.0 + gamma[i] : gamma[i];
    double grad = r.rstd * (g - r.mean_g - x_hat * r.mean_g_xhat);
    if (dh_next) grad += static_cast<double>(load_one<S>(dh_next, i));
    if (dgamma_partial) dgamma_partial[i] += dy_i * x_hat;
    if (dbeta_partial) dbeta_partial[i] += dy_i;
    store_one<S>(dx, i, static_cast<float>(grad));
  }
}

// A row's pointers and pass-1 results, for pass 2.
template <class S, class B>
struct BackwardRowData {
  const typename S::Elem* x;
  const typename B::Elem* dy;       // of the branch's type
  const typename S::Elem* dh_next;  // nullable
  typename S::Elem* dx;
  BackwardRow stats;
};

#if HWY_TARGET != HWY_SCALAR  // one lane has no halves to widen: scalar uses the float64 pass
// The float32 constants of one row's dx formula.
struct Float32Row {
  HiLo mean, rstd;
  float mean_g, neg_mean_g_xhat;
};
inline Float32Row float32_row(const BackwardRow& r) {
  Float32Row c;
  c.mean = split(r.mean, r.mean_lo);
  c.rstd = split(r.rstd);
  c.mean_g = static_cast<float>(r.mean_g);
  c.neg_mean_g_xhat = static_cast<float>(-r.mean_g_xhat);
  return c;
}

// Pass 2 in float32 lanes, for kRows consecutive rows at once. x_hat is formed as in the
// forward (hi + lo mean and rstd, so it carries a couple of float32 roundings), g = dy * scale
// is rounded once, and
//   dx = fma(fma(x_hat, -mean(g x_hat), g - mean(g)), rstd, dh_next)
// adds a few more: dx is within a few float32 ulp of the larger of its terms (docs/numerics.md).
// dgamma and dbeta still accumulate in float64 (dy * x_hat is exact there, and long sums keep
// their small terms), row after row in row order; doing kRows rows per column block keeps the
// partials in registers across those rows, which divides their load/store traffic (the
// bottleneck of a one-row pass) by kRows without changing a single rounding.
// With `stream` (every dx row then starts on a vector boundary), dx is written with
// non-temporal stores.
template <class S, class B, Affine kScale, bool kDhNext, bool kDgamma, bool kDbeta, int kRows>
void backward_dx_float32(const BackwardRowData<S, B>* rows, const float* HWY_RESTRICT gamma,
                         const int64_t dim, bool stream, double* HWY_RESTRICT dgamma_partial,
                         double* HWY_RESTRICT dbeta_partial) {
  const hn::ScalableTag<float> df;
  const hn::Half<decltype(df)> dh;
  const hn::Repartition<double, decltype(df)> dd;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const int64_t half = static_cast<int64_t>(hn::Lanes(dd));
  Float32Row c[kRows];
  for (int k = 0; k < kRows; ++k) c[k] = float32_row(rows[k].stats);

  // Element i of row k, in scalar code (the ends of rows).
  auto one = [&](int k, int64_t i) {
    const BackwardRowData<S, B>& row = rows[k];
    const float x_hat = x_hat_one(load_one<S>(row.x, i), c[k].mean, c[k].rstd);
    const float dy = load_one<B>(row.dy, i);
    float g = dy;
    if constexpr (kScale == Affine::gamma) g = dy * gamma[i];
    if constexpr (kScale == Affine::one_plus_gamma) g = mul_add(dy, gamma[i], dy);
    const float t = mul_add(x_hat, c[k].neg_mean_g_xhat, g - c[k].mean_g);
    if constexpr (kDgamma) dgamma_partial[i] += static_cast<double>(dy) * x_hat;
    if constexpr (kDbeta) dbeta_partial[i] += static_cast<double>(dy);
    store_one<S>(
        row.dx, i,
        kDhNext ? mul_add(t, c[k].rstd.hi, load_one<S>(row.dh_next, i)) : t * c[k].rstd.hi);
  };
  auto widen_lo = [&](auto v) HWY_ATTR { return hn::PromoteTo(dd, hn::LowerHalf(dh, v)); };
  auto widen_hi = [&](auto v) HWY_ATTR { return hn::PromoteTo(dd, hn::UpperHalf(dh, v)); };

  int64_t i = 0;
  for (; i + n <= dim; i += n) {
    auto dgamma_lo = hn::Zero(dd), dgamma_hi = hn::Zero(dd);
    auto dbeta_lo = hn::Zero(dd), dbeta_hi = hn::Zero(dd);
    if constexpr (kDgamma) {
      dgamma_lo = hn::LoadU(dd, dgamma_partial + i);
      dgamma_hi = hn::LoadU(dd, dgamma_partial + i + half);
    }
    if constexpr (kDbeta) {
      dbeta_lo = hn::LoadU(dd, dbeta_partial + i);
      dbeta_hi = hn::LoadU(dd, dbeta_partial + i + half);
    }
    for (int k = 0; k < kRows; ++k) {
      const BackwardRowData<S, B>& row = rows[k];
      // dx may alias x, dy or dh_next: every input element is loaded before dx's is stored.
      const auto x_hat =
          x_hat_lanes(load<S>(df, row.x + i), hn::Set(df, c[k].mean.hi), hn::Set(df, c[k].mean.lo),
                      hn::Set(df, c[k].rstd.hi), hn::Set(df, c[k].rstd.lo));
      const auto dy = load<B>(df, row.dy + i);
      auto g = dy;
      if constexpr (kScale == Affine::gamma) g = hn::Mul(dy, hn::LoadU(df, gamma + i));
      if constexpr (kScale == Affine::one_plus_gamma) {
        g = hn::MulAdd(dy, hn::LoadU(df, gamma + i), dy);
      }
      const auto t = hn::MulAdd(x_hat, hn::Set(df, c[k].neg_mean_g_xhat),
                                hn::Sub(g, hn::Set(df, c[k].mean_g)));
      const auto rstd = hn::Set(df, c[k].rstd.hi);
      const auto out =
          kDhNext ? hn::MulAdd(t, rstd, load<S>(df, row.dh_next + i)) : hn::Mul(t, rstd);
      if constexpr (kDgamma) {
        dgamma_lo = hn::MulAdd(widen_lo(dy), widen_lo(x_hat), dgamma_lo);
        dgamma_hi = hn::MulAdd(widen_hi(dy), widen_hi(x_hat), dgamma_hi);
      }
      if constexpr (kDbeta) {
        dbeta_lo = hn::Add(dbeta_lo, widen_lo(dy));
        dbeta_hi = hn::Add(dbeta_hi, widen_hi(dy));
      }
      if constexpr (!S::kHalf) {
        if (stream) {
          hn::Stream(out, df, row.dx + i);
        } else {
          hn::StoreU(out, df, row.dx + i);
        }
      } else {
        store<S>(df, out, row.dx + i);
      }
    }
    if constexpr (kDgamma) {
      hn::StoreU(dgamma_lo, dd, dgamma_partial + i);
      hn::StoreU(dgamma_hi, dd, dgamma_partial + i + half);
    }
    if constexpr (kDbeta) {
      hn::StoreU(dbeta_lo, dd, dbeta_partial + i);
      hn::StoreU(dbeta_hi, dd, dbeta_partial + i + half);
    }
  }
  for (; i < dim; ++i) {
    for (int k = 0; k < kRows; ++k) one(k, i);
  }
}

// Calls the float32 pass 2 instance for this call's flags on kRows rows.
template <class S, class B, Affine kScale, int kRows>
void backward_dx_float32_as(const NormBackward& a, const BackwardRowData<S, B>* rows, bool stream,
                            double* dgamma_partial, double* dbeta_partial) {
  with_flag(a.dh_next != nullptr, [&](auto dh_next) {
    with_flag(dgamma_partial != nullptr, [&](auto dgamma) {
      with_flag(dbeta_partial != nullptr, [&](auto dbeta) {
        // Only what the ops can ask for is compiled (op_checks.hpp refuses a dgamma without
        // gamma, and a beta with RMSNorm, whose 1 + gamma scale is the only one_plus_gamma):
        // a third fewer instances of this pass.
        constexpr bool kReachable =
            !(dgamma() && kScale == Affine::none) && !(dbeta() && kScale == Affine::one_plus_gamma);
        if constexpr (kReachable) {
          backward_dx_float32<S, B, kScale, dh_next(), dgamma(), dbeta(), kRows>(
              rows, a.gamma, a.dim, stream, dgamma_partial, dbeta_partial);
        } else {
          HWY_ABORT("norm backward: dgamma without gamma, or dbeta with a 1 + gamma scale");
        }
      });
    });
  });
}
#endif  // HWY_TARGET != HWY_SCALAR

#if HWY_TARGET != HWY_SCALAR
// Pass 1 of a 16-bit stream's row in float32 lanes, as the 16-bit forward sums its statistics
// (norm_forward-inl.h): with d = (x - hi) - lo and g = dy * scale rounded to float32 (the
// g of pass 2), sum(d), sum(d^2), sum(g) and sum(g * d) accumulate in float32 lanes within
// blocks of kFloat32BlockAdditions additions and in float64 across blocks (the ends of rows one
// element at a time, add_backward_elements). Twice the lanes of float64 and no promotions: this
// pass was half of a bfloat16 backward's time in float64 lanes (D = 512, perf). The price is a few
// tens of float32 roundings of the row's magnitude in mean(g) and mean(g * x_hat) (rstd * max |g| *
// about 2e-6 in dx: some 5e-4 of a bfloat16 unit, docs/numerics.md); the caller takes the row again
// in float64 where float32 lanes cannot hold it (backward_block_sums_hold). kLow: with a low
// part (centred on the mean's hi + lo split rather than an estimate). BackwardBlockTerms is what
// a register adds; BlockSumsRun (shifted_sums-inl.h) walks the row block by block.
template <class S, class B, Affine kScale, bool kCentre, bool kLow>
struct BackwardBlockTerms {
  struct Lanes {
    hn::Vec<FloatTag> d, d2, g, gd;
  };
  using Sums = BackwardSums;

  BackwardBlockTerms(const typename S::Elem* HWY_RESTRICT x_in,
                     const typename B::Elem* HWY_RESTRICT dy_in, const float* HWY_RESTRICT gamma_in,
                     float hi_in, float lo_in)
      : x(x_in),
        dy(dy_in),
        gamma(gamma_in),
        hi(hi_in),
        lo(lo_in),
        hi_v(hn::Set(FloatTag(), hi_in)),
        lo_v(hn::Set(FloatTag(), lo_in)),
        max_g(hn::Zero(FloatTag())) {}

  const typename S::Elem* HWY_RESTRICT x;
  const typename B::Elem* HWY_RESTRICT dy;
  const float* HWY_RESTRICT gamma;
  float hi, lo;
  hn::Vec<FloatTag> hi_v, lo_v;
  // max |g| over everything added, across blocks (a maximum is exact in float32: no blocks).
  hn::Vec<FloatTag> max_g;

  static Lanes zero() {
    const auto z = hn::Zero(FloatTag());
    return {z, z, z, z};
  }
  static Lanes combine(const Lanes& a, const Lanes& b) {
    return {hn::Add(a.d, b.d), hn::Add(a.d2, b.d2), hn::Add(a.g, b.g), hn::Add(a.gd, b.gd)};
  }
  HWY_INLINE void prefetch(int64_t i) const {
    hwy::Prefetch(x + i + kPrefetchFloats);
    hwy::Prefetch(dy + i + kPrefetchFloats);
  }
  HWY_INLINE void add_pair(Lanes& even, Lanes& odd, int64_t i) {
    add_one(even, i);
    add_one(odd, i + static_cast<int64_t>(hn::Lanes(FloatTag())));
  }
  HWY_INLINE void add_one(Lanes& set, int64_t i) {
    const FloatTag df;
    auto d = hn::Sub(load<S>(df, x + i), hi_v);
    if constexpr (kLow) d = hn::Sub(d, lo_v);
    const auto dy_v = load<B>(df, dy + i);
    auto g = dy_v;
    if constexpr (kScale == Affine::gamma) g = hn::Mul(dy_v, hn::LoadU(df, gamma + i));
    if constexpr (kScale == Affine::one_plus_gamma) {
      g = hn::MulAdd(dy_v, hn::LoadU(df, gamma + i), dy_v);
    }
    if constexpr (kCentre) set.d = hn::Add(set.d, d);
    set.d2 = hn::MulAdd(d, d, set.d2);
    if constexpr (kCentre) set.g = hn::Add(set.g, g);
    set.gd = hn::MulAdd(g, d, set.gd);
    max_g = hn::Max(max_g, hn::Abs(g));
  }
  static void fold(Sums& sums, const Lanes& block) {
    if constexpr (kCentre) sums.x.sum += float64_sum_of_lanes(block.d);
    sums.x.squares += float64_sum_of_lanes(block.d2);
    if constexpr (kCentre) sums.g += float64_sum_of_lanes(block.g);
    sums.gd += float64_sum_of_lanes(block.gd);
  }
  void finish(Sums& sums, int64_t begin, int64_t end) const {
    sums.max_g = static_cast<double>(hn::GetLane(hn::MaxOfLanes(FloatTag(), max_g)));
    add_backward_elements<S, B, kScale>(sums, x, dy, gamma, begin, end, HiLo{hi, lo}.value());
  }
};

template <class S, class B, Affine kScale, bool kCentre, bool kLow>
BackwardSums backward_block_sums(const typename S::Elem* HWY_RESTRICT x,
                                 const typename B::Elem* HWY_RESTRICT dy,
                                 const float* HWY_RESTRICT gamma, int64_t dim, float hi, float lo) {
  using Terms = BackwardBlockTerms<S, B, kScale, kCentre, kLow>;
  return BlockSumsRun<Terms>(Terms(x, dy, gamma, hi, lo)).row(dim);
}

// Whether float32 block sums held a row's pass 1: its variance (mean square) within
// block_sums_hold's range, g's sums finite (an overflow in float32 leaves an infinity or NaN),
// and |g| at most 2^60, so g * d cannot overflow float32, and, unless dy is zero throughout, at
// least 2^-60, so that with the variance's bound the products g * d stay clear of float32's
// denormal range (where rounding is absolute). Rows that fail (NaNs included) are summed in
// float64.
constexpr double kBlockGradientMax = 0x1p60;
constexpr double kBlockGradientMin = 0x1p-60;
inline bool backward_block_sums_hold(const BackwardSums& sums, double variance) {
  return block_sums_hold(variance) && std::isfinite(sums.g) && std::isfinite(sums.gd) &&
         sums.max_g <= kBlockGradientMax && (sums.max_g >= kBlockGradientMin || sums.max_g == 0);
}
#endif  // HWY_TARGET != HWY_SCALAR

// Pass 1 of a row: its sums and the shift they were taken from. A 16-bit stream's rows of at
// least two vectors sum in float32 blocks (backward_block_sums), shifted by the mean of their
// first vector, then centred on the mean itself where that estimate was poor (recentre_at,
// norm_numerics.hpp, as the 16-bit forward's statistics); every other row,
// and a row the float32 lanes cannot hold, in float64 lanes shifted by its first element.
struct ShiftedBackwardSums {
  double shift;
  BackwardSums sums;
};
template <class S, class B, Affine kScale>
ShiftedBackwardSums backward_pass1(const typename S::Elem* x, const typename B::Elem* dy,
                                   const float* gamma, int64_t dim, bool centre) {
#if HWY_TARGET != HWY_SCALAR
  if constexpr (S::kHalf) {
    const FloatTag df;
    const auto lanes = static_cast<int64_t>(hn::Lanes(df));
    if (dim >= 2 * lanes) {
      const float estimate = centre ? register_mean(load<S>(df, x)) : 0.0f;
      ShiftedBackwardSums shifted{
          estimate,
          centre ? backward_block_sums<S, B, kScale, true, false>(x, dy, gamma, dim, estimate, 0)
                 : backward_block_sums<S, B, kScale, false, false>(x, dy, gamma, dim, 0, 0)};
      if (const std::optional<HiLo> mean =
              centre ? recentre_at(estimate,
                                   shifted_moments(shifted.sums.x.sum, shifted.sums.x.squares, dim))
                     : std::nullopt) {
        shifted = {mean->value(), backward_block_sums<S, B, kScale, true, true>(
                                      x, dy, gamma, dim, mean->hi, mean->lo)};
      }
      const RowMoments moments =
          moments_from(shifted.sums.x.sum, shifted.sums.x.squares, shifted.shift, dim, centre);
      if (backward_block_sums_hold(shifted.sums, moments.variance)) return shifted;
    }
  }
#endif
  const double shift = centre ? static_cast<double>(load_one<S>(x, 0)) : 0.0;
  return {shift, centre
                     ? backward_sums_run<S, B, kScale, true>(x, dy, gamma, dim, shift).finish()
                     : backward_sums_run<S, B, kScale, false>(x, dy, gamma, dim, shift).finish()};
}

// A row's pointers, set field by field in place: a copy of the whole struct, read back as one
// 64-byte load right after these stores, would wait on them (a store-forwarding stall: a
// quarter of the short rows' pass 1 at D = 64).
template <class S, class B>
void set_row_pointers(BackwardRowData<S, B>& data, const NormBackward& a, int64_t row) {
  using Elem = typename S::Elem;
  const int64_t offset = row * a.dim;
  const auto* dh_next = static_cast<const Elem*>(a.dh_next);
  data.x = static_cast<const Elem*>(a.x) + offset;
  data.dy = static_cast<const typename B::Elem*>(a.dy) + offset;
  data.dh_next = dh_next ? dh_next + offset : nullptr;
  data.dx = static_cast<Elem*>(a.dx) + offset;
}

// Pass 1 of one row, and what pass 2 needs.
template <class S, class B, Affine kScale>
BackwardRowData<S, B> backward_row_stats(const NormBackward& a, int64_t row) {
  const int64_t dim = a.dim;
  BackwardRowData<S, B> data{};
  set_row_pointers(data, a, row);
  const double count = static_cast<double>(dim);
  const bool centre = norm_traits(a.norm).centres;
  const auto [shift, sums] = backward_pass1<S, B, kScale>(data.x, data.dy, a.gamma, dim, centre);
  const RowMoments moments = moments_from(sums.x.sum, sums.x.squares, shift, dim, centre);
  BackwardRow& r = data.stats;
  r.mean = moments.mean;
  r.mean_lo = moments.mean_lo;
  r.variance = moments.variance;
  r.rstd = a.saved_rstd ? static_cast<double>(a.saved_rstd[row]) : rstd_of(moments.variance, a.eps);
  // Multiplied by 1 / D, which does not wait on the sums, rather than divided by D on the
  // row's critical path (it changes results by at most a float64 ulp).
  const double inverse_count = 1.0 / count;
  r.mean_g = centre ? sums.g * inverse_count : 0.0;
  // mean - shift, the mean of d = x - shift, with the mean's low part (RowMoments).
  const double offset = (moments.mean - shift) + moments.mean_lo;
  r.mean_g_xhat = xhat_scale(r.rstd) * (sums.gd - offset * sums.g) * inverse_count;
  r.max_g = sums.max_g;
  return data;
}

#if HWY_TARGET != HWY_SCALAR
// Short rows (up to these lengths, a whole number of float32 registers) take pass 1 a group at a
// time, one row per float64 lane (short_backward_stats), as the forward's short rows take their
// moments: a short row's fixed costs (five horizontal sums, scalar quotients, a square root and
// two divisions on a serial chain) otherwise outweigh its own arithmetic: up to
// kShortBackwardMaxDim for float32 streams and kShortHalfBackwardMaxDim for 16-bit ones,
// whose short rows sum in float32 lanes as their longer rows do
// (short_half_backward_stats). What each measured: docs/performance.md, "Tunables: what was
// tried".
constexpr int64_t kShortBackwardMaxDim = tuned("kShortBackwardMaxDim", 1024);
constexpr int64_t kShortHalfBackwardMaxDim = tuned("kShortHalfBackwardMaxDim", 128);

// A group of short rows' pass-1 totals, one row per float64 lane (row_totals; max_g: row_maxima),
// and the shifts they were taken from.
struct GroupSums {
  hn::Vec<DoubleTag> d, d2, g, gd, max_g, shift;
};

// backward_row_stats' formulas for a group of rows (rows[0 ... count)) from their totals: the
// quotients, square roots and divisions in lanes, each rounded as the scalar ones. Returns the
// rows' moments, for the caller's checks.
template <class S, class B, bool kCentre>
MomentLanes set_group_stats(const NormBackward& a, int64_t first, int64_t count,
                            const GroupSums& sums, BackwardRowData<S, B>* rows) {
  const DoubleTag dd;
  constexpr size_t kRows = hn::MaxLanes(dd);
  HWY_ALIGN double saved_rstd[kRows];
  if (a.saved_rstd) {
    for (size_t k = 0; k < kRows; ++k) {
      saved_rstd[k] = static_cast<double>(a.saved_rstd[first + group_lane_row(k, count)]);
    }
  }
  const auto zero = hn::Zero(dd);
  const auto g_total = kCentre ? sums.g : zero;
  const MomentLanes m = moments_lanes(kCentre ? sums.d : zero, sums.d2, sums.shift, a.dim, kCentre);
  const auto rstd = a.saved_rstd ? hn::Load(dd, saved_rstd) : rstd_lanes(m.variance, a.eps);
  // As backward_row_stats: multiplied by 1 / D; x_hat's scale 0 where rstd is infinite.
  const auto inverse_count = hn::Set(dd, 1.0 / static_cast<double>(a.dim));
  const auto scale = hn::IfThenElse(hn::IsInf(rstd), zero, rstd);
  const auto offset = hn::Add(hn::Sub(m.mean, sums.shift), m.mean_lo);
  const auto mean_g_xhat =
      hn::Mul(hn::Mul(scale, hn::Sub(sums.gd, hn::Mul(offset, g_total))), inverse_count);
  HWY_ALIGN double means[kRows], variances[kRows], rstds[kRows], mean_gs[kRows],
      mean_g_xhats[kRows], max_gs[kRows], mean_los[kRows];
  hn::Store(m.mean, dd, means);
  hn::Store(m.mean_lo, dd, mean_los);
  hn::Store(m.variance, dd, variances);
  hn::Store(rstd, dd, rstds);
  hn::Store(hn::Mul(g_total, inverse_count), dd, mean_gs);
  hn::Store(mean_g_xhat, dd, mean_g_xhats);
  hn::Store(sums.max_g, dd, max_gs);
  for (int64_t k = 0; k < count; ++k) {
    rows[k].stats = {means[k],        variances[k], rstds[k],   mean_gs[k],
                     mean_g_xhats[k], max_gs[k],    mean_los[k]};
  }
  return m;
}

// backward_row_stats for rows first ... first + count - 1 (count at most the float64 lanes) into
// rows[0 ... count): each row's sums in float64 lanes shifted by its first element
// (BackwardSumsRun, whatever the stream's type), then the group's totals (row_totals) and
// set_group_stats.
template <class S, class B, Affine kScale, bool kCentre>
void short_backward_stats(const NormBackward& a, int64_t first, int64_t count,
                          BackwardRowData<S, B>* rows) {
  const DoubleTag dd;
  constexpr size_t kRows = hn::MaxLanes(dd);
  hn::Vec<DoubleTag> d[kRows], d2[kRows], g[kRows], gd[kRows], max_g[kRows];
  HWY_ALIGN double shifts[kRows];
  for (int64_t k = 0; k < count; ++k) set_row_pointers(rows[k], a, first + k);
  for (size_t k = 0; k < kRows; ++k) {
    if (fill_spare_lane(k, count, shifts, d, d2, g, gd, max_g)) continue;
    const BackwardRowData<S, B>& data = rows[k];
    shifts[k] = kCentre ? static_cast<double>(load_one<S>(data.x, 0)) : 0.0;
    const auto sums =
        backward_sums_run<S, B, kScale, kCentre>(data.x, data.dy, a.gamma, a.dim, shifts[k])
            .row_lanes();
    d[k] = sums.d;
    d2[k] = sums.d2;
    g[k] = sums.g;
    gd[k] = sums.gd;
    max_g[k] = sums.max_g;
  }
  set_group_stats<S, B, kCentre>(a, first, count,
                                 {kCentre ? row_totals(d) : hn::Zero(dd), row_totals(d2),
                                  kCentre ? row_totals(g) : hn::Zero(dd), row_totals(gd),
                                  row_maxima(max_g), hn::Load(dd, shifts)},
                                 rows);
}

// short_backward_stats for a 16-bit stream's short rows, in float32 lanes as its longer rows
// (backward_pass1): each row's sums in one block of float32 lanes (BlockSumsRun; a short row is
// at most kFloat32BlockAdditions pairs of registers), shifted by the mean of its first register
// (register_mean, as backward_pass1), each lane's sums then promoted and added in float64 lanes
// (float64_halves), and the group's totals taken as in short_backward_stats. A row whose
// estimate was poor or whose sums float32 lanes cannot hold (the checks of backward_pass1, in
// lanes) is taken again on its own (backward_row_stats: recentred, or in float64).
template <class S, class B, Affine kScale, bool kCentre>
void short_half_backward_stats(const NormBackward& a, int64_t first, int64_t count,
                               BackwardRowData<S, B>* rows) {
  const DoubleTag dd;
  const FloatTag df;
  const HalfFloatTag dfd;  // one float per float64 lane
  constexpr size_t kRows = hn::MaxLanes(dd);
  static_assert(kShortHalfBackwardMaxDim <= kOneBlockMaxDim,
                "a short 16-bit row is one block of float32 sums");
  for (int64_t k = 0; k < count; ++k) set_row_pointers(rows[k], a, first + k);
  const auto zero = hn::Zero(dd);
  HWY_ALIGN float estimates[kRows];
  hn::Vec<DoubleTag> d[kRows], d2[kRows], g[kRows], gd[kRows], max_g[kRows];
  for (size_t k = 0; k < kRows; ++k) {
    if (fill_spare_lane(k, count, estimates, d, d2, g, gd, max_g)) continue;
    const BackwardRowData<S, B>& data = rows[k];
    estimates[k] = kCentre ? register_mean(load<S>(df, data.x)) : 0.0f;
    using Terms = BackwardBlockTerms<S, B, kScale, kCentre, false>;
    BlockSumsRun<Terms> run(Terms(data.x, data.dy, a.gamma, estimates[k], 0));
    int64_t i = 0;
    const auto block = run.template block</*kOddLast=*/true>(i, a.dim);
    d[k] = kCentre ? float64_halves(block.d) : zero;
    d2[k] = float64_halves(block.d2);
    g[k] = kCentre ? float64_halves(block.g) : zero;
    gd[k] = float64_halves(block.gd);
    max_g[k] = float64_halves_max(run.terms().max_g);
  }
  const GroupSums sums{kCentre ? row_totals(d) : zero,
                       row_totals(d2),
                       kCentre ? row_totals(g) : zero,
                       row_totals(gd),
                       row_maxima(max_g),
                       hn::PromoteTo(dd, hn::Load(dfd, estimates))};
  const MomentLanes m = set_group_stats<S, B, kCentre>(a, first, count, sums, rows);
  // backward_pass1's checks: shift_estimate_close, then backward_block_sums_hold.
  auto holds = block_sums_hold_lanes(m, sums.d, a.dim, kCentre);
  holds = hn::And(holds, hn::And(hn::IsFinite(sums.g), hn::IsFinite(sums.gd)));
  holds = hn::And(holds, hn::And(hn::Le(sums.max_g, hn::Set(dd, kBlockGradientMax)),
                                 hn::Or(hn::Ge(sums.max_g, hn::Set(dd, kBlockGradientMin)),
                                        hn::Eq(sums.max_g, zero))));
  for_each_failed_lane(
      holds, count, [&](int64_t k) { rows[k] = backward_row_stats<S, B, kScale>(a, first + k); });
}
#endif  // HWY_TARGET != HWY_SCALAR

// Whether the float32 pass 2 can take this row: rstd and its low part are normal float32
// numbers, x - mean cannot overflow (|mean| < 2^100), and neither can g, g - mean(g) or
// x_hat * mean(g x_hat) (each below 2^64, with |x_hat| <= sqrt(D) <= 2^32), so a finite dx is
// never lost to an overflow in between; and the row's spread is clear of float32's denormal grid
// (kFloat32LanesMinVariance), so x_hat and dgamma keep their precision. NaNs fail the tests too.
inline bool fits_float32(const BackwardRow& r) {
  return float32_lanes_hold(r.mean, r.variance, r.rstd) && r.max_g < 0x1p64 &&
         std::fabs(r.mean_g) < 0x1p64 && std::fabs(r.mean_g_xhat) < 0x1p64;
}

// Pass 2 of `count` rows (at most kGroupRows) whose pass 1 is done: the float32 pass 2 of them
// together where every row fits it and the group is whole, otherwise row by row.
template <class S, class B, Affine kScale, int kGroupRows>
void backward_pass2(const NormBackward& a, const BackwardRowData<S, B>* rows, int64_t count,
                    double* dgamma_partial, double* dbeta_partial) {
  bool all_fit = true;
  for (int64_t k = 0; k < count; ++k) all_fit = all_fit && fits_float32(rows[k].stats);
#if HWY_TARGET != HWY_SCALAR
  // Streaming needs every row of dx on a vector boundary.
  const hn::ScalableTag<float> df;
  bool stream = false;
  if constexpr (!S::kHalf) {
    stream = a.stream_outputs && aligned_start(df, rows[0].dx, a.dim, true) == 0 &&
             a.dim % static_cast<int64_t>(hn::Lanes(df)) == 0;
  }
  if (all_fit && count == kGroupRows) {
    backward_dx_float32_as<S, B, kScale, kGroupRows>(a, rows, stream, dgamma_partial,
                                                     dbeta_partial);
    return;
  }
#endif
  // The rows one at a time (in row order, as the partial sums require).
  for (int64_t k = 0; k < count; ++k) {
    const BackwardRowData<S, B>& row = rows[k];
#if HWY_TARGET != HWY_SCALAR
    if (fits_float32(row.stats)) {
      backward_dx_float32_as<S, B, kScale, 1>(a, &row, stream, dgamma_partial, dbeta_partial);
      continue;
    }
#endif
    backward_dx_float64<S, B, kScale>(a, row.x, row.dy, row.dh_next, row.dx, row.stats,
                                      dgamma_partial, dbeta_partial);
  }
}

// Rows per group: pass 1 of a group's rows, then pass 2 of them together. Short rows take pass 1
// a float64 register's worth of rows at a time (short_backward_stats), then pass 2 in groups.
template <class S, class B, Affine kScale, int kGroupRows>
void norm_backward_groups(const NormBackward& a, int64_t begin, int64_t end, double* dgamma_partial,
                          double* dbeta_partial) {
#if HWY_TARGET != HWY_SCALAR
  constexpr int64_t kLanes = static_cast<int64_t>(hn::MaxLanes(DoubleTag()));
  if (is_short_row(a.dim, S::kHalf ? kShortHalfBackwardMaxDim : kShortBackwardMaxDim)) {
    with_flag(norm_traits(a.norm).centres, [&](auto centre) {
      constexpr int64_t kBlock = std::max<int64_t>(kLanes, kGroupRows);
      for (int64_t first = begin; first < end; first += kBlock) {
        const int64_t count = std::min<int64_t>(kBlock, end - first);
        BackwardRowData<S, B> rows[kBlock];
        for (int64_t k = 0; k < count; k += kLanes) {
          if constexpr (S::kHalf) {
            short_half_backward_stats<S, B, kScale, centre()>(
                a, first + k, std::min(kLanes, count - k), rows + k);
          } else {
            short_backward_stats<S, B, kScale, centre()>(a, first + k, std::min(kLanes, count - k),
                                                         rows + k);
          }
        }
        for (int64_t k = 0; k < count; k += kGroupRows) {
          backward_pass2<S, B, kScale, kGroupRows>(
              a, rows + k, std::min<int64_t>(kGroupRows, count - k), dgamma_partial, dbeta_partial);
        }
      }
    });
    return;
  }
#endif
  for (int64_t first = begin; first < end; first += kGroupRows) {
    const int64_t count = std::min<int64_t>(kGroupRows, end - first);
    BackwardRowData<S, B> rows[kGroupRows];
    for (int64_t k = 0; k < count; ++k) rows[k] = backward_row_stats<S, B, kScale>(a, first + k);
    backward_pass2<S, B, kScale, kGroupRows>(a, rows, count, dgamma_partial, dbeta_partial);
  }
}

// Four rows a group, or eight for float32 rows of up to kWideGroupMaxDim in a call
// whose dx is streamed (a size meant to be beyond the caches): there more rows' loads are in
// flight before pass 2 waits on them, while in cache the extra rows' constants cost more than
// they gain. Only float32 rows get the wider group: its instances of pass 2 cost compile time.
// The results are the same bits either way (one addition per row, in row order, into dgamma and
// dbeta).
constexpr int64_t kWideGroupMaxDim = tuned("kWideGroupMaxDim", 2048);

template <class S, class B, Affine kScale>
void norm_backward_rows_as(const NormBackward& a, int64_t begin, int64_t end,
                           double* dgamma_partial, double* dbeta_partial) {
  if constexpr (!S::kHalf && !B::kHalf) {
    if (a.stream_outputs && a.dim <= kWideGroupMaxDim) {
      norm_backward_groups<S, B, kScale, 8>(a, begin, end, dgamma_partial, dbeta_partial);
      return;
    }
  }
  norm_backward_groups<S, B, kScale, 4>(a, begin, end, dgamma_partial, dbeta_partial);
}

template <class S, class B>
void norm_backward_rows_typed(const NormBackward& a, int64_t begin, int64_t end,
                              double* dgamma_partial, double* dbeta_partial) {
  with_affine(affine_form(a.gamma, nullptr, a.zero_centered_gamma), [&](auto form) {
    norm_backward_rows_as<S, B, scale_only(form())>(a, begin, end, dgamma_partial, dbeta_partial);
  });
}

// The backward for a residual stream (x, dh_next, dx) of storage S, dy of any storage type.
template <class S>
void stream_backward_rows(const NormBackward& a, int64_t begin, int64_t end, double* dgamma_partial,
                          double* dbeta_partial) {
  with_storage(a.dy_storage, [&](auto branch_storage) {
    using B = decltype(branch_storage);
    norm_backward_rows_typed<S, B>(a, begin, end, dgamma_partial, dbeta_partial);
  });
  if (a.stream_outputs) hwy::FlushStream();
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_NORM_BACKWARD_INL_H_
