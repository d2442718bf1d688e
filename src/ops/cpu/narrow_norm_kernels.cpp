// LayerNorm and RMSNorm forward reading and writing 16-bit storage (bfloat16, float16) directly:
// no float32 staging, so the row moves 2 + 2 bytes per element, and the output goes out with
// streaming stores when it is larger than the cache.
//
// Numerics: values are widened exactly to float32. The row's sums accumulate in float32 lanes
// over blocks of kBlock vectors and in float64 across blocks, shifted by an estimate of the
// mean, with a second pass over centred values (in cache) for the rare row whose estimate was
// poor (row_moments), so cancellation never amplifies rounding more than 4 times. The per-element
// steps are those of the float32 kernel (hi + lo split mean and rstd), and each output is rounded
// once to its storage type. The float32 block sums cost at most about kBlock float32 roundings of
// the row's magnitude, some 1e-5 of a bfloat16 or 1e-4 of a float16 unit: the output is within 0.5
// unit of its storage type plus that.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/narrow_norm_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Must come after foreach_target.h.
#include "addnorm/dtype.hpp"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/cpu/lane_ops-inl.h"
#include "ops/cpu/narrow-inl.h"
#include "ops/cpu/narrow_norm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using narrow::Half;
using narrow::narrow_one;
using narrow::widen_one;

#if HWY_TARGET != HWY_SCALAR
using FloatTag = hn::ScalableTag<float>;
using HalfTag = hn::Rebind<uint16_t, FloatTag>;       // as many 16-bit lanes as float lanes
using WideTag = hn::Repartition<uint16_t, FloatTag>;  // a full register of 16-bit lanes

// Vectors per float32 block sum: flushed into float64 after this many additions per lane.
constexpr int64_t kBlock = 64;
// How far ahead the statistics pass prefetches (4 KiB): the hardware prefetcher alone keeps
// too few lines in flight.
constexpr int64_t kPrefetchHalves = 2048;

// The row's constants for the normalising pass, split into float32 hi + lo parts.
struct SplitRow {
  HiLo centre, rstd;
};
SplitRow split_row(double centre, double rstd) { return {split(centre), split(rstd)}; }

// bfloat16 rows of even length are also read as 32-bit pairs: the even element of a pair is
// the pair shifted left by 16 bits, the odd one the pair with its low 16 bits cleared. That
// widens a full register of bfloat16 with one load and two integer operations, no lane
// shuffles, and leaves the row de-interleaved: fine for sums, and the normalising pass takes
// gamma and beta de-interleaved to match (PairParameters), writing the pairs back in place.
template <class V>
V even_of_pairs(V pairs) {
  return hn::ShiftLeft<16>(pairs);
}
template <class V>
V odd_of_pairs(V pairs) {
  const hn::DFromV<V> du32;
  return hn::And(pairs, hn::Set(du32, 0xFFFF0000u));
}

