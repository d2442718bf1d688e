// The LayerNorm and RMSNorm forward, one kernel for every storage type of the rows (float32,
// bfloat16, float16: row_storage-inl.h) and every fusion: an input stage (x, or h = x + residual
// rounded to h's type and stored) and an output stage (y, and the row's mean and rstd).
// Two storage policies per call: SS for the residual stream (x and h), SB for the branch (the
// residual r added to it and the normalised y handed on), so that a float32 residual stream with
// 16-bit activations (or a 16-bit stream with float32 activations, or bfloat16 with float16)
// runs without staging: all nine pairs are compiled, on every target, the scalar one included.
// Highway compiles it once per x86-64 target; norm_forward_kernels.cpp picks the best target for
// this CPU and spreads rows over OpenMP threads.
//
// Each row takes two passes: its statistics, then its outputs (from cache). The statistics
// accumulate as the storage type makes fastest within docs/numerics.md's contract:
//  - a float32 stream: shifted sums in float64 lanes (floats promoted on load), as BatchNorm does;
//    short rows (up to kShortRowMaxDim) a group at a time, one row's totals per lane
//    (short_row_moments), so that their quotients and square roots are vector instructions;
//  - a 16-bit stream (whatever the branch), rows longer than kShortHalfRowMaxDim (shorter ones
//    go as float32 rows do, but with a residual in float32 lanes, short_half_row_moments):
//    values widen exactly to float32; sums shifted by an
//    estimate of the mean accumulate in float32 lanes over blocks of kFloat32BlockAdditions pairs
//    of vectors and in float64 across blocks, with a second pass over centred values for the rare
//    row whose estimate was poor (block_moments), so cancellation never amplifies rounding more
//    than 4 times. The float32 block sums cost at most about kFloat32BlockAdditions float32
//    roundings of the row's magnitude, some 1e-5 of a bfloat16 or 1e-4 of a float16 unit: the
//    output is within 0.5 unit of its type plus that. The scalar target (one lane) takes two
//    float64 passes instead.
// The outputs are formed alike for every type (lane_ops-inl.h: hi + lo split mean and rstd, one
// float32 fused multiply-add for the affine step) and rounded once to the storage type; rows
// whose spread or magnitude float32 lanes cannot hold (forward_fits_float32) take float64 lanes.
//
// Highway's "-inl.h" convention: this file holds the templates, and each storage's translation
// unit (norm_forward_unit.inc) includes it once per target; norm_forward_kernels.cpp picks
// the unit for a call. One unit per stream storage keeps each compile under a minute (the one
// file that held all nine pairs compiled in 116 s on a 2-core AMD EPYC) and lets them build in
// parallel.
#if defined(ADDNORM_OPS_CPU_NORM_FORWARD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ADDNORM_OPS_CPU_NORM_FORWARD_INL_H_
#undef ADDNORM_OPS_CPU_NORM_FORWARD_INL_H_
#else
#define ADDNORM_OPS_CPU_NORM_FORWARD_INL_H_
#endif

#include "hwy/highway.h"
#include "ops/cpu/dropout_input-inl.h"
#include "ops/cpu/kernels.hpp"
#include "ops/cpu/lane_ops-inl.h"
#include "ops/cpu/narrow-inl.h"
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
#include "ops/cpu/scratch.hpp"

HWY_BEFORE_NAMESPACE();
namespace addnorm::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One row's pointers: x and h of the stream's type SS, r and y of the branch's type SB.
template <class SS, class SB>
struct RowPointers {
  using Stream = typename SS::Elem;
  using Branch = typename SB::Elem;
  const Stream* x;
  const Branch* r;  // null without a residual
  Stream* h;        // null without a residual, or where h is not kept (post-norm at p = 0)
  Branch* y;
};
template <class SS, class SB>
RowPointers<SS, SB> row_pointers(const NormForward& a, int64_t row) {
  using Stream = typename SS::Elem;
  using Branch = typename SB::Elem;
  const int64_t offset = row * a.dim;
  return {static_cast<const Stream*>(a.x) + offset,
          a.residual ? static_cast<const Branch*>(a.residual) + offset : nullptr,
          a.residual && a.h ? static_cast<Stream*>(a.h) + offset : nullptr,
          static_cast<Branch*>(a.y) + offset};
}

// ---- input stage -------------------------------------------------------------------------

// v = x, or h = x + residual rounded to h's type: the norm sees h as the unfused add stores it.
template <class SS, class SB, bool kResidual, class D>
hn::Vec<D> input(D d, const RowPointers<SS, SB>& p, int64_t i) {
  const auto v = load<SS>(d, p.x + i);
  if constexpr (kResidual) {
    return round_to<SS>(d, hn::Add(v, load<SB>(d, p.r + i)));
  } else {
    return v;
  }
}
template <class SS, class SB, bool kResidual>
float input_one(const RowPointers<SS, SB>& p, int64_t i) {
  const float v = load_one<SS>(p.x, i);
  if constexpr (kResidual) {
    return round_one<SS>(v + load_one<SB>(p.r, i));
  } else {
    return v;
  }
}

// h = x + residual, stored to `h` (for the rows the float32 lanes do not normalise).
template <class SS, class SB>
void add_row(const RowPointers<SS, SB>& p, typename SS::Elem* h, int64_t dim) {
  for (int64_t i = 0; i < dim; ++i) store_one<SS>(h, i, input_one<SS, SB, true>(p, i));
}

// ---- statistics of a float32 stream: float64 lanes -------------------------------------------

// Shifted by the row's first value: the one-pass variance is then exact to float64 rounding
// times D (shifted_sums-inl.h). A run, so that the row loop can interleave it with the
// normalising pass of the row before (NextRowSums).
template <class SB, bool kResidual>
ShiftedSumsRun<SB, kResidual> float64_lane_run(const RowPointers<Float32Rows, SB>& p, int64_t dim,
                                               bool centre) {
  const double shift =
      centre ? static_cast<double>(input_one<Float32Rows, SB, kResidual>(p, 0)) : 0.0;
  return shifted_sums_run<SB, kResidual>(p.x, p.r, dim, shift);
}
template <class SB, bool kResidual>
RowMoments float64_lane_moments(ShiftedSumsRun<SB, kResidual>& run, int64_t dim, bool centre) {
  const ShiftedSums sums = run.finish();
  return moments_from(sums.sum, sums.squares, run.terms().shift, dim, centre);
}

// What a normalising pass carries along: the sums of the next row, stepped once per vector it
// normalises, for float32 streams; nothing for 16-bit streams, whose block sums run alone.
struct NoNextRow {
  bool has_step() const { return false; }
  void step() {}
};
template <class SS, class SB, bool kResidual>
using NextRowSums = std::conditional_t<SS::kHalf, NoNextRow, ShiftedSumsRun<SB, kResidual>>;

// Mean (0 without centre) and mean of squared deviations in float64, two scalar passes: for
// 16-bit rows whose magnitude is beyond what float32 sums of squares hold, and for every
// 16-bit row on the scalar target (one lane has no block sums).
template <class SS, class SB, bool kResidual>
RowMoments scalar_float64_moments(const RowPointers<SS, SB>& p, int64_t dim, bool centre) {
  const double count = static_cast<double>(dim);
  double mean = 0, mean_lo = 0;
  if (centre) {
    double sum = 0;
    for (int64_t i = 0; i < dim; ++i) sum += input_one<SS, SB, kResidual>(p, i);
    mean = sum / count;
    mean_lo = std::fma(-mean, count, sum) / count;  // the quotient's remainder (RowMoments)
  }
  double mean_square = 0;
  for (int64_t i = 0; i < dim; ++i) {
    const double c = (static_cast<double>(input_one<SS, SB, kResidual>(p, i)) - mean) - mean_lo;
    mean_square += c * c;
  }
  return {mean, mean_square / count, mean_lo};
}

// ---- statistics of a 16-bit stream (and branch): float32 block sums ---------------------------
#if HWY_TARGET != HWY_SCALAR

// The statistics pass prefetches kPrefetchHalves ahead (4 KiB): the hardware prefetcher
// alone keeps too few lines in flight.
constexpr int64_t kPrefetchHalves = tuned("kPrefetchHalves", 2048);

// bfloat16 rows of even length without a residual are also read as 32-bit pairs: the even
// element of a pair is the pair shifted left by 16 bits, the odd one the pair with its low 16
// bits cleared. That widens a full register of bfloat16 with one load and two integer
// operations, no lane shuffles, and leaves the row de-interleaved: fine for sums, and the
// normalising pass takes gamma and beta de-interleaved to match (PairParameters), writing the
// pairs back in place.
template <class V>
V even_of_pairs(V pairs) {
  return hn::ShiftLeft<16>(pairs);
}
template <class V>
V odd_of_pairs(V pairs) {
  const hn::DFromV<V> du32;
  return hn::And(pairs, hn::Set(du32, 0xFFFF0000u));
}

template <class S>
constexpr bool kBfloat16Rows = false;
template <>
constexpr bool kBfloat16Rows<HalfRows<narrow::Half::bfloat16>> = true;
template <class SS, class SB, bool kResidual>
constexpr bool kPairsAllowed = kBfloat16Rows<SS>&& kBfloat16Rows<SB> && !kResidual;

// What a 16-bit row's statistics add, for BlockSumsRun (shifted_sums-inl.h): c = (v - hi) - lo
// (without kLow, v - hi) and c^2, v from the input stage (with kPairs, a bfloat16 row read by
// 32-bit pairs: even and odd elements). Without kSum (RMSNorm) only the squares are summed, of v
// itself: hi and lo must then be 0.
template <class SS, class SB, bool kResidual, bool kSum, bool kLow, bool kPairs>
struct CentredTerms {
  struct Lanes {
    hn::Vec<FloatTag> sum, squares;
  };
  using Sums = ShiftedSums;

  CentredTerms(const RowPointers<SS, SB>& row, float hi_in, float lo_in)
      : p(row),
        hi(hi_in),
        lo(lo_in),
        hi_v(hn::Set(FloatTag(), hi_in)),
        lo_v(hn::Set(FloatTag(), lo_in)) {}

  RowPointers<SS, SB> p;
  float hi, lo;
  hn::Vec<FloatTag> hi_v, lo_v;

  static Lanes zero() { return {hn::Zero(FloatTag()), hn::Zero(FloatTag())}; }
  static Lanes combine(const Lanes& a, const Lanes& b) {
    return {hn::Add(a.sum, b.sum), hn::Add(a.squares, b.squares)};
  }
  HWY_INLINE void prefetch(int64_t i) const {
    hwy::Prefetch(p.x + i + kPrefetchHalves);
    if constexpr (kResidual) hwy::Prefetch(p.r + i + kPrefetchHalves);
  }
  HWY_INLINE void add_pair(Lanes& even, Lanes& odd, int64_t i) const {
    const FloatTag df;
    const int64_t n = static_cast<int64_t>(hn::Lanes(df));
    if constexpr (kPairs) {  // bfloat16 by 32-bit pairs: even and odd elements
      const hn::RebindToUnsigned<FloatTag> du32;
      const auto pairs = hn::LoadU(du32, reinterpret_cast<const uint32_t*>(p.x + i));
      add(even, hn::BitCast(df, even_of_pairs(pairs)));
      add(odd, hn::BitCast(df, odd_of_pairs(pairs)));
    } else {
      add(even, input<SS, SB, kResidual>(df, p, i));
      add(odd, input<SS, SB, kResidual>(df, p, i + n));
    }
  }
  HWY_INLINE void add_one(Lanes& set, int64_t i) const {
    add(set, input<SS, SB, kResidual>(FloatTag(), p, i));
  }
  static void fold(Sums& sums, const Lanes& block) {
    if constexpr (kSum) sums.sum += float64_sum_of_lanes(block.sum);
    sums.squares += float64_sum_of_lanes(block.squares);
  }
  void finish(Sums& sums, int64_t begin, int64_t end) const {
    const double centre = HiLo{hi, lo}.value();
    for (int64_t i = begin; i < end; ++i) {
      const double c = static_cast<double>(input_one<SS, SB, kResidual>(p, i)) - centre;
      sums.sum += c;
      sums.squares += c * c;
    }
  }

 private:
  HWY_INLINE void add(Lanes& set, hn::Vec<FloatTag> v) const {
    // Without kSum (RMSNorm, whose hi and lo are 0) v is its own centred value: v - 0 is v.
    auto c = kSum ? hn::Sub(v, hi_v) : v;
    if constexpr (kLow)
      c = hn::Sub(c, lo_v);  // without a low part (it is 0), one subtraction fewer
    if constexpr (kSum) set.sum = hn::Add(set.sum, c);
    set.squares = hn::MulAdd(c, c, set.squares);
  }
};

// Sums over a row of c^2 and (with kSum) of c, in float32 lanes within blocks of
// kFloat32BlockAdditions pairs of vectors and in float64 across blocks and for the end.
template <class SS, class SB, bool kResidual, bool kSum, bool kLow, bool kPairs>
ShiftedSums centred_sums(const RowPointers<SS, SB>& p, int64_t dim, float hi, float lo) {
  using Terms = CentredTerms<SS, SB, kResidual, kSum, kLow, kPairs>;
  return BlockSumsRun<Terms>(Terms(p, hi, lo)).row(dim);
}

// The statistics pass of a row, by pairs where the row allows it.
template <class SS, class SB, bool kResidual, bool kSum, bool kLow>
ShiftedSums row_sums(const RowPointers<SS, SB>& p, int64_t dim, float hi, float lo) {
  if constexpr (kPairsAllowed<SS, SB, kResidual>) {
    if (dim % 2 == 0) return centred_sums<SS, SB, kResidual, kSum, kLow, true>(p, dim, hi, lo);
  }
  return centred_sums<SS, SB, kResidual, kSum, kLow, false>(p, dim, hi, lo);
}

// Mean and variance of a row from float32 block sums shifted by a first estimate of the mean,
// taken again centred on the mean where the estimate was poor (recentre_at, norm_numerics.hpp).
template <class SS, class SB, bool kResidual>
RowMoments centred_block_moments(const RowPointers<SS, SB>& p, int64_t dim) {
  // The estimate: the mean of the first register's worth of values (or of the whole row).
  const FloatTag df;
  float estimate = 0;
  if (dim >= static_cast<int64_t>(hn::Lanes(df))) {
    estimate = register_mean(input<SS, SB, kResidual>(df, p, 0));
  } else {
    for (int64_t i = 0; i < dim; ++i) estimate += input_one<SS, SB, kResidual>(p, i);
    estimate /= static_cast<float>(dim);
  }
  const ShiftedSums sums = row_sums<SS, SB, kResidual, true, false>(p, dim, estimate, 0.0f);
  const ShiftedMoments shifted = shifted_moments(sums.sum, sums.squares, dim);
  const std::optional<HiLo> mean = recentre_at(estimate, shifted);
  if (!mean) return moments_about(estimate, shifted);
  const ShiftedSums centred = row_sums<SS, SB, kResidual, true, true>(p, dim, mean->hi, mean->lo);
  return moments_from(centred.sum, centred.squares, mean->value(), dim, true);
}

template <class SS, class SB, bool kResidual>
RowMoments block_moments(const RowPointers<SS, SB>& p, int64_t dim, bool centre) {
  const RowMoments m =
      centre
          ? centred_block_moments<SS, SB, kResidual>(p, dim)
          : RowMoments{0.0, row_sums<SS, SB, kResidual, false, false>(p, dim, 0.0f, 0.0f).squares /
                                static_cast<double>(dim)};
  // float32 squares may have overflowed (values beyond ~1e19) or lost precision to underflow
  // (below ~1e-19): the row again in float64 (also for non-finite rows).
  if (block_sums_hold(m.variance)) return m;
  return scalar_float64_moments<SS, SB, kResidual>(p, dim, centre);
}
#endif  // HWY_TARGET != HWY_SCALAR