// Sums over a row of 16-bit values of c = (v - hi) - lo and (with kSum) of c^2, in float32
// lanes within blocks of kBlock vectors and in float64 across blocks and for the scalar end.
struct CentredSums {
  double sum = 0;
  double squares = 0;
};
template <Half kType, bool kSum, bool kLow = true, bool kPairs = false>
CentredSums centred_sums(const uint16_t* HWY_RESTRICT x, int64_t dim, float hi, float lo) {
  const FloatTag df;
  const HalfTag dh;
  const hn::RebindToUnsigned<FloatTag> du32;
  const hn::Half<FloatTag> dfh;
  const hn::Rebind<double, decltype(dfh)> dd;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const auto hi_v = hn::Set(df, hi), lo_v = hn::Set(df, lo);
  auto widen_sum = [&](auto v) HWY_ATTR {
    return hn::GetLane(hn::SumOfLanes(dd, hn::Add(hn::PromoteTo(dd, hn::LowerHalf(dfh, v)),
                                                  hn::PromoteTo(dd, hn::UpperHalf(dfh, v)))));
  };
  CentredSums sums;
  int64_t i = 0;
  while (i + 2 * n <= dim) {
    auto sum0 = hn::Zero(df), sum1 = hn::Zero(df), sq0 = hn::Zero(df), sq1 = hn::Zero(df);
    for (int64_t block = 0; block < kBlock && i + 2 * n <= dim; ++block, i += 2 * n) {
      hwy::Prefetch(x + i + kPrefetchHalves);
      hn::Vec<FloatTag> v0, v1;
      if constexpr (kPairs) {  // bfloat16 by 32-bit pairs: even and odd elements
        const auto pairs = hn::LoadU(du32, reinterpret_cast<const uint32_t*>(x + i));
        v0 = hn::BitCast(df, even_of_pairs(pairs));
        v1 = hn::BitCast(df, odd_of_pairs(pairs));
      } else {
        v0 = narrow::widen<kType>(df, hn::LoadU(dh, x + i));
        v1 = narrow::widen<kType>(df, hn::LoadU(dh, x + i + n));
      }
      auto c0 = hn::Sub(v0, hi_v);
      auto c1 = hn::Sub(v1, hi_v);
      if constexpr (kLow) {  // without a low part (it is 0), one subtraction fewer
        c0 = hn::Sub(c0, lo_v);
        c1 = hn::Sub(c1, lo_v);
      }
      if constexpr (kSum) {
        sum0 = hn::Add(sum0, c0);
        sum1 = hn::Add(sum1, c1);
      }
      sq0 = hn::MulAdd(c0, c0, sq0);
      sq1 = hn::MulAdd(c1, c1, sq1);
    }
    if constexpr (kSum) sums.sum += widen_sum(hn::Add(sum0, sum1));
    sums.squares += widen_sum(hn::Add(sq0, sq1));
  }
  const double centre = static_cast<double>(hi) + static_cast<double>(lo);
  for (; i < dim; ++i) {
    const double c = static_cast<double>(widen_one(kType, x[i])) - centre;
    sums.sum += c;
    sums.squares += c * c;
  }
  return sums;
}

// The statistics pass of a row, by pairs where the row allows it.
template <Half kType, bool kSum, bool kLow>
CentredSums row_sums(const uint16_t* x, int64_t dim, float hi, float lo) {
  if constexpr (kType == Half::bfloat16) {
    if (dim % 2 == 0) return centred_sums<kType, kSum, kLow, true>(x, dim, hi, lo);
  }
  return centred_sums<kType, kSum, kLow>(x, dim, hi, lo);
}

// Mean and variance of a row. One pass of sums shifted by a first estimate of the mean (that
// of the row's first elements, rounded to float): var = E[d^2] - E[d]^2 amplifies the float32 block
// sums' rounding by (var + E[d]^2) / var, which is at most 4 when E[d]^2 <= 3 var, and that holds
// for any ordinary row. Otherwise (the first elements were outliers) a second pass takes the
// variance from values centred on the mean itself, where nothing cancels.
template <Half kType>
void row_moments(const uint16_t* x, int64_t dim, double& mean, double& variance) {
  const double count = static_cast<double>(dim);
  // The estimate: the mean of the first register's worth of values (or of the whole row).
  const FloatTag df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  float shift = 0;
  if (dim >= lanes) {
    const auto first = narrow::widen<kType>(df, hn::LoadU(HalfTag(), x));
    shift = hn::GetLane(hn::SumOfLanes(df, first)) / static_cast<float>(lanes);
  } else {
    for (int64_t i = 0; i < dim; ++i) shift += widen_one(kType, x[i]);
    shift /= static_cast<float>(dim);
  }
  const CentredSums sums = row_sums<kType, true, false>(x, dim, shift, 0.0f);
  const double offset = sums.sum / count;
  const double shifted_variance = sums.squares / count - offset * offset;
  mean = static_cast<double>(shift) + offset;
  if (offset * offset <= 3 * shifted_variance) {
    variance = shifted_variance;
    return;
  }
  const HiLo m = split(mean);
  const CentredSums centred = row_sums<kType, true, true>(x, dim, m.hi, m.lo);
  const double residue = centred.sum / count;  // ~0: the float32 split's own error
  variance = std::max(0.0, centred.squares / count - residue * residue);
  if (std::isnan(centred.squares)) variance = centred.squares;
}

// Mean (0 without centre) and mean of squared deviations in float64, two scalar passes: for
// rows whose magnitude is beyond what float32 sums of squares hold.
void row_moments_float64(Half type, const uint16_t* x, int64_t dim, bool centre, double& mean,
                         double& mean_square) {
  mean = 0;
  if (centre) {
    for (int64_t i = 0; i < dim; ++i) mean += static_cast<double>(widen_one(type, x[i]));
    mean /= static_cast<double>(dim);
  }
  mean_square = 0;
  for (int64_t i = 0; i < dim; ++i) {
    const double c = static_cast<double>(widen_one(type, x[i])) - mean;
    mean_square += c * c;
  }
  mean_square /= static_cast<double>(dim);
}