// A row's mean and variance (mean square for RMSNorm), by its stream type's accumulation.
template <class SS, class SB, bool kResidual>
RowMoments row_moments(const RowPointers<SS, SB>& p, int64_t dim, bool centre) {
  if constexpr (!SS::kHalf) {
    auto run = float64_lane_run<SB, kResidual>(p, dim, centre);
    return float64_lane_moments(run, dim, centre);
  } else {
#if HWY_TARGET != HWY_SCALAR
    return block_moments<SS, SB, kResidual>(p, dim, centre);
#else
    return scalar_float64_moments<SS, SB, kResidual>(p, dim, centre);
#endif
  }
}

// ---- output stage ------------------------------------------------------------------------

// gamma and beta, and for the bfloat16 pairs both de-interleaved: [even elements..., odd...].
struct Parameters {
  const float* gamma;
  const float* beta;
  const float* pair_gamma;
  const float* pair_beta;
};

// y = affine(x_hat) with x_hat = (v - centre) * rstd in float32 lanes (lane_ops-inl.h), v from
// the input stage; with a residual, h is stored too (where it is kept: h not null). y and h may be
// x or residual: each element is loaded before it is stored. With kStream, y (and h, when it has
// y's alignment) is written with non-temporal stores: an output larger than the cache then goes
// straight to memory instead of first being read into the cache (a write-allocate) and evicting the
// inputs. x_hat carries at most about three float32 roundings (one when v is near the centre, and
// for RMSNorm), then one rounding to the storage type. 16-bit outputs are rounded with the NaN
// handling (narrow-inl.h) here: a call whose gamma and beta are finite could skip it, as the
// bfloat16 pairs do, but an instance per case would double this kernel's instances (and compile
// time) for a few instructions per register.
template <class SS, class SB, Affine kAffine, bool kResidual, bool kStream>
HWY_INLINE void normalise_row(const RowPointers<SS, SB>& row, HiLo centre, HiLo rstd,
                              const Parameters& w, const int64_t dim,
                              NextRowSums<SS, SB, kResidual>* next_row) {
  // The pointers by value: a vector store may alias anything, a struct's fields included, and
  // would otherwise make the compiler reload them after every store.
  const RowPointers<SS, SB> p = row;
  const FloatTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  // Float registers per step: two where a 16-bit row takes a full register of 16-bit lanes.
  constexpr int64_t kVectors = SS::kHalf || SB::kHalf ? 2 : 1;
  const float* HWY_RESTRICT gamma = w.gamma;
  const float* HWY_RESTRICT beta = w.beta;
  const auto hi_v = hn::Set(df, centre.hi), lo_v = hn::Set(df, centre.lo);
  const auto rstd_hi_v = hn::Set(df, rstd.hi), rstd_lo_v = hn::Set(df, rstd.lo);
  auto scalar = [&](int64_t i) {
    const float v = input_one<SS, SB, kResidual>(p, i);
    if constexpr (kResidual) {
      if (p.h) store_one<SS>(p.h, i, v);
    }
    store_one<SB>(p.y, i, affine_one<kAffine>(x_hat_one(v, centre, rstd), gamma, beta, i));
  };
  const int64_t start = store_start<SB>(p.y, dim, kStream);
  for (int64_t i = 0; i < start; ++i) scalar(i);
  [[maybe_unused]] const bool stream_h =
      kStream && kResidual && p.h && store_start<SS>(p.h + start, dim - start, true) == 0;
  // The vector loop, stepping `next` along (a loop of its own without a next row, so that
  // short rows pay nothing for the interleaving).
  auto vectors = [&](auto& next) HWY_ATTR {
    int64_t i = start;
    for (; i + kVectors * n <= dim; i += kVectors * n) {
      hn::Vec<FloatTag> v[kVectors], out[kVectors];
      for (int64_t k = 0; k < kVectors; ++k) v[k] = input<SS, SB, kResidual>(df, p, i + k * n);
      for (int64_t k = 0; k < kVectors; ++k) {
        out[k] = affine<kAffine>(df, x_hat_lanes(v[k], hi_v, lo_v, rstd_hi_v, rstd_lo_v), gamma,
                                 beta, i + k * n);
      }
      // h is stored in its own type already (finite: only finite rows come here). The test of
      // p.h is the same for the whole loop, which the compiler unswitches.
      if constexpr (kResidual) {
        if (p.h) store_step<SS, false, kVectors>(df, v[0], v[kVectors - 1], p.h + i, stream_h);
      }
      store_step<SB, true, kVectors>(df, out[0], out[kVectors - 1], p.y + i, kStream);
      for (int64_t k = 0; k < kVectors; ++k) {
        if (next.has_step()) next.step();
      }
    }
    return i;
  };
  int64_t i;
  if (next_row && next_row->has_step()) {
    // A local copy, written back after: the accumulators then stay in registers instead of
    // going through memory at every step.
    NextRowSums<SS, SB, kResidual> next = *next_row;
    i = vectors(next);
    *next_row = next;
  } else {
    NoNextRow none;
    i = vectors(none);
  }
  for (; i < dim; ++i) scalar(i);
}

#if HWY_TARGET != HWY_SCALAR
// normalise_row for a bfloat16 row of even length (no residual), read and written as 32-bit
// pairs. Each element gets the same operations as in normalise_row. kStream requires y on a
// 4-byte boundary.
using Bfloat16Rows = HalfRows<narrow::Half::bfloat16>;
template <Affine kAffine, bool kNaNs, bool kStream>
void normalise_row_pairs(const RowPointers<Bfloat16Rows, Bfloat16Rows>& row, HiLo centre, HiLo rstd,
                         const Parameters& parameters, const int64_t dim, NoNextRow*) {
  using S = Bfloat16Rows;
  const RowPointers<S, S> p = row;  // by value, as in normalise_row
  const Parameters w = parameters;
  const FloatTag df;
  const hn::RebindToUnsigned<FloatTag> du32;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const int64_t half = dim / 2;
  const auto hi_v = hn::Set(df, centre.hi), lo_v = hn::Set(df, centre.lo);
  const auto rstd_hi_v = hn::Set(df, rstd.hi), rstd_lo_v = hn::Set(df, rstd.lo);
  // Pair k's even element uses parameter k, its odd one parameter half + k.
  auto normalise = [&](auto v, int64_t at) HWY_ATTR {
    return affine<kAffine>(df, x_hat_lanes(v, hi_v, lo_v, rstd_hi_v, rstd_lo_v), w.pair_gamma,
                           w.pair_beta, at);
  };
  auto scalar = [&](int64_t i) {
    const float v = load_one<S>(p.x, i);
    store_one<S>(p.y, i, affine_one<kAffine>(x_hat_one(v, centre, rstd), w.gamma, w.beta, i));
  };
  const int64_t start =
      aligned_start(du32, reinterpret_cast<const uint32_t*>(p.y), half, kStream) * 2;
  for (int64_t i = 0; i < start; ++i) scalar(i);
  int64_t i = start;  // even
  for (; i + 2 * n <= dim; i += 2 * n) {
    const auto pairs = hn::LoadU(du32, reinterpret_cast<const uint32_t*>(p.x + i));
    const int64_t k = i / 2;
    const auto even = normalise(hn::BitCast(df, even_of_pairs(pairs)), k);
    const auto odd = normalise(hn::BitCast(df, odd_of_pairs(pairs)), half + k);
    const auto out = narrow::bfloat16_pairs<kNaNs>(df, even, odd);
    auto* target = reinterpret_cast<uint32_t*>(p.y + i);
    if constexpr (kStream) {
      hn::Stream(out, du32, target);
    } else {
      hn::StoreU(out, du32, target);
    }
  }
  for (; i < dim; ++i) scalar(i);
}