template <Half kType, Affine kAffine>
uint16_t normalise_one(uint16_t bits, const SplitRow& s, const float* gamma, const float* beta,
                       int64_t i) {
  const float x_hat = x_hat_one(widen_one(kType, bits), s.centre, s.rstd);
  return narrow_one(kType, affine_one<kAffine>(x_hat, gamma, beta, i));
}

// y = affine((x - centre) * rstd), two float registers (one full register of 16-bit lanes) at
// a time; with `stream`, y is written with non-temporal stores from its first aligned register.
// kNaNs: gamma or beta hold a NaN or infinity, so y may be NaN (a finite row's x_hat is finite).
template <Half kType, Affine kAffine, bool kNaNs, bool kStream>
void normalise_row(const uint16_t* x, uint16_t* y, const int64_t dim, const SplitRow s,
                   const float* HWY_RESTRICT gamma, const float* HWY_RESTRICT beta) {
  const FloatTag df;
  const HalfTag dh;
  const WideTag dw;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const auto centre_hi = hn::Set(df, s.centre.hi), centre_lo = hn::Set(df, s.centre.lo);
  const auto rstd_hi = hn::Set(df, s.rstd.hi), rstd_lo = hn::Set(df, s.rstd.lo);
  auto normalise = [&](auto v, int64_t i) HWY_ATTR {
    return affine<kAffine>(df, x_hat_lanes(v, centre_hi, centre_lo, rstd_hi, rstd_lo), gamma,
                           beta, i);
  };
  const int64_t start = aligned_start(dw, y, dim, kStream);
  for (int64_t i = 0; i < start; ++i) y[i] = normalise_one<kType, kAffine>(x[i], s, gamma, beta, i);
  int64_t i = start;
  for (; i + 2 * n <= dim; i += 2 * n) {
    const auto lo = normalise(narrow::widen<kType>(df, hn::LoadU(dh, x + i)), i);
    const auto hi = normalise(narrow::widen<kType>(df, hn::LoadU(dh, x + i + n)), i + n);
    if constexpr (kStream) {
      hn::Stream(narrow::narrow_pair<kType, kNaNs>(df, lo, hi), dw, y + i);
    } else {
      hn::StoreU(narrow::narrow<kType, kNaNs>(df, lo), dh, y + i);
      hn::StoreU(narrow::narrow<kType, kNaNs>(df, hi), dh, y + i + n);
    }
  }
  for (; i < dim; ++i) y[i] = normalise_one<kType, kAffine>(x[i], s, gamma, beta, i);
}

// gamma and beta de-interleaved for the pairs path: [even elements..., odd elements...].
struct PairParameters {
  const float* gamma = nullptr;  // D floats: gamma[0], gamma[2], ..., then gamma[1], gamma[3], ...
  const float* beta = nullptr;
};

// normalise_row for a bfloat16 row of even length, read and written as 32-bit pairs. Each
// element gets the same operations as in normalise_row (and normalise_one at the ends).
// kStream requires y on a 4-byte boundary.
template <Affine kAffine, bool kNaNs, bool kStream>
void normalise_row_pairs(const uint16_t* x, uint16_t* y, const int64_t dim, const SplitRow s,
                         const float* HWY_RESTRICT gamma, const float* HWY_RESTRICT beta,
                         const PairParameters& pair) {
  const FloatTag df;
  const hn::RebindToUnsigned<FloatTag> du32;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const int64_t half = dim / 2;
  const auto centre_hi = hn::Set(df, s.centre.hi), centre_lo = hn::Set(df, s.centre.lo);
  const auto rstd_hi = hn::Set(df, s.rstd.hi), rstd_lo = hn::Set(df, s.rstd.lo);
  // Pair k's even element uses parameter k, its odd one parameter half + k.
  auto normalise = [&](auto v, int64_t at) HWY_ATTR {
    return affine<kAffine>(df, x_hat_lanes(v, centre_hi, centre_lo, rstd_hi, rstd_lo),
                           pair.gamma, pair.beta, at);
  };
  const int64_t start = aligned_start(du32, reinterpret_cast<uint32_t*>(y), dim / 2, kStream) * 2;
  for (int64_t i = 0; i < start; ++i) {
    y[i] = normalise_one<Half::bfloat16, kAffine>(x[i], s, gamma, beta, i);
  }
  int64_t i = start;  // even
  for (; i + 2 * n <= dim; i += 2 * n) {
    const auto pairs = hn::LoadU(du32, reinterpret_cast<const uint32_t*>(x + i));
    const int64_t k = i / 2;
    const auto even = normalise(hn::BitCast(df, even_of_pairs(pairs)), k);
    const auto odd = normalise(hn::BitCast(df, odd_of_pairs(pairs)), half + k);
    const auto out = hn::Or(narrow::bfloat16_bits<kNaNs>(df, even),
                            hn::ShiftLeft<16>(narrow::bfloat16_bits<kNaNs>(df, odd)));
    auto* target = reinterpret_cast<uint32_t*>(y + i);
    if constexpr (kStream) {
      hn::Stream(out, du32, target);
    } else {
      hn::StoreU(out, du32, target);
    }
  }
  for (; i < dim; ++i) y[i] = normalise_one<Half::bfloat16, kAffine>(x[i], s, gamma, beta, i);
}