// De-interleaves gamma and beta into `scratch` for normalise_row_pairs.
inline void pair_parameters(Parameters& w, int64_t dim, Scratch& scratch) {
  float* const storage = scratch.take<float>(2 * dim);
  const int64_t half = dim / 2;
  // Vectors of pairs (a decode of a few rows pays for this set-up: by vectors it costs a tenth
  // of a row, element by element it cost several rows).
  auto split_into = [&](const float* values, float* target) {
    const FloatTag df;
    const int64_t n = static_cast<int64_t>(hn::Lanes(df));
    int64_t k = 0;
    for (; k + n <= half; k += n) {
      hn::Vec<FloatTag> even, odd;
      hn::LoadInterleaved2(df, values + 2 * k, even, odd);
      hn::StoreU(even, df, target + k);
      hn::StoreU(odd, df, target + half + k);
    }
    for (; k < half; ++k) {
      target[k] = values[2 * k];
      target[half + k] = values[2 * k + 1];
    }
  };
  if (w.gamma) {
    split_into(w.gamma, storage);
    w.pair_gamma = storage;
  }
  if (w.beta) {
    split_into(w.beta, storage + dim);
    w.pair_beta = storage + dim;
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

// The same in float64 lanes, for rows whose spread is so small (below 2^-100: denormal-range
// inputs, kFloat32LanesMinVariance; rstd >= 2^64 with eps = 0) that the centred values, rstd or
// the centre's low part would not survive float32, or whose mean is so large that x - mean
// could overflow float32. v is x, or h already stored; the centre is mean + mean_lo (RowMoments).
template <class SS, class SB, Affine kAffine>
void normalise_row_float64(const typename SS::Elem* v, const RowMoments& centre, double scale,
                           const float* HWY_RESTRICT gamma, const float* HWY_RESTRICT beta,
                           typename SB::Elem* y, const int64_t dim) {
  const DoubleTag dd;
  const HalfFloatTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(dd));
  const auto centre_v = hn::Set(dd, centre.mean);
  const auto centre_lo_v = hn::Set(dd, centre.mean_lo);
  const auto scale_v = hn::Set(dd, scale);
  int64_t i = 0;
  for (; i + n <= dim; i += n) {
    const auto centred =
        hn::Sub(hn::Sub(hn::PromoteTo(dd, load<SS>(df, v + i)), centre_v), centre_lo_v);
    const auto x_hat = hn::DemoteTo(df, hn::Mul(centred, scale_v));
    store<SB>(df, affine<kAffine>(df, x_hat, gamma, beta, i), y + i);
  }
  for (; i < dim; ++i) {
    const double centred = (static_cast<double>(load_one<SS>(v, i)) - centre.mean) - centre.mean_lo;
    const float x_hat = static_cast<float>(centred * scale);
    store_one<SB>(y, i, affine_one<kAffine>(x_hat, gamma, beta, i));
  }
}

// ---- the row loop ------------------------------------------------------------------------

template <class SS, class SB, bool kResidual>
using NormaliseFn = void (*)(const RowPointers<SS, SB>&, HiLo, HiLo, const Parameters&, int64_t,
                             NextRowSums<SS, SB, kResidual>*);

// The instance of the normalising pass for this call: its affine form, stores and storage.
template <class SS, class SB, bool kResidual>
NormaliseFn<SS, SB, kResidual> pick_normalise(Affine form, bool stream, bool nans, bool pairs) {
  NormaliseFn<SS, SB, kResidual> fn = nullptr;
  with_affine(form, [&](auto affine_c) {
    with_flag(stream, [&](auto streams) {
      fn = &normalise_row<SS, SB, affine_c(), kResidual, streams()>;
#if HWY_TARGET != HWY_SCALAR
      if constexpr (kPairsAllowed<SS, SB, kResidual>) {
        if (pairs) {
          with_flag(nans, [&](auto nan_lanes) {
            fn = &normalise_row_pairs<affine_c(), nan_lanes(), streams()>;
          });
        }
      }
#endif
      (void)nans;
      (void)pairs;
    });
  });
  return fn;
}

inline bool all_finite(const float* values, int64_t count) {
  if (!values) return true;
  const FloatTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  auto finite = hn::IsFinite(hn::Zero(df));
  for (; i + n <= count; i += n) finite = hn::And(finite, hn::IsFinite(hn::LoadU(df, values + i)));
  if (!hn::AllTrue(df, finite)) return false;
  for (; i < count; ++i) {
    if (!std::isfinite(values[i])) return false;
  }
  return true;
}

// Rows are done in groups of up to kMaxGroup rows and kGroupBytes of input (see below).
constexpr int64_t kMaxGroup = tuned("kMaxGroup", 8);
constexpr int64_t kGroupBytes = tuned("kGroupBytes", int64_t{16} << 10);
static_assert(kMaxGroup >= 1 && kGroupBytes >= 1, "a group holds at least one row");

// The outputs of one row from its moments: normalised in float32 lanes where they hold the row
// (forward_fits_float32), in float64 lanes otherwise, NaN for a row holding a NaN or Inf (which
// poisons this row only); its mean and rstd when asked for. `next` is stepped along the float32
// lanes' pass (NextRowSums).
// `normalise` is a NormaliseFn, or a callable taking the same arguments.
template <class SS, class SB, bool kResidual, class Normalise>
void output_row(const NormForward& a, const RowPointers<SS, SB>& p, int64_t row,
                const RowMoments& moments, double rstd, Affine form, const Parameters& w,
                const Normalise& normalise, NextRowSums<SS, SB, kResidual>* next) {
  const int64_t dim = a.dim;
  const double mean = moments.mean;
  const bool finite = std::isfinite(mean) && std::isfinite(moments.variance);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (a.mean) a.mean[row] = finite ? static_cast<float>(mean) : nan;
  if (a.rstd) a.rstd[row] = finite ? static_cast<float>(rstd) : nan;
  if (finite && forward_fits_float32(mean, moments.variance, rstd)) {
    normalise(p, split(mean, moments.mean_lo), split(xhat_scale(rstd)), w, dim, next);
    return;
  }
  // In float64 lanes from v, the row's input (x, or h as stored), or NaN.
  auto from = [&](const typename SS::Elem* v) {
    if (finite) {
      with_affine(form, [&](auto affine_c) {
        normalise_row_float64<SS, SB, affine_c()>(v, moments, xhat_scale(rstd), w.gamma, w.beta,
                                                  p.y, dim);
      });
    } else {
      for (int64_t i = 0; i < dim; ++i) store_one<SB>(p.y, i, nan);
    }
  };
  if constexpr (kResidual) {
    if (!p.h) {  // h is not kept: this row's h in the thread's scratch
      Scratch scratch;
      typename SS::Elem* h = scratch.take<typename SS::Elem>(dim);
      add_row<SS, SB>(p, h, dim);
      return from(h);
    }
    add_row<SS, SB>(p, p.h, dim);
    return from(p.h);
  }
  from(p.x);
}

// ---- short rows: one row per float64 lane ----------------------------------------------------
#if HWY_TARGET != HWY_SCALAR
// Rows up to kShortRowMaxDim (and a whole number of float32 registers) go through
// short_rows: their per-row fixed costs (horizontal sums, scalar quotients, a square root and a
// division, each on a serial chain, and a call of the normalising pass) otherwise outweigh a short
// row's own arithmetic; from D = 2048 the general loop's interleaving of a row's sums with the row
// before pays more (kShortRowMaxDim). 16-bit streams, whose general loop sums in float32 blocks,
// stop at kShortHalfRowMaxDim, beyond which the float64 lanes' extra arithmetic per element costs
// more than the fixed costs saved. Short 16-bit rows are summed in float64 lanes as float32 rows
// are (no less accurate), except with a residual (pre-norm), whose rows sum in float32 lanes as
// their longer rows do (short_half_row_moments): there the input stage (h = x + r rounded to h's
// type) then runs once per float32 register instead of once per half register. What each measured:
// docs/performance.md, "Tunables: what was tried".
constexpr int64_t kShortRowMaxDim = tuned("kShortRowMaxDim", 1024);
constexpr int64_t kShortHalfRowMaxDim = tuned("kShortHalfRowMaxDim", 128);

template <class SS>
bool takes_short_rows(int64_t dim) {
  return is_short_row(dim, SS::kHalf ? kShortHalfRowMaxDim : kShortRowMaxDim);
}

// A row's sums are chains of dependent additions as long as the row's vectors over the
// accumulators: four chains pay in cache from D = 512 (kFourChainsMinDim), shorter rows keep two
// (their chains are short already).
constexpr int64_t kFourChainsMinDim = tuned("kFourChainsMinDim", 512);

// A group's moments and rstds, one row a float64 lane; the lanes past the group's rows are spare
// and never read.
constexpr size_t kGroupRows = hn::MaxLanes(DoubleTag());
struct GroupMoments {
  HWY_ALIGN double mean[kGroupRows];
  HWY_ALIGN double variance[kGroupRows];
  HWY_ALIGN double rstd[kGroupRows];
  HWY_ALIGN double mean_lo[kGroupRows];

  RowMoments row(int64_t k) const { return {mean[k], variance[k], mean_lo[k]}; }
  // Row k's moments (and rstd from them) as the row-at-a-time path found them.
  void set_row(int64_t k, const RowMoments& m, float eps) {
    mean[k] = m.mean;
    variance[k] = m.variance;
    rstd[k] = rstd_of(m.variance, static_cast<double>(eps));
    mean_lo[k] = m.mean_lo;
  }
  void set_lanes(const MomentLanes& m, float eps) {
    const DoubleTag dd;
    hn::Store(m.mean, dd, mean);
    hn::Store(m.variance, dd, variance);
    hn::Store(rstd_lanes(m.variance, static_cast<double>(eps)), dd, rstd);
    hn::Store(m.mean_lo, dd, mean_lo);
  }
};

// A group's sums, one row at a time (add_row), then its moments at once (finish), so that the
// forward can take a row's sums between the outputs of the group before (short_rows). Each row's
// sums are shifted by its first value as in the general loop (float64_lane_run), taken by the one
// row-sums routine (RowSumsRun, shifted_sums-inl.h) with two chains a row, or from
// kFourChainsMinDim on four. Without kCentre (RMSNorm) the shift is 0 and the sums unused
// (ShiftedTerms leaves out the subtraction and the sums, for the same squares).
template <class SS, class SB, bool kResidual, bool kCentre>
class ShortRowSums {
 public:
  // Row k of the group of `count` rows whose pointers are p (lanes from count on are spare: they
  // repeat the last row's sums and are never read).
  HWY_INLINE void add_row(size_t k, int64_t count, const RowPointers<SS, SB>& p, int64_t dim) {
    if (fill_spare_lane(k, count, shifts_, sums_, squares_)) return;
    shifts_[k] = kCentre ? static_cast<double>(input_one<SS, SB, kResidual>(p, 0)) : 0.0;
    using Terms = ShiftedTerms<SS, SB, kResidual, kCentre>;
    const Terms terms{p.x, p.r, shifts_[k]};
    const typename Terms::Lanes lanes = dim >= kFourChainsMinDim
                                            ? RowSumsRun<Terms, 4>(terms, dim).row_lanes()
                                            : RowSumsRun<Terms, 2>(terms, dim).row_lanes();
    sums_[k] = lanes.sum;
    squares_[k] = lanes.squares;
  }

  // The group's moments, from the sums of all kGroupRows lanes.
  void finish(int64_t dim, float eps, GroupMoments& group) const {
    const DoubleTag dd;
    group.set_lanes(moments_lanes(kCentre ? row_totals(sums_) : hn::Zero(dd), row_totals(squares_),
                                  hn::Load(dd, shifts_), dim, kCentre),
                    eps);
  }

 private:
  hn::Vec<DoubleTag> sums_[kGroupRows], squares_[kGroupRows];
  HWY_ALIGN double shifts_[kGroupRows];
};

// The moments of a group of rows, one per float64 lane: rows first ... first + count - 1, the
// lanes past count repeating the last row (so a row's sums never depend on its group's size, nor
// its results on how rows are split over threads).
template <class SS, class SB, bool kResidual, bool kCentre, class RowAt>
void short_row_moments(const RowAt& row_at, int64_t first, int64_t count, int64_t dim, float eps,
                       GroupMoments& group) {
  ShortRowSums<SS, SB, kResidual, kCentre> sums;
  for (size_t k = 0; k < kGroupRows; ++k) {
    const bool spare = static_cast<int64_t>(k) >= count;
    sums.add_row(k, count, spare ? RowPointers<SS, SB>{} : row_at(first + static_cast<int64_t>(k)),
                 dim);
  }
  sums.finish(dim, eps, group);
}

// short_row_moments for a 16-bit stream's rows, in float32 lanes as its longer rows
// (block_moments): each row's sums in one block of float32 lanes (BlockSumsRun; a short row is
// at most kFloat32BlockAdditions pairs of registers, and an odd last register is added in
// float32 too), shifted by the mean of its first register (register_mean, as block_moments),
// each lane's sums then promoted and added in float64 (float64_halves) and totalled across the
// group at once (row_totals). A row
// whose estimate was poor (shift_estimate_close) or whose variance the block sums cannot hold
// (block_sums_hold) takes the long rows' path on its own (row_moments: recentred, or in float64).
template <class SS, class SB, bool kResidual, class RowAt>
void short_half_row_moments(const RowAt& row_at, int64_t first, int64_t count, int64_t dim,
                            bool centre, float eps, GroupMoments& group) {
  const DoubleTag dd;
  const FloatTag df;
  const HalfFloatTag dfd;  // one float per float64 lane
  // One block of BlockSumsRun: a longer short row would lose its end.
  static_assert(kShortHalfRowMaxDim <= kOneBlockMaxDim,
                "a short 16-bit row is one block of float32 sums");
  RowPointers<SS, SB> rows[kGroupRows];  // the group's rows; spare lanes copy (fill_spare_lane)
  for (int64_t k = 0; k < count; ++k) rows[k] = row_at(first + k);
  const auto zero = hn::Zero(dd);
  HWY_ALIGN float estimates[kGroupRows];
  hn::Vec<DoubleTag> sums[kGroupRows], squares[kGroupRows];
  // Without centre (RMSNorm) the estimates are 0, and neither the sums nor the subtractions are
  // taken (CentredTerms without kSum): the same squares.
  with_flag(centre, [&](auto centre_c) {
    constexpr bool kCentre = decltype(centre_c)::value;
    for (size_t k = 0; k < kGroupRows; ++k) {
      if (fill_spare_lane(k, count, estimates, sums, squares)) continue;
      estimates[k] = kCentre ? register_mean(input<SS, SB, kResidual>(df, rows[k], 0)) : 0.0f;
      using Terms = CentredTerms<SS, SB, kResidual, kCentre, false, false>;
      BlockSumsRun<Terms> run(Terms(rows[k], estimates[k], 0.0f));
      int64_t i = 0;
      typename Terms::Lanes lanes = run.block(i, dim);
      if (i < dim) run.terms().add_one(lanes, i);  // an odd last register, after the pairs' sum
      sums[k] = kCentre ? float64_halves(lanes.sum) : zero;
      squares[k] = float64_halves(lanes.squares);
    }
  });
  const auto sum = centre ? row_totals(sums) : zero;
  const MomentLanes m = moments_lanes(sum, row_totals(squares),
                                      hn::PromoteTo(dd, hn::Load(dfd, estimates)), dim, centre);
  group.set_lanes(m, eps);
  // block_moments' checks, in lanes: shift_estimate_close, then block_sums_hold.
  for_each_failed_lane(block_sums_hold_lanes(m, sum, dim, centre), count, [&](int64_t k) {
    group.set_row(k, row_moments<SS, SB, kResidual>(rows[k], dim, centre), eps);
  });
}

// What output_row works out for a row before its normalising pass (its saved mean and rstd,
// whether float32 lanes hold it, the hi + lo splits of its centre and scale), for a group of short
// rows at once, one row a float64 lane: the same operations as output_row's, rounded alike, in a
// few vector instructions instead of some thirty scalar ones a row. Only where the group's
// moments were taken ahead (kMomentsAheadMaxDim, kInterleaveShortRows): there the float32
// LayerNorm and RMSNorm forward ran 1.04-1.12x faster in L2 at D = 64 and 128; for longer rows
// whose moments are taken just before their outputs, it puts this work on the chain between
// them, and ran 0.96-0.98x (docs/performance.md, "Tunables: what was tried").
struct GroupOutputs {
  HWY_ALIGN float centre_hi[kGroupRows];
  HWY_ALIGN float centre_lo[kGroupRows];
  HWY_ALIGN float scale_hi[kGroupRows];
  HWY_ALIGN float scale_lo[kGroupRows];
  uint8_t float32_rows[8];  // bit k: row k is normalised in float32 lanes (forward_fits_float32)

  bool in_float32(int64_t k) const { return (float32_rows[k / 8] >> (k % 8)) & 1; }
  HiLo centre(int64_t k) const { return {centre_hi[k], centre_lo[k]}; }
  HiLo scale(int64_t k) const { return {scale_hi[k], scale_lo[k]}; }
};

// Rows first ... first + count - 1 of `a`, their moments in `group`: stores their mean and rstd
// (where asked for) and sets `out`.
inline void group_outputs(const NormForward& a, int64_t first, int64_t count,
                          const GroupMoments& group, GroupOutputs& out) {
  const DoubleTag dd;
  const HalfFloatTag df;  // one float per float64 lane
  const auto mean = hn::Load(dd, group.mean);
  const auto variance = hn::Load(dd, group.variance);
  const auto rstd = hn::Load(dd, group.rstd);
  const auto finite = hn::And(hn::IsFinite(mean), hn::IsFinite(variance));
  const auto nan = hn::Set(dd, std::numeric_limits<double>::quiet_NaN());  // demotes to float's
  auto save = [&](float* to, hn::Vec<DoubleTag> value) HWY_ATTR {
    if (!to) return;
    HWY_ALIGN float values[kGroupRows];
    hn::Store(hn::DemoteTo(df, hn::IfThenElse(finite, value, nan)), df, values);
    std::copy_n(values, count, to + first);
  };
  save(a.mean, mean);
  save(a.rstd, rstd);
  hn::StoreMaskBits(dd, hn::And(finite, forward_fits_float32_lanes(mean, variance, rstd)),
                    out.float32_rows);
  // split (norm_numerics.hpp) a lane each.
  auto split_to = [&](hn::Vec<DoubleTag> value, hn::Vec<DoubleTag> low, float* hi,
                      float* lo) HWY_ATTR {
    const auto high = hn::DemoteTo(df, value);
    hn::Store(high, df, hi);
    hn::Store(hn::DemoteTo(df, hn::Add(hn::Sub(value, hn::PromoteTo(dd, high)), low)), df, lo);
  };
  split_to(mean, hn::Load(dd, group.mean_lo), out.centre_hi, out.centre_lo);
  split_to(hn::IfThenZeroElse(hn::IsInf(rstd), rstd), hn::Zero(dd), out.scale_hi,
           out.scale_lo);  // xhat_scale
}

// Rows up to kMomentsAheadMaxDim take the next group's moments before this group's
// outputs: the group's quotients, square roots and divisions (a serial chain of some 60 cycles)
// and the next group's loads from memory then overlap this group's normalising pass, instead of
// every pass waiting on the chain before it. Each row's results are the same bits either way.
constexpr int64_t kMomentsAheadMaxDim = tuned("kMomentsAheadMaxDim", 128);

// Where outputs are streamed (from memory), a float32 stream's short rows of any length take the
// next group's moments ahead one row at a time: row k of the next group is summed between the
// outputs of rows k - 1 and k of this group, so that reads from memory alternate with the
// streamed stores a row at a time, as in a plain loop, instead of in bursts of a group (eight
// rows). 16-bit streams, whose outputs are not streamed on AMD EPYC, lost by it at D = 64 and
// 128 and keep the group at once (docs/performance.md, "Tunables: what was tried").
constexpr int64_t kInterleaveShortRows = tuned("kInterleaveShortRows", 1);

// The short-row loop over rows begin ... end - 1, row_at(row) giving a row's pointers: moments a
// group at a time (for the next group ahead of this one's outputs: kMomentsAheadMaxDim,
// kInterleaveShortRows), then each row's outputs by `normalise` (a NormaliseFn, or a callable
// that calls this call's normalise_row instance directly: InlinedNormalise), set up for the
// group at once where the moments are ahead (group_outputs), by output_row otherwise and for the
// rare row float32 lanes do not hold.
template <class SS, class SB, bool kResidual, class Normalise, class RowAt>
void short_rows(const NormForward& a, int64_t begin, int64_t end, const Parameters& w, Affine form,
                const Normalise& normalise, const RowAt& row_at) {
  constexpr int64_t kRows = static_cast<int64_t>(kGroupRows);
  const bool centre = norm_traits(a.norm).centres;
  constexpr bool kInterleaves = kInterleaveShortRows && !SS::kHalf;
  const bool interleave = kInterleaves && a.stream_outputs;
  const bool ahead = interleave || a.dim <= kMomentsAheadMaxDim;
  GroupMoments moments[2];
  GroupOutputs outputs;
  auto take_moments = [&](int64_t first, int slot) {
    if constexpr (SS::kHalf && kResidual) {
      short_half_row_moments<SS, SB, kResidual>(row_at, first, std::min(kRows, end - first), a.dim,
                                                centre, a.eps, moments[slot]);
    } else {
      with_flag(centre, [&](auto centre_c) {
        short_row_moments<SS, SB, kResidual, centre_c()>(
            row_at, first, std::min(kRows, end - first), a.dim, a.eps, moments[slot]);
      });
    }
  };
  if (ahead && begin < end) take_moments(begin, 0);
  with_flag(centre && kInterleaves, [&](auto centre_c) {
    ShortRowSums<SS, SB, kResidual, decltype(centre_c)::value> next_sums;
    int slot = 0;
    for (int64_t first = begin; first < end; first += kRows) {
      const int64_t count = std::min(kRows, end - first);
      const int64_t next_count = std::min(kRows, end - first - kRows);  // <= 0: no next group
      if (!ahead) {
        take_moments(first, slot);
      } else if (!interleave && next_count > 0) {
        take_moments(first + kRows, slot ^ 1);
      }
      const GroupMoments& group = moments[slot];
      if (ahead) group_outputs(a, first, count, group, outputs);
      for (int64_t k = 0; k < count; ++k) {
        // Only the last group is partial: a next group's rows, and its spare lanes, all come
        // before this loop ends.
        if (interleave && next_count > 0) {
          next_sums.add_row(static_cast<size_t>(k), next_count,
                            k < next_count ? row_at(first + kRows + k) : RowPointers<SS, SB>{},
                            a.dim);
        }
        const RowPointers<SS, SB> p = row_at(first + k);
        if (ahead && HWY_LIKELY(outputs.in_float32(k))) {
          normalise(p, outputs.centre(k), outputs.scale(k), w, a.dim, nullptr);
        } else {  // float64 lanes or NaN (output_row stores the same mean and rstd again)
          output_row<SS, SB, kResidual>(a, p, first + k, group.row(k), group.rstd[k], form, w,
                                        normalise, nullptr);
        }
      }
      if (interleave && next_count > 0) next_sums.finish(a.dim, a.eps, moments[slot ^ 1]);
      if (ahead) slot ^= 1;
    }
  });
}

// normalise_row of one affine form and store kind, called directly: inlined into short_rows,
// which saves a call through a pointer per row. Compiled for the two common cases only, float32
// throughout and bfloat16 throughout: each such short_rows instance holds a copy of the
// normalising pass, and for every storage pair they took this file's compile time from 61 to
// 133 s (docs/performance.md, "Tunables: what was tried").
template <class SS, class SB>
constexpr bool kInlinesShortRows = std::is_same_v<SS, SB> &&
                                   (std::is_same_v<SS, Float32Rows> ||
                                    std::is_same_v<SS, HalfRows<narrow::Half::bfloat16>>);

template <class SS, class SB, bool kResidual, Affine kAffine, bool kStream>
struct InlinedNormalise {
  void operator()(const RowPointers<SS, SB>& p, HiLo centre, HiLo rstd, const Parameters& w,
                  int64_t dim, NextRowSums<SS, SB, kResidual>* next) const {
    normalise_row<SS, SB, kAffine, kResidual, kStream>(p, centre, rstd, w, dim, next);
  }
};

// short_rows for this call: the normalising pass inlined where kInlinesShortRows, through
// `pointer` (the call's NormaliseFn) otherwise.
template <class SS, class SB, bool kResidual, class RowAt>
void dispatch_short_rows(const NormForward& a, int64_t begin, int64_t end, const Parameters& w,
                         Affine form, bool stream, NormaliseFn<SS, SB, kResidual> pointer,
                         const RowAt& row_at) {
  if constexpr (kInlinesShortRows<SS, SB>) {
    (void)pointer;
    with_affine(form, [&](auto affine_c) {
      with_flag(stream, [&](auto streams) {
        short_rows<SS, SB, kResidual>(a, begin, end, w, form,
                                      InlinedNormalise<SS, SB, kResidual, affine_c(), streams()>{},
                                      row_at);
      });
    });
  } else {
    short_rows<SS, SB, kResidual>(a, begin, end, w, form, pointer, row_at);
  }
}
#endif  // HWY_TARGET != HWY_SCALAR

// The row loop of a call: what it sets up once (the affine form, the bfloat16 pairs' parameters,
// the normalising pass's instance), then any range of the call's rows (run): short rows a group
// of float64 lanes at a time (short_rows), the others in groups (groups, below).
template <class SS, class SB, bool kResidual>
class RowLoop {
 public:
  // Set up for `rows` rows of the call `a`.
  RowLoop(const NormForward& a, int64_t rows)
      : short_rows_(takes_short(a.dim)),
        form_(affine_form(a.gamma, a.beta, a.zero_centered_gamma)),
        w_{a.gamma, a.beta, nullptr, nullptr},
        stream_(a.stream_outputs) {
    if (short_rows_) return;  // the short rows take no pairs
    (void)rows;               // the scalar target takes no pairs either
    bool pairs = false;
    bool nans = true;
#if HWY_TARGET != HWY_SCALAR
    if constexpr (kPairsAllowed<SS, SB, kResidual>) {
      // What the pairs set up once per call over gamma and beta (checking them, de-interleaving
      // them) costs as much as a row: it pays from a few rows on, not for one (decoding).
      constexpr int64_t kSetUpRows = 4;
      pairs = a.dim % 2 == 0 && rows >= kSetUpRows;
      if (pairs) {
        pair_parameters(w_, a.dim, scratch_.emplace());
        // Pairs stream 32-bit lanes: y must sit on a 4-byte boundary.
        stream_ = stream_ && reinterpret_cast<uintptr_t>(a.y) % 4 == 0;
        // With finite gamma and beta the pairs' rounding skips its NaN handling.
        nans = !(all_finite(a.gamma, a.dim) && all_finite(a.beta, a.dim));
      }
    }
#endif
    normalise_ = pick_normalise<SS, SB, kResidual>(form_, stream_, nans, pairs);
  }
  RowLoop(const RowLoop&) = delete;
  RowLoop& operator=(const RowLoop&) = delete;

  // Rows begin ... end - 1 of the call (as set up).
  void run(const NormForward& a, int64_t begin, int64_t end) const {
#if HWY_TARGET != HWY_SCALAR
    if (short_rows_) {
      dispatch_short_rows<SS, SB, kResidual>(
          a, begin, end, w_, form_, stream_,
          pick_normalise<SS, SB, kResidual>(form_, stream_, true, false),
          [&](int64_t row) { return row_pointers<SS, SB>(a, row); });
      return;
    }
#endif
    groups(a, begin, end);
  }

 private:
  void groups(const NormForward& a, int64_t begin, int64_t end) const;
  static bool takes_short(int64_t dim) {
#if HWY_TARGET != HWY_SCALAR
    return takes_short_rows<SS>(dim);
#else
    (void)dim;
    return false;
#endif
  }

  bool short_rows_;
  Affine form_;
  Parameters w_;
  bool stream_;
  NormaliseFn<SS, SB, kResidual> normalise_ = nullptr;
  // The pairs' parameters; constructed only for them (it looks up the thread's arena), so that
  // a decode call, which takes no pairs, pays nothing for it.
  std::optional<Scratch> scratch_;
};

template <class SS, class SB, bool kResidual>
void norm_forward_rows_as(const NormForward& a, int64_t begin, int64_t end) {
  RowLoop<SS, SB, kResidual>(a, end - begin).run(a, begin, end);
  // Streaming stores are weakly ordered: make them visible before another thread reads y.
  if (a.stream_outputs) hwy::FlushStream();
}

// Rows are done in groups: pass 1 of every row of the group, then their square roots and
// divisions (independent, so they overlap in the pipeline instead of each stalling its row
// for some 40 cycles: as long as a short row's whole pass), then pass 2. Groups of small rows
// only (up to 8 rows, 16 KiB of input), so that a group stays in the L1 cache between passes.
// For a float32 stream, pass 1 of the next group runs inside pass 2 of this one, row k of the
// next beside row k of this (NextRowSums): its loads from memory then overlap this group's
// stores, as a copy's do, instead of the two alternating in bursts.
template <class SS, class SB, bool kResidual>
void RowLoop<SS, SB, kResidual>::groups(const NormForward& a, int64_t begin, int64_t end) const {
  using Elem = typename SS::Elem;
  const int64_t dim = a.dim;
  const bool centre = norm_traits(a.norm).centres;
  const Affine form = form_;
  const Parameters& w = w_;
  const NormaliseFn<SS, SB, kResidual> normalise = normalise_;
  using Next = NextRowSums<SS, SB, kResidual>;
  constexpr int64_t kGroupElements = kGroupBytes / int64_t{sizeof(Elem)};
  const int64_t group = std::clamp<int64_t>(kGroupElements / dim, 1, kMaxGroup);
  RowMoments moments[kMaxGroup];
  RowMoments next_moments[kMaxGroup];
  double rstds[kMaxGroup];
  constexpr bool kInterleaved = !std::is_same_v<Next, NoNextRow>;
  // Rows shorter than kInterleaveMinDim run their sums alone: the interleaving's
  // set-up per row costs more than it saves there.
  constexpr int64_t kInterleaveMinDim = tuned("kInterleaveMinDim", 512);
  const bool interleave = kInterleaved && dim >= kInterleaveMinDim;
  for (int64_t first = begin; first < end; first += group) {
    const int64_t count = std::min(group, end - first);
    if (!interleave || first == begin) {
      for (int64_t k = 0; k < count; ++k) {
        moments[k] =
            row_moments<SS, SB, kResidual>(row_pointers<SS, SB>(a, first + k), dim, centre);
      }
    }
    for (int64_t k = 0; k < count; ++k) rstds[k] = rstd_of(moments[k].variance, a.eps);
    for (int64_t k = 0; k < count; ++k) {
      const int64_t row = first + k;
      const RowPointers<SS, SB> p = row_pointers<SS, SB>(a, row);
      // Row `row` normalised, stepping `next` (the sums of the row a group further on) if any.
      auto normalise_this = [&](Next* next) {
        output_row<SS, SB, kResidual>(a, p, row, moments[k], rstds[k], form, w, normalise, next);
      };
      if constexpr (kInterleaved) {
        if (interleave && row + group < end) {
          Next next =
              float64_lane_run<SB, kResidual>(row_pointers<SS, SB>(a, row + group), dim, centre);
          normalise_this(&next);
          next_moments[k] = float64_lane_moments(next, dim, centre);
        } else {
          normalise_this(nullptr);
        }
      } else {
        normalise_this(nullptr);
      }
    }
    if (interleave) std::copy(next_moments, next_moments + group, moments);
  }
}

// ---- post-norm: the dropout input stage ------------------------------------------------------

// The post-norm row loop: as norm_forward_rows_as, with each block's input h = x + Dropout(s)
// built first (dropout_input-inl.h) into a float32 buffer of one block of rows (kGroupBytes: in
// the L1 cache), from which both passes read; short rows as short_rows does. The buffer comes
// from the thread's scratch (scratch.hpp), so steady-state calls do not allocate. y may be x or
// s: a block's rows are all read before any of its outputs is written. (Building the next group
// inside the normalising pass, as the float32 forward steps its sums, was slower: the Philox
// work then competes with the normalising pass instead of overlapping its stores.)
template <class SB>
void post_norm_rows_as(const NormForward& a, int64_t begin, int64_t end) {
  using SH = Float32Rows;  // h
  const int64_t dim = a.dim;
  const bool centre = norm_traits(a.norm).centres;
  const Affine form = affine_form(a.gamma, a.beta, a.zero_centered_gamma);
  const Parameters w{a.gamma, a.beta, nullptr, nullptr};
  const NormaliseFn<SH, SB, false> normalise =
      pick_normalise<SH, SB, false>(form, a.stream_outputs, true, false);
  const DropoutInput& stage = *a.dropout;
  const DropoutInputFn build =
      pick_dropout_input<false>(a.storage, stage.s_storage, stage.p != 0.0f);
  const DropoutStream stream(stage.seed, stage.p);
  const int64_t x_size = dtype_size(a.storage), s_size = dtype_size(stage.s_storage);
  // Rows built per call of the input stage: kGroupBytes of float32 (in L1), normalised in groups
  // of up to kMaxGroup rows (or of short rows).
  const int64_t block = std::max<int64_t>(1, kGroupBytes / int64_t{sizeof(float)} / dim);
  Scratch scratch;
  float* const h = scratch.take<float>(block * dim);
  auto* const y = static_cast<typename SB::Elem*>(a.y);
  // Builds each block of rows in h, then normalise_block(block_first, block_end) normalises it.
  auto for_each_block = [&](const auto& normalise_block) {
    for (int64_t block_first = begin; block_first < end; block_first += block) {
      const int64_t block_end = std::min(end, block_first + block);
      // The block's rows are contiguous in x, s and the buffer: one call builds them all.
      const int64_t at = block_first * dim;
      build(stream, static_cast<const uint8_t*>(a.x) + at * x_size,
            static_cast<const uint8_t*>(stage.s) + at * s_size, h, nullptr,
            (block_end - block_first) * dim, stage.first_element + static_cast<uint64_t>(at),
            (a.rows - block_first) * dim);
      normalise_block(block_first, block_end);
    }
  };
  // Row `row` of the block starting at block_first: h from the buffer, y in place.
  auto row_in_block = [&](int64_t block_first, int64_t row) {
    return RowPointers<SH, SB>{h + (row - block_first) * dim, nullptr, nullptr, y + row * dim};
  };
#if HWY_TARGET != HWY_SCALAR
  // Short rows where a block fills a group (D <= 512 on AVX-512): a smaller block would sum
  // its last row again in the spare lanes, and at D = 1024 (four rows a block) the row loop was
  // faster.
  if (takes_short_rows<SH>(dim) && block >= static_cast<int64_t>(hn::MaxLanes(DoubleTag()))) {
    for_each_block([&](int64_t block_first, int64_t block_end) {
      dispatch_short_rows<SH, SB, false>(
          a, block_first, block_end, w, form, a.stream_outputs, normalise,
          [&](int64_t row) { return row_in_block(block_first, row); });
    });
    if (a.stream_outputs) hwy::FlushStream();
    return;
  }
#endif
  RowMoments moments[kMaxGroup];
  double rstds[kMaxGroup];
  for_each_block([&](int64_t block_first, int64_t block_end) {
    for (int64_t first = block_first; first < block_end; first += kMaxGroup) {
      const int64_t count = std::min(kMaxGroup, block_end - first);
      for (int64_t k = 0; k < count; ++k) {
        moments[k] = row_moments<SH, SB, false>(row_in_block(block_first, first + k), dim, centre);
      }
      for (int64_t k = 0; k < count; ++k) {
        rstds[k] = rstd_of(moments[k].variance, a.eps);
      }
      for (int64_t k = 0; k < count; ++k) {
        output_row<SH, SB, false>(a, row_in_block(block_first, first + k), first + k, moments[k],
                                  rstds[k], form, w, normalise, nullptr);
      }
    }
  });
  if (a.stream_outputs) hwy::FlushStream();
}

// h = x + r rounded to h's type and stored, for rows begin ... end - 1 (contiguous). Also the
// add op's whole work (residual_add_kernels.cpp).
template <class SS, class SB>
void add_rows(const NormForward& a, int64_t begin, int64_t end) {
  const RowPointers<SS, SB> p = row_pointers<SS, SB>(a, begin);
  const int64_t count = (end - begin) * a.dim;
  int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const FloatTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  for (; i + 2 * n <= count; i += 2 * n) {
    // A step's inputs are loaded before its h is stored: h may be x or r.
    const auto lo = input<SS, SB, true>(df, p, i);
    const auto hi = input<SS, SB, true>(df, p, i + n);
    store_step<SS, true, 2>(df, lo, hi, p.h + i, false);
  }
#endif
  for (; i < count; ++i) store_one<SS>(p.h, i, input_one<SS, SB, true>(p, i));
}

// The pre-norm of a 16-bit residual stream whose outputs are not streamed (streams_output): a
// block of rows at a time, h = x + r is stored first (add_rows), then the plain norm runs on h
// from the cache (RowLoop, set up once). The fused passes formed and rounded h twice, once for
// the statistics and once for the outputs, and could not read bfloat16 rows as 32-bit pairs.
// h is stored kAddBlockBytes at a time. Same bits: the norm sees the same h, and
// the pairs give normalise_row's bits.
constexpr int64_t kAddBlockBytes = tuned("kAddBlockBytes", int64_t{256} << 10);
static_assert(kAddBlockBytes >= 1, "a block holds at least one row");

template <class SS, class SB>
void add_then_norm_rows(const NormForward& a, int64_t begin, int64_t end) {
  NormForward plain = a;
  plain.x = a.h;
  plain.residual = nullptr;
  plain.h = nullptr;
  const int64_t block = std::max<int64_t>(
      1, kAddBlockBytes / (a.dim * static_cast<int64_t>(sizeof(typename SS::Elem))));
  const RowLoop<SS, SB, false> loop(plain, end - begin);
  for (int64_t first = begin; first < end; first += block) {
    const int64_t last = std::min(end, first + block);
    add_rows<SS, SB>(a, first, last);
    loop.run(plain, first, last);
  }
}

// Post-norm, h = x + Dropout(s) built in float32 rows, for y of any storage type.
inline void post_norm_forward_rows(const NormForward& a, int64_t begin, int64_t end) {
  with_storage(a.branch_storage,
               [&](auto y_policy) { post_norm_rows_as<decltype(y_policy)>(a, begin, end); });
}

// The plain norm and pre-norm for a residual stream (x, h) of storage SS, the branch (r, y) of
// any storage type.
template <class SS>
void stream_forward_rows(const NormForward& a, int64_t begin, int64_t end) {
  with_storage(a.branch_storage, [&](auto branch_storage) {
    using SB = decltype(branch_storage);
    if constexpr (SS::kHalf) {
      if (a.residual && !a.stream_outputs) {
        HWY_DASSERT(a.h != nullptr);  // normalised from h as stored: a 16-bit stream keeps h
        add_then_norm_rows<SS, SB>(a, begin, end);
        return;
      }
    }
    with_flag(a.residual != nullptr,
              [&](auto residual) { norm_forward_rows_as<SS, SB, residual()>(a, begin, end); });
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace addnorm::cpu
HWY_AFTER_NAMESPACE();

#endif  // ADDNORM_OPS_CPU_NORM_FORWARD_INL_H_