// De-interleaves gamma and beta into per-thread storage for normalise_row_pairs.
PairParameters pair_parameters(const float* gamma, const float* beta, int64_t dim) {
  thread_local std::vector<float> storage;
  storage.resize(static_cast<size_t>(2 * dim));
  const int64_t half = dim / 2;
  PairParameters pair;
  auto split_into = [&](const float* values, float* target) {
    for (int64_t k = 0; k < half; ++k) {
      target[k] = values[2 * k];
      target[half + k] = values[2 * k + 1];
    }
  };
  if (gamma) {
    split_into(gamma, storage.data());
    pair.gamma = storage.data();
  }
  if (beta) {
    split_into(beta, storage.data() + dim);
    pair.beta = storage.data() + dim;
  }
  return pair;
}

bool all_finite(const float* values, int64_t count) {
  if (!values) return true;
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) return false;
  }
  return true;
}

template <Half kType, Affine kAffine>
void narrow_norm_rows_as(const NarrowNormForward& a, int64_t begin, int64_t end) {
  const int64_t dim = a.dim;
  const double count = static_cast<double>(dim);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const bool finite_parameters = all_finite(a.gamma, dim) && all_finite(a.beta, dim);
  // Streaming stores need y on 2-byte boundaries (it always is, unless a caller misaligns it).
  const bool stream = a.stream_output && reinterpret_cast<uintptr_t>(a.y) % 2 == 0;
  // bfloat16 rows of even length go by 32-bit pairs (streamed if y is on a 4-byte boundary).
  const bool pairs = kType == Half::bfloat16 && dim % 2 == 0;
  const bool stream_pairs = pairs && a.stream_output && reinterpret_cast<uintptr_t>(a.y) % 4 == 0;
  const PairParameters pair = pairs ? pair_parameters(a.gamma, a.beta, dim) : PairParameters{};
  // Rows in groups (up to 8 rows, 16 KiB): every row's sums, then their square roots and
  // divisions (independent, so they overlap instead of stalling each short row), then the
  // outputs, the group staying in L1.
  constexpr int64_t kMaxGroup = 8;
  const int64_t group = std::clamp<int64_t>(8192 / dim, 1, kMaxGroup);
  double means[kMaxGroup], mean_squares[kMaxGroup];
  for (int64_t first = begin; first < end; first += group) {
    const int64_t rows = std::min(group, end - first);
    for (int64_t k = 0; k < rows; ++k) {
      const uint16_t* x = a.x + (first + k) * dim;
      double& mean = means[k];
      double& mean_square = mean_squares[k];
      mean = 0;
      if (a.norm == NormKind::layer_norm) {
        row_moments<kType>(x, dim, mean, mean_square);
      } else {
        mean_square = row_sums<kType, false, false>(x, dim, 0.0f, 0.0f).squares / count;
      }
      if (!(mean_square >= 0x1p-100 && mean_square <= 0x1p100)) {
        // float32 squares may have overflowed (values beyond ~1e19) or lost precision to
        // underflow (below ~1e-19): the row again in float64 (also for non-finite rows).
        row_moments_float64(kType, x, dim, a.norm == NormKind::layer_norm, mean, mean_square);
      }
    }
    double rstds[kMaxGroup];
    for (int64_t k = 0; k < rows; ++k) rstds[k] = 1.0 / std::sqrt(mean_squares[k] + a.eps);
    for (int64_t k = 0; k < rows; ++k) {
      const int64_t row = first + k;
      const uint16_t* x = a.x + row * dim;
      uint16_t* y = a.y + row * dim;
      const double mean = means[k], rstd = rstds[k];
      const bool finite = std::isfinite(mean) && std::isfinite(mean_squares[k]);
      if (finite && forward_fits_float32(mean, mean_squares[k], rstd)) {
        const SplitRow s = split_row(mean, xhat_scale(rstd));
        if (pairs) {
          if (stream_pairs && finite_parameters) {
            normalise_row_pairs<kAffine, false, true>(x, y, dim, s, a.gamma, a.beta, pair);
          } else if (stream_pairs) {
            normalise_row_pairs<kAffine, true, true>(x, y, dim, s, a.gamma, a.beta, pair);
          } else if (finite_parameters) {
            normalise_row_pairs<kAffine, false, false>(x, y, dim, s, a.gamma, a.beta, pair);
          } else {
            normalise_row_pairs<kAffine, true, false>(x, y, dim, s, a.gamma, a.beta, pair);
          }
        } else if (stream && finite_parameters) {
          normalise_row<kType, kAffine, false, true>(x, y, dim, s, a.gamma, a.beta);
        } else if (stream) {
          normalise_row<kType, kAffine, true, true>(x, y, dim, s, a.gamma, a.beta);
        } else if (finite_parameters) {
          normalise_row<kType, kAffine, false, false>(x, y, dim, s, a.gamma, a.beta);
        } else {
          normalise_row<kType, kAffine, true, false>(x, y, dim, s, a.gamma, a.beta);
        }
      } else if (finite) {
        // rstd beyond float32's reach (or infinite: a constant row with eps = 0, x_hat = 0),
        // or a mean so large that x - mean could overflow float32: float64 per element.
        for (int64_t i = 0; i < dim; ++i) {
          const double x_hat =
              std::isinf(rstd) ? 0.0 : (static_cast<double>(widen_one(kType, x[i])) - mean) * rstd;
          y[i] =
              narrow_one(kType, affine_one<kAffine>(static_cast<float>(x_hat), a.gamma, a.beta, i));
        }
      } else {
        const uint16_t nan_bits = narrow_one(kType, nan);
        for (int64_t i = 0; i < dim; ++i) y[i] = nan_bits;
      }
      if (a.mean) a.mean[row] = finite ? static_cast<float>(mean) : nan;
      if (a.rstd) a.rstd[row] = finite ? static_cast<float>(rstd) : nan;
    }
  }
  if (a.stream_output) hwy::FlushStream();
}

template <Half kType>
void narrow_norm_rows_typed(const NarrowNormForward& a, int64_t begin, int64_t end) {
  with_affine(affine_form(a.gamma, a.beta, a.zero_centered_gamma), [&](auto form) {
    narrow_norm_rows_as<kType, form()>(a, begin, end);
  });
}
#endif  // HWY_TARGET != HWY_SCALAR

// Returns false where this target has no vector code for the type (the caller stages instead).
bool narrow_norm_rows(const NarrowNormForward& a, int64_t begin, int64_t end) {
#if HWY_TARGET != HWY_SCALAR
  if (a.type == DType::bfloat16) {
    narrow_norm_rows_typed<Half::bfloat16>(a, begin, end);
    return true;
  }
  if constexpr (narrow::kHasFloat16Vectors) {
    if (a.type == DType::float16) {
      narrow_norm_rows_typed<Half::float16>(a, begin, end);
      return true;
    }
  }
#endif
  (void)a;
  (void)begin;
  (void)end;
  return false;
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/threading.hpp"

namespace addnorm::cpu {

HWY_EXPORT(narrow_norm_rows);

bool narrow_norm_forward_range(const NarrowNormForward& args, int64_t begin, int64_t end) {
  return HWY_DYNAMIC_DISPATCH(narrow_norm_rows)(args, begin, end);
}

bool narrow_norm_forward(const NarrowNormForward& args) {
  if (!narrow_norm_forward_range(args, 0, 0)) return false;  // no rows: only asks for support
  NarrowNormForward streamed = args;
  streamed.stream_output = streams_output(args.rows * args.dim * int64_t{sizeof(uint16_t)});
  parallel_rows(args.rows, args.dim, [&](int64_t begin, int64_t end) {
    narrow_norm_forward_range(streamed, begin, end);
  });
  return true;
}

}  // namespace addnorm::cpu
#endif  // HWY_ONCE
